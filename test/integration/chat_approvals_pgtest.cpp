// Tool approvals in the web chat and on the dashboard (runtime/approvals.md,
// runtime/dashboard/README.md): a real node on the real PostgreSQL whose
// `general` butler runs butlers-fake-codex, which asks approval for
// `rm -rf build` (item/commandExecution/requestApproval) in every turn and
// ends its reply with "approval: <decision>", so the page shows what
// reached the model. Headless Chromium over the DevTools protocol, at
// desktop and at phone width, with no console errors: the person sends a
// message in /chat, the question appears with Approve and Deny, a mouse
// click on Approve lets the run go on and its answer appears; Deny reaches
// the model as a refusal. Meanwhile the dashboard's "Pending approvals"
// page (another tab) and GET /api/approvals list the question. A question
// still waiting is there again after a reload; an answer given elsewhere
// (the API) and a question that expires update the card.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/cdp_tab.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

const char* const token = "chat-appr-t0ken";

/// A JavaScript string literal of `s`.
std::string js(const std::string& s) {
  return json::quote(s);
}

/// The value of a JSON string answer of `tab::eval`, "" otherwise.
std::string str(const std::string& v) {
  rapidjson::Document d;
  if (json::parse(v, d) || !d.IsString())
    return {};
  return d.GetString();
}

class ChatApprovals : public node_fixture {
 protected:
  void SetUp() override {
    use_database("chatappr");
    use_files("chatappr");
    auto codex = "[\"env\", \"FAKE_CODEX_APPROVAL=1\", "
                 + json::quote(BUTLERS_FAKE_CODEX) + "]";
    // general asks its starter and waits up to 5 min; quick's questions
    // expire after 2 s.
    ASSERT_TRUE(start_node(
      node_head("chat-approvals-test", 5, "request_timeout_ms = 10000\n")
        + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
          "approvals = \"ask\"\napproval_timeout_s = 300\n"
          "[butler.runtime]\nkind = \"cli\"\nfamily = \"codex\"\ncommand = "
        + codex
        + "\n[[butler]]\nname = \"quick\"\ndescription = \"Quick\"\n"
          "keywords = [\"quick\"]\napprovals = \"ask\"\n"
          "approval_timeout_s = 2\n[butler.runtime]\nkind = \"cli\"\n"
          "family = \"codex\"\ncommand = "
        + codex + "\n[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
        + "/outbox.jsonl\"\n",
      {{"BUTLERS_HTTP_TOKEN", token}}));
    http_->token(token);
    shots_ = BUTLERS_DASHBOARD_SCREENSHOTS;
    std::filesystem::create_directories(shots_);
  }

  /// The columns of approval `id`: status, answered_by, tool, summary,
  /// requester_channel, requester_sender, run_id, requester_thread.
  std::vector<std::string> row(const std::string& id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT status, coalesce(answered_by, ''), tool, "
                            "summary, requester_channel, requester_sender, "
                            "run_id, requester_thread FROM approvals WHERE "
                            "approval_id = $1::uuid",
                            id);
    std::vector<std::string> out;
    if (!r.empty())
      for (auto f : r[0])
        out.push_back(f.as<std::string>());
    return out;
  }

  /// Opens a tab on `path` of the node and signs in through its token form.
  std::string signed_in_tab(cdp_client& browser, const std::string& path,
                            const std::string& ready) {
    std::string why;
    auto session = open_tab(browser, why);
    EXPECT_FALSE(session.empty()) << why;
    if (session.empty())
      return {};
    tab page{browser, session};
    page.viewport(1280, 860, false);
    auto url = "http://127.0.0.1:" + std::to_string(port_) + path;
    EXPECT_TRUE(
      browser.call("Page.navigate", R"({"url":)" + js(url) + "}", session).ok);
    EXPECT_TRUE(page.wait_for("document.getElementById('token-form')"));
    // Before the token, the page's first read is refused: 401 only.
    for (auto& e : page.errors())
      EXPECT_NE(e.find("401"), std::string::npos) << e;
    page.clear();
    page.eval(std::string{"document.getElementById('token').value = '"} + token
              + "'; document.getElementById('token-form').requestSubmit(); "
                "true");
    EXPECT_TRUE(page.wait_for(ready));
    return session;
  }

  std::string shots_;
};

/// The selector of the card of approval `id`.
std::string card_of(const std::string& id) {
  return ".approval[data-approval=" + js(id) + "]";
}

/// Whether the card of `id` shows `status` and no button any more.
std::string decided(const std::string& id, const std::string& status) {
  return "document.querySelector(" + js(card_of(id))
         + ").dataset.status === " + js(status) + " && !document.querySelector("
         + js(card_of(id) + " button") + ")";
}

TEST_F(ChatApprovals, ApproveAndDenyInThePageAtBothWidths) {
  std::string why;
  auto browser = cdp_client::launch(chromium_path(), dir_ + "/chromium",
                                    shots_ + "/chat-approvals-chromium.log",
                                    why);
  ASSERT_TRUE(browser) << why;
  // The dashboard's pending approvals in one tab, the chat in another.
  auto dash_session = signed_in_tab(*browser, "/#/approvals",
                                    "document.body.dataset.page === "
                                    "'approvals' && document.getElementById("
                                    "'main').dataset.ready === 'true'");
  ASSERT_FALSE(dash_session.empty());
  tab dash{*browser, dash_session};
  EXPECT_TRUE(
    dash.wait_for("document.getElementById('approvals-total').textContent "
                  "=== '0 waiting'"));
  auto chat_session = signed_in_tab(*browser, "/chat",
                                    "document.body.dataset.ready === 'true'");
  ASSERT_FALSE(chat_session.empty());
  tab page{*browser, chat_session};
  auto front = [&](const std::string& session) {
    EXPECT_TRUE(browser->call("Page.bringToFront", "{}", session).ok);
  };
  auto sender = str(page.eval("localStorage.getItem('butlers.chat.sender')"));
  ASSERT_EQ(sender.rfind("web:", 0), 0u) << sender;

  struct width {
    const char* name;
    int w, h;
    bool mobile;
  };
  for (auto [name, w, h, mobile] :
       {width{"desktop", 1280, 860, false}, width{"phone", 390, 844, true}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(page.viewport(w, h, mobile));
    ASSERT_TRUE(dash.viewport(w, h, mobile));
    auto fits = [](tab& t) {
      return t.eval("document.documentElement.scrollWidth <= "
                    "window.innerWidth")
             == "true";
    };
    // Screenshots of the chat; no console errors in either tab.
    auto shot = [&](const std::string& what) {
      EXPECT_GT(page.screenshot(shots_ + "/chat-" + what + "-" + name + ".png"),
                1000u);
      for (auto* t : {&page, &dash}) {
        auto errs = t->errors();
        EXPECT_TRUE(errs.empty()) << what << ": " << errs.front();
      }
      page.clear();
    };
    auto messages = [&] {
      return page.eval("document.getElementById('messages').innerText");
    };
    auto pending = std::string{".approval[data-status=pending]"};
    // Sends `text` to `butler` with a click on Send; the approval id of the
    // question it is asked.
    auto ask = [&](const std::string& butler, const std::string& text) {
      page.eval("document.getElementById('butler').value = " + js(butler)
                + "; document.getElementById('text').value = " + js(text)
                + "; true");
      EXPECT_TRUE(page.click("#send"));
      EXPECT_TRUE(page.wait_for("document.querySelector(" + js(pending) + ")"))
        << messages();
      return str(page.eval("document.querySelector(" + js(pending)
                           + ").dataset.approval"));
    };
    // The stored answer of the run that asked `id`, once it is on the page.
    auto answer_of = [&](const std::string& id, const std::string& decision) {
      auto run = row(id).at(6);
      EXPECT_TRUE(page.wait_for(
        "[...document.querySelectorAll('.msg.assistant')].some(m => "
        "m.dataset.run === "
        + js(run) + " && m.innerText.includes(" + js("approval: " + decision)
        + "))"))
        << messages();
    };

    page.eval("document.getElementById('new-thread').click(); true");
    ASSERT_TRUE(page.wait_for("document.getElementById('chat').dataset."
                              "attached === 'true'"));
    auto thread = str(page.eval("localStorage.getItem('butlers.chat.thread')"));

    // -- Approve: the question is shown, a click lets the run go on -------
    auto id = ask("general", "clean the build");
    ASSERT_EQ(id.size(), 36u) << messages();
    auto card = card_of(id);
    auto text = str(
      page.eval("document.querySelector(" + js(card) + ").innerText"));
    EXPECT_NE(text.find("general asks to use shell"), std::string::npos)
      << text;
    EXPECT_NE(text.find("rm -rf build"), std::string::npos) << text;
    EXPECT_NE(text.find("denied at"), std::string::npos) << text;
    // The run waits: its live answer has begun ("echo: ") and is not done.
    EXPECT_EQ(page.eval("document.getElementById('chat').dataset.running"),
              js("true"));
    auto stored = row(id);
    ASSERT_EQ(stored.size(), 8u);
    EXPECT_EQ(stored[0], "pending");
    EXPECT_EQ(stored[2], "shell");
    EXPECT_EQ(stored[4], "api");
    EXPECT_EQ(stored[5], sender);
    EXPECT_EQ(stored[7], thread);
    EXPECT_TRUE(fits(page));

    // The dashboard lists it: the API and the page.
    auto list = http_->get("/api/approvals");
    ASSERT_EQ(list.status, 200) << list.body;
    rapidjson::Document d;
    ASSERT_FALSE(json::parse(list.body, d)) << list.body;
    ASSERT_TRUE(d["data"].IsArray() && d["data"].Size() == 1) << list.body;
    auto& item = d["data"][0];
    EXPECT_EQ(std::string{item["approval_id"].GetString()}, id);
    EXPECT_EQ(std::string{item["run_id"].GetString()}, stored[6]);
    EXPECT_EQ(std::string{item["butler"].GetString()}, "general");
    EXPECT_EQ(std::string{item["tool"].GetString()}, "shell");
    EXPECT_EQ(std::string{item["summary"].GetString()}, stored[3]);
    EXPECT_EQ(std::string{item["requester_sender"].GetString()}, sender);
    EXPECT_GT(item["expires_at_unix_ms"].GetInt64(), 0);
    EXPECT_EQ(d["meta"]["total"].GetInt64(), 1);
    EXPECT_EQ(http_->get("/api/approvals?q=quick").body.find(id),
              std::string::npos);
    EXPECT_EQ(http_->get("/api/approvals?limit=0").status, 400);
    // Read afresh (a background tab's timers may be slowed down).
    front(dash_session);
    ASSERT_TRUE(dash.open("#/overview", "overview"));
    ASSERT_TRUE(dash.open("#/approvals", "approvals"));
    ASSERT_TRUE(
      dash.wait_for("document.getElementById('approvals-total').textContent "
                    "=== '1 waiting' && document.getElementById('main')."
                    "innerText.includes("
                    + js(stored[6]) + ")"))
      << dash.main_text();
    auto row_text = dash.main_text();
    for (auto* want : {"general", "shell", "rm -rf build", sender.c_str()})
      EXPECT_NE(row_text.find(want), std::string::npos) << want << row_text;
    EXPECT_TRUE(fits(dash));
    EXPECT_GT(dash.screenshot(shots_ + "/approvals-" + name + ".png"), 1000u);
    front(chat_session);
    shot("approval-pending");

    ASSERT_TRUE(page.click(card + " button.approve")) << messages();
    ASSERT_TRUE(page.wait_for(decided(id, "approved"))) << messages();
    answer_of(id, "accept");
    EXPECT_EQ(row(id)[0], "approved");
    EXPECT_EQ(row(id)[1], sender);
    EXPECT_TRUE(page.wait_for("document.getElementById('run-status')"
                              ".textContent === 'ok'"));
    front(dash_session);
    ASSERT_TRUE(dash.open("#/overview", "overview"));
    ASSERT_TRUE(dash.open("#/approvals", "approvals"));
    EXPECT_TRUE(
      dash.wait_for("document.getElementById('approvals-total').textContent "
                    "=== '0 waiting'"));
    front(chat_session);
    EXPECT_TRUE(fits(page));
    shot("approval-approved");

    // -- Deny: the model hears the refusal --------------------------------
    auto denied = ask("general", "and the cache too");
    ASSERT_EQ(denied.size(), 36u) << messages();
    ASSERT_NE(denied, id);
    ASSERT_TRUE(page.click(card_of(denied) + " button.deny")) << messages();
    ASSERT_TRUE(page.wait_for(decided(denied, "denied"))) << messages();
    answer_of(denied, "decline");
    EXPECT_EQ(row(denied)[0], "denied");
    EXPECT_TRUE(fits(page));
    shot("approval-denied");
  }

  // -- elsewhere: an answer through the API and an expiry update the card --
  ASSERT_TRUE(page.viewport(1280, 860, false));
  auto waiting = [&](const std::string& butler, const std::string& text) {
    page.eval("document.getElementById('butler').value = " + js(butler)
              + "; document.getElementById('text').value = " + js(text)
              + "; document.getElementById('send').click(); true");
    EXPECT_TRUE(page.wait_for(
      "document.querySelector('.approval[data-status=pending]')"));
    return str(page.eval("document.querySelector('.approval[data-status="
                         "pending]').dataset.approval"));
  };
  auto elsewhere = waiting("general", "tidy up");
  ASSERT_EQ(elsewhere.size(), 36u);
  // A reload while the question waits: the thread's snapshot brings it
  // back.
  ASSERT_TRUE(
    browser
      ->call("Page.navigate",
             R"({"url":)"
               + js("http://127.0.0.1:" + std::to_string(port_) + "/chat?again")
               + "}",
             chat_session)
      .ok);
  ASSERT_TRUE(page.wait_for("document.body.dataset.ready === 'true' && "
                            "document.getElementById('chat').dataset."
                            "attached === 'true'"));
  ASSERT_TRUE(page.wait_for("document.querySelector("
                            + js(card_of(elsewhere) + " button.approve") + ")"))
    << page.eval("document.getElementById('messages').innerText");
  auto run = row(elsewhere).at(6);
  auto posted = http_->post("/v1/runs/" + run + "/approvals/" + elsewhere,
                            R"({"decision":"approve","sender":)" + js(sender)
                              + "}");
  ASSERT_EQ(posted.status, 200) << posted.body;
  EXPECT_TRUE(page.wait_for(decided(elsewhere, "approved")));
  auto expiring = waiting("quick", "quick: clean up");
  ASSERT_EQ(expiring.size(), 36u);
  EXPECT_TRUE(page.wait_for(decided(expiring, "expired")));
  EXPECT_EQ(row(expiring)[0], "expired");
  page.screenshot(shots_ + "/chat-approval-elsewhere-desktop.png");
  for (auto* t : {&page, &dash}) {
    auto errs = t->errors();
    EXPECT_TRUE(errs.empty()) << errs.front();
  }
  EXPECT_EQ(browser->dropped_events(), 0u);
}

} // namespace
} // namespace butlers::test
