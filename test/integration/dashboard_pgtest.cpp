// The web dashboard end to end (runtime/dashboard/README.md): a real node on
// the real PostgreSQL, driven by headless Chromium over the DevTools protocol
// (test/support/cdp_client.hpp). Each page loads at desktop and at phone
// width without console errors or exceptions, shows what the API says, and
// the Replay button replays a dead-lettered request with an audited
// operator action. Screenshots land in the build directory.

#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/cdp_tab.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

const char* const token = "dash-t0ken";

std::string ingest_body(const std::string& key, const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(},"control":{"idempotency_key":")" + key
         + R"("}})";
}

/// Now as RFC 3339 UTC, e.g. 2026-11-26T10:00:00Z.
std::string utc_now() {
  auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class Dashboard : public node_fixture {
 protected:
  void SetUp() override {
    use_database("dashboard");
    use_files("dashboard");
    // health fails its first three attempts of every subrequest: one
    // request errors with a dead letter, and its replay then succeeds.
    ASSERT_TRUE(start_node(
      node_head("dash-test", 5, "request_timeout_ms = 10000\n")
        + "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n"
          "[[butler]]\nname = \"health\"\ndescription = \"Health matters\"\n"
          "keywords = [\"pill\", \"doctor\"]\nmax_concurrent_sessions = 2\n"
          "[butler.runtime]\nturn_ms = 5\nfail_attempts = 3\n"
          "fail_class = \"target_unavailable\"\n"
          "[[butler]]\nname = \"finance\"\ndescription = \"Money\"\n"
          "keywords = [\"invoice\", \"bank\"]\nmax_concurrent_sessions = 3\n"
          "[butler.runtime]\nturn_ms = 5\n"
          "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 2\n"
          "[butler.runtime]\nturn_ms = 5\n"
          "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
        + dir_ + "/outbox.jsonl\"\n",
      {{"BUTLERS_HTTP_TOKEN", token}}));
    http_->token(token);
    shots_ = BUTLERS_DASHBOARD_SCREENSHOTS;
    std::filesystem::create_directories(shots_);
  }

  std::string ingest(const std::string& key, const std::string& text) {
    auto r = http_->post("/v1/ingest", ingest_body(key, text));
    EXPECT_EQ(r.status, 202) << r.body;
    rapidjson::Document d;
    json::parse(r.body, d);
    return d.IsObject() && d.HasMember("request_id")
             ? d["request_id"].GetString()
             : std::string{};
  }

  /// GET `path` with the token, parsed; an empty object on failure.
  rapidjson::Document get(const std::string& path) {
    rapidjson::Document d;
    auto r = http_->get(path);
    if (r.status != 200 || json::parse(r.body, d) || !d.IsObject())
      d.SetObject();
    return d;
  }

  std::string state_of(const std::string& id) {
    auto d = get("/api/requests/" + id);
    return d.HasMember("data") ? d["data"]["lifecycle_state"].GetString() : "";
  }

  std::string shots_;
};

TEST_F(Dashboard, EveryPageShowsTheApiAtBothWidthsAndReplayIsAudited) {
  // -- data: a completed request, an errored one with a dead letter
  // ------------
  auto done = ingest("d-1", "Please pay the invoice from the bank.");
  auto failed = ingest("d-2", "I took my pill late.");
  ASSERT_FALSE(done.empty());
  ASSERT_FALSE(failed.empty());
  ASSERT_TRUE(eventually(
    [&] {
      return state_of(done) == "parsed";
    },
    60s));
  ASSERT_TRUE(eventually(
    [&] {
      return state_of(failed) == "errored";
    },
    60s));
  auto dead = get("/api/dead-letters?state=open");
  ASSERT_TRUE(dead.HasMember("data")) << "no dead letters answer";
  ASSERT_EQ(dead["meta"]["total"].GetInt(), 1);
  EXPECT_EQ(std::string{dead["data"][0]["request_id"].GetString()}, failed);
  // A connector heartbeat, where the node has the connector API.
  bool has_connectors = http_->get("/api/connectors").status == 200;
  if (has_connectors) {
    auto hb
      = http_->post("/v1/connectors/heartbeat",
                    R"({"schema_version":"connector.heartbeat.v1",)"
                    R"("connector":{"connector_type":"telegram_bot",)"
                    R"("endpoint_identity":"dash-bot","instance_id":"i-1"},)"
                    R"("status":{"state":"healthy","uptime_s":5},)"
                    R"("counters":{"messages_ingested":7,"messages_failed":1},)"
                    R"("sent_at":")"
                      + utc_now() + R"("})");
    EXPECT_LT(hb.status, 300) << hb.body;
    EXPECT_TRUE(eventually(
      [&] {
        return http_->get("/api/connectors").body.find("dash-bot")
               != std::string::npos;
      },
      60s));
  }

  // -- the shell: open, typed, cached by ETag, strict CSP
  // -----------------------
  http_client anon{"127.0.0.1", port_};
  auto shell = anon.get("/");
  ASSERT_EQ(shell.status, 200);
  EXPECT_EQ(shell.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(shell.headers["content-security-policy"].find("script-src 'self'"),
            std::string::npos);
  EXPECT_FALSE(shell.headers["etag"].empty());
  EXPECT_EQ(anon.get("/api/overview").status, 401);

  // -- the browser
  // ----------------------------------------------------------------
  std::string why;
  auto browser = cdp_client::launch(chromium_path(), dir_ + "/chromium",
                                    shots_ + "/chromium.log", why);
  ASSERT_TRUE(browser) << why;
  auto target = browser->call("Target.createTarget",
                              R"({"url":"about:blank"})");
  ASSERT_TRUE(target.ok) << target.json;
  rapidjson::Document td;
  json::parse(target.json, td);
  auto attach = browser->call("Target.attachToTarget",
                              R"({"targetId":)"
                                + json::quote(td["targetId"].GetString())
                                + R"(,"flatten":true})");
  ASSERT_TRUE(attach.ok) << attach.json;
  rapidjson::Document ad;
  json::parse(attach.json, ad);
  tab page{*browser, ad["sessionId"].GetString()};
  for (auto domain : {"Page.enable", "Runtime.enable", "Log.enable"})
    ASSERT_TRUE(browser->call(domain, "{}", ad["sessionId"].GetString()).ok)
      << domain;
  ASSERT_TRUE(page.viewport(1280, 860, false));
  auto base = "http://127.0.0.1:" + std::to_string(port_) + "/";
  ASSERT_TRUE(browser
                ->call("Page.navigate",
                       R"({"url":)" + json::quote(base + "#/overview") + "}",
                       ad["sessionId"].GetString())
                .ok);

  // -- the token form: asked once, kept in sessionStorage ---------------------
  ASSERT_TRUE(page.wait_for("document.getElementById('token-form')"))
    << page.main_text();
  page.screenshot(shots_ + "/token-desktop.png");
  // The only errors so far: the 401 that made the page ask.
  for (auto& e : page.errors())
    EXPECT_NE(e.find("401"), std::string::npos) << e;
  page.clear();
  page.eval(std::string{"document.getElementById('token').value = '"} + token
            + "'; document.getElementById('token-form').requestSubmit(); "
              "true");
  ASSERT_TRUE(page.wait_for("document.getElementById('card-received')"))
    << page.main_text();
  EXPECT_EQ(page.eval("sessionStorage.getItem('butlers.token')"),
            json::quote(token));

  auto overview = get("/api/overview");
  ASSERT_TRUE(overview.HasMember("data"));
  auto& totals = overview["data"]["totals"];
  auto card = [&](const char* id) {
    return "document.querySelector('#" + std::string{id}
           + " .value').textContent";
  };

  struct width {
    const char* name;
    int w, h;
    bool mobile;
  };
  for (auto [name, w, h, mobile] :
       {width{"desktop", 1280, 860, false}, width{"phone", 390, 844, true}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(page.viewport(w, h, mobile));
    auto shot = [&](const std::string& what) {
      EXPECT_GT(page.screenshot(shots_ + "/" + what + "-" + name + ".png"),
                1000u);
      auto errs = page.errors();
      EXPECT_TRUE(errs.empty()) << what << ": " << errs.front();
      page.clear();
    };
    // The page fits the phone: nothing wider than the viewport.
    auto fits = [&] {
      return page.eval("document.documentElement.scrollWidth <= "
                       "window.innerWidth")
             == "true";
    };

    // Overview: the API's totals.
    ASSERT_TRUE(page.open("#/overview", "overview"));
    EXPECT_TRUE(page.wait_for(
      card("card-received")
      + " === " + json::quote(std::to_string(totals["received"].GetInt64()))))
      << page.main_text();
    EXPECT_TRUE(page.wait_for(card("card-dead") + " === '1'"))
      << page.main_text();
    EXPECT_TRUE(fits());
    shot("overview");

    // Requests: both, with their states; then one request's timeline.
    ASSERT_TRUE(page.open("#/requests", "requests"));
    auto text = page.main_text();
    EXPECT_NE(text.find(done), std::string::npos) << text;
    EXPECT_NE(text.find(failed), std::string::npos) << text;
    EXPECT_NE(text.find("parsed"), std::string::npos) << text;
    EXPECT_NE(text.find("errored"), std::string::npos) << text;
    {
      auto listed = get("/api/requests");
      ASSERT_TRUE(listed.HasMember("meta"));
      auto total = std::to_string(listed["meta"]["total"].GetInt());
      EXPECT_NE(text.find(" of " + total), std::string::npos) << text;
    }
    EXPECT_TRUE(fits());
    shot("requests");
    ASSERT_TRUE(page.open("#/requests?q=" + failed.substr(0, 32), "requests"));
    text = page.main_text();
    EXPECT_NE(text.find(failed), std::string::npos) << text;
    EXPECT_EQ(text.find(done), std::string::npos) << text;
    ASSERT_TRUE(page.open("#/requests/" + failed, "requests"));
    EXPECT_EQ(page.eval("document.getElementById('request-id').textContent"),
              json::quote(failed));
    text = page.main_text();
    EXPECT_NE(text.find("errored"), std::string::npos) << text;
    EXPECT_NE(text.find("target_unavailable"), std::string::npos) << text;
    EXPECT_NE(text.find("dead letter: health"), std::string::npos) << text;
    EXPECT_NE(text.find("attempt for health"), std::string::npos) << text;
    EXPECT_TRUE(fits());
    shot("request");
    // A parsed request's page has no replay form, and nothing in its place.
    ASSERT_TRUE(page.open("#/requests/" + done, "requests"));
    EXPECT_EQ(page.eval("[...document.getElementById('main').childNodes]"
                        ".some(n => n.nodeType === 3)"),
              "false")
      << page.main_text();

    // Butlers: the names the API lists.
    ASSERT_TRUE(page.open("#/butlers", "butlers"));
    auto butlers = get("/api/butlers");
    ASSERT_TRUE(butlers.HasMember("data"));
    std::set<std::string> api_names;
    for (auto& b : butlers["data"].GetArray())
      api_names.insert(b["name"].GetString());
    EXPECT_TRUE(api_names.count("health") && api_names.count("finance"));
    rapidjson::Document names;
    json::parse(page.eval("[...document.querySelectorAll('.butler-name')]"
                          ".map(x => x.textContent)"),
                names);
    std::set<std::string> shown;
    if (names.IsArray())
      for (auto& n : names.GetArray())
        shown.insert(n.GetString());
    EXPECT_EQ(shown, api_names);
    EXPECT_TRUE(fits());
    shot("butlers");

    // Threads: live from the summary stream.
    ASSERT_TRUE(page.open("#/threads", "threads"));
    ASSERT_TRUE(page.wait_for("document.getElementById('stream-state')"
                              ".textContent.startsWith('Live')"));
    auto thread = std::string{"t-dash-"} + name;
    // The stream may connect just after the page says so: turn until the
    // page shows the thread (each turn publishes a summary).
    int n = 0;
    EXPECT_TRUE(eventually(
      [&] {
        http_->post("/v1/threads/" + thread + "/turns",
                    R"({"message_id":"m)" + std::to_string(++n)
                      + R"(","text":"hello"})");
        return page.wait_for("document.getElementById('threads').innerText"
                             ".includes("
                               + json::quote(thread) + ")",
                             5s);
      },
      60s))
      << page.main_text();
    EXPECT_TRUE(fits());
    shot("threads");

    // Connectors: the heartbeat's connector, online. Where this node has
    // no connector API yet (its branch not merged), the page says so and
    // the one error is that 404.
    ASSERT_TRUE(page.open("#/connectors", "connectors"));
    text = page.main_text();
    if (has_connectors) {
      EXPECT_NE(text.find("telegram_bot / dash-bot"), std::string::npos)
        << text;
      EXPECT_NE(text.find("online"), std::string::npos) << text;
      EXPECT_TRUE(fits());
    } else {
      EXPECT_NE(text.find("serves no connector API"), std::string::npos)
        << text;
      auto errs = page.errors();
      ASSERT_EQ(errs.size(), 1u);
      EXPECT_NE(errs[0].find("404"), std::string::npos) << errs[0];
      EXPECT_NE(errs[0].find("/api/connectors"), std::string::npos) << errs[0];
      page.clear();
    }
    shot("connectors");

    // Dead letters: the one the API lists.
    ASSERT_TRUE(page.open("#/dead-letters?state=all", "dead-letters"));
    text = page.main_text();
    EXPECT_NE(text.find(failed), std::string::npos) << text;
    EXPECT_NE(text.find("target_unavailable"), std::string::npos) << text;
    EXPECT_TRUE(fits());
    shot("dead-letters");

    // Pending approvals: none asked here (the list with a question in it:
    // ChatApprovals.*).
    ASSERT_TRUE(page.open("#/approvals", "approvals"));
    text = page.main_text();
    EXPECT_NE(text.find("0 waiting"), std::string::npos) << text;
    EXPECT_NE(text.find("No question is waiting"), std::string::npos) << text;
    EXPECT_EQ(http_->get("/api/approvals?limit=500").status, 400);
    EXPECT_TRUE(fits());
    shot("approvals-none");
  }

  // -- Replay: asks who and why, replays, audited
  // ------------------------------
  ASSERT_TRUE(page.viewport(1280, 860, false));
  ASSERT_TRUE(page.open("#/dead-letters", "dead-letters"));
  auto row = "document.querySelector('.replay[data-request=\"" + failed
             + "\"]')";
  ASSERT_TRUE(page.wait_for(row)) << page.main_text();
  page.eval(row + ".querySelector('.replay-open').click(); true");
  ASSERT_TRUE(page.wait_for(row + ".querySelector('.replay-who')"));
  page.eval(row + ".querySelector('.replay-who').value = 'ops-dash'; " + row
            + ".querySelector('.replay-why').value = 'health is back'; " + row
            + ".querySelector('form').requestSubmit(); true");
  ASSERT_TRUE(page.wait_for(row + ".querySelector('.notice.ok')"))
    << page.main_text();
  page.screenshot(shots_ + "/replay-desktop.png");
  EXPECT_TRUE(page.errors().empty()) << page.errors().front();
  ASSERT_TRUE(eventually(
    [&] {
      return state_of(failed) == "parsed";
    },
    60s));
  auto after = get("/api/requests/" + failed);
  ASSERT_TRUE(after.HasMember("data"));
  auto& actions = after["data"]["operator_actions"];
  ASSERT_EQ(actions.Size(), 1u);
  EXPECT_STREQ(actions[0]["who"].GetString(), "ops-dash");
  EXPECT_STREQ(actions[0]["why"].GetString(), "health is back");
  EXPECT_STREQ(actions[0]["action"].GetString(), "replay");
  EXPECT_STREQ(actions[0]["result"].GetString(), "replayed");
  EXPECT_FALSE(after["data"]["dead_letters"][0]["replayed_at"].IsNull());
  EXPECT_EQ(browser->dropped_events(), 0u);
}

TEST_F(Dashboard, ApiPagesAreBoundedAndNameABadParameter) {
  for (int i = 0; i < 3; ++i)
    ingest("p-" + std::to_string(i), "What a lovely day.");
  auto page = get("/api/requests?limit=2");
  ASSERT_TRUE(page.HasMember("meta"));
  EXPECT_EQ(page["data"].Size(), 2u);
  EXPECT_EQ(page["meta"]["total"].GetInt(), 3);
  EXPECT_EQ(page["meta"]["limit"].GetInt(), 2);
  EXPECT_TRUE(page["meta"]["has_more"].GetBool());
  auto rest = get("/api/requests?limit=2&offset=2");
  EXPECT_EQ(rest["data"].Size(), 1u);
  EXPECT_FALSE(rest["meta"]["has_more"].GetBool());
  auto big = http_->get("/api/requests?limit=201");
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(big.body.find("limit"), std::string::npos) << big.body;
  auto bad = http_->get("/api/dead-letters?state=nope");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("state"), std::string::npos) << bad.body;
  EXPECT_EQ(http_->get("/api/requests/not-a-uuid").status, 400);
  EXPECT_EQ(http_->get("/api/requests/00000000-0000-4000-8000-000000000000")
              .status,
            404);
  // The shell revalidates by ETag.
  auto js = http_->get("/assets/app.js");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.headers["content-type"], "text/javascript; charset=utf-8");
  EXPECT_EQ(js.headers["cache-control"], "no-cache");
  EXPECT_EQ(http_->get("/assets/nope.js").status, 404);
}

} // namespace
} // namespace butlers::test
