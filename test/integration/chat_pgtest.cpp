// The web chat end to end (runtime/dashboard/README.md "Chat"): a real node
// on the real PostgreSQL, driven by headless Chromium over the DevTools
// protocol (test/support/cdp_tab.hpp). At desktop and at phone width, with
// no console errors: sign in with the token, send a message to a scripted
// butler that streams its answer slowly, see the deltas arrive while it is
// written, steer it mid-answer and see the steer applied (the run's own
// record says which step saw it), interrupt a running answer, choose the
// run's max_steps, and scroll back through a thread picked from the list
// after a reload.

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

const char* const token = "chat-t0ken";

class Chat : public node_fixture {
 protected:
  void SetUp() override {
    use_database("chat");
    use_files("chat");
    // general writes its answer in 8 steps of 300 ms, one part per step.
    ASSERT_TRUE(start_node(
      node_head("chat-test", 5, "request_timeout_ms = 10000\n")
        + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
          "[butler.runtime]\nturn_ms = 300\nturns = 8\nstream_reply = true\n"
          "reply = \"{butler} thought about '{prompt}' and answers in "
          "{turns} careful steps, one word after another\"\n"
          "[[butler]]\nname = \"health\"\ndescription = \"Health\"\n"
          "keywords = [\"pill\"]\n[butler.runtime]\nturn_ms = 5\n"
          "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
        + dir_ + "/outbox.jsonl\"\n",
      {{"BUTLERS_HTTP_TOKEN", token}}));
    http_->token(token);
    shots_ = BUTLERS_DASHBOARD_SCREENSHOTS;
    std::filesystem::create_directories(shots_);
  }

  /// The first column of the first row of `sql` with `arg`, "" for none.
  std::string query(const std::string& sql, const std::string& arg) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(sql, arg);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  }

  std::string shots_;
};

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

TEST_F(Chat, StreamsSteersInterruptsAndScrollsBackAtBothWidths) {
  // -- the page: open, the dashboard's headers
  // ---------------------------------
  http_client anon{"127.0.0.1", port_};
  auto shell = anon.get("/chat");
  ASSERT_EQ(shell.status, 200);
  EXPECT_EQ(shell.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(shell.headers["content-security-policy"].find("script-src 'self'"),
            std::string::npos);
  EXPECT_EQ(anon.get("/v1/threads").status, 401);

  std::string why;
  auto browser = cdp_client::launch(chromium_path(), dir_ + "/chromium",
                                    shots_ + "/chat-chromium.log", why);
  ASSERT_TRUE(browser) << why;
  auto session = open_tab(*browser, why);
  ASSERT_FALSE(session.empty()) << why;
  tab page{*browser, session};
  ASSERT_TRUE(page.viewport(1280, 860, false));
  auto base = "http://127.0.0.1:" + std::to_string(port_);
  ASSERT_TRUE(
    browser
      ->call("Page.navigate", R"({"url":)" + js(base + "/chat") + "}", session)
      .ok);

  // -- sign in: the dashboard's token form and storage
  // -------------------------
  ASSERT_TRUE(page.wait_for("document.getElementById('token-form')"));
  for (auto& e : page.errors())
    EXPECT_NE(e.find("401"), std::string::npos) << e;
  page.clear();
  page.eval(std::string{"document.getElementById('token').value = '"} + token
            + "'; document.getElementById('token-form').requestSubmit(); "
              "true");
  ASSERT_TRUE(page.wait_for("document.body.dataset.ready === 'true'"));
  EXPECT_EQ(page.eval("sessionStorage.getItem('butlers.token')"), js(token));
  // The butlers to pick from, beside letting the router choose.
  EXPECT_EQ(page.eval("[...document.querySelectorAll('#butler option')]"
                      ".map(o => o.value).join(',')"),
            js(",general,health"));
  auto sender = str(page.eval("localStorage.getItem('butlers.chat.sender')"));
  EXPECT_EQ(sender.rfind("web:", 0), 0u) << sender;
  EXPECT_EQ(sender.size(), 20u) << sender;

  struct width {
    const char* name;
    int w, h;
    bool mobile;
  };
  std::string thread;
  std::string last_thread;
  for (auto [name, w, h, mobile] :
       {width{"desktop", 1280, 860, false}, width{"phone", 390, 844, true}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(page.viewport(w, h, mobile));
    auto fits = [&] {
      return page.eval("document.documentElement.scrollWidth <= "
                       "window.innerWidth")
             == "true";
    };
    auto shot = [&](const std::string& what) {
      EXPECT_GT(page.screenshot(shots_ + "/chat-" + what + "-" + name + ".png"),
                1000u);
      auto errs = page.errors();
      EXPECT_TRUE(errs.empty()) << what << ": " << errs.front();
      page.clear();
    };
    auto type_and = [&](const std::string& text, const std::string& button) {
      page.eval("document.getElementById('text').value = " + js(text)
                + "; document.getElementById(" + js(button)
                + ").click(); true");
    };
    auto live_text = [&] {
      return str(page.eval("(document.querySelector('[data-live] .body') || "
                           "{}).textContent || ''"));
    };

    // A new conversation with general, chosen in the picker.
    page.eval("document.getElementById('new-thread').click(); "
              "document.getElementById('butler').value = 'general'; "
              "document.getElementById('butler').dispatchEvent(new "
              "Event('change')); true");
    ASSERT_TRUE(page.wait_for("document.getElementById('chat').dataset."
                              "attached === 'true'"));
    thread = str(page.eval("localStorage.getItem('butlers.chat.thread')"));
    ASSERT_EQ(thread.rfind("web-", 0), 0u) << thread;
    type_and("plan my week", "send");

    // The answer streams in: the live bubble gets text, then more, while
    // the run is still going.
    ASSERT_TRUE(page.wait_for("(document.querySelector('[data-live] .body') "
                              "|| {}).textContent"))
      << page.eval("document.getElementById('messages').innerText");
    auto first = live_text();
    ASSERT_TRUE(page.wait_for(
      "document.querySelector('[data-live]') && "
      "document.querySelector('[data-live] .body').textContent.length > "
      + std::to_string(first.size())))
      << first;
    EXPECT_EQ(page.eval("document.getElementById('chat').dataset.running"),
              js("true"));
    EXPECT_EQ(page.eval("document.getElementById('send').textContent"),
              js("Steer"));
    EXPECT_TRUE(fits());
    shot("streaming");

    // Steer mid-answer: the message joins the running run and the page
    // shows the step that applied it.
    type_and("also keep friday free", "send");
    ASSERT_TRUE(page.wait_for("document.querySelector('[data-steer-applied]')"))
      << page.eval("document.getElementById('messages').innerText");
    ASSERT_TRUE(page.wait_for(
      "[...document.querySelectorAll('.msg.user')].some(m => m.innerText."
      "includes('also keep friday free') && m.querySelector('.steer-state')"
      ".textContent.startsWith('steer: applied at step'))"));
    // The answer is stored and replaces what streamed.
    ASSERT_TRUE(page.wait_for("!document.querySelector('[data-live]') && "
                              "document.getElementById('run-status')"
                              ".textContent === 'ok'"))
      << page.eval("document.getElementById('messages').innerText");
    auto run = query("SELECT run_id::text FROM thread_runs WHERE thread_id = "
                     "$1 ORDER BY created_at LIMIT 1",
                     thread);
    auto reply = query("SELECT body FROM thread_transcript WHERE run_id = "
                       "$1::uuid AND role = 'assistant'",
                       run);
    ASSERT_FALSE(reply.empty());
    EXPECT_EQ(page.eval("[...document.querySelectorAll('.msg.assistant "
                        ".body')].pop().textContent"),
              js(reply));
    // The run's own record: the steer message was seen at a step boundary.
    auto steer_id = str(page.eval(
      "[...document.querySelectorAll('.msg.user')].find(m => m.innerText."
      "includes('also keep friday free')).dataset.message"));
    auto detail = query("SELECT detail FROM thread_transcript WHERE run_id = "
                        "$1::uuid AND role = 'assistant'",
                        run);
    EXPECT_NE(detail.find(js(steer_id)), std::string::npos) << detail;
    // Who sent it: this browser's sender reached the run's envelope.
    EXPECT_EQ(query("SELECT sender FROM thread_runs WHERE run_id = $1::uuid",
                    run),
              sender);
    EXPECT_TRUE(fits());
    shot("steered");

    // Interrupt: a running answer is cancelled and the new message answered.
    type_and("one more thing", "send");
    ASSERT_TRUE(page.wait_for("(document.querySelector('[data-live] .body') "
                              "|| {}).textContent"));
    type_and("forget that, just say hi", "interrupt");
    ASSERT_TRUE(page.wait_for("document.querySelector('.msg.cancelled')"))
      << page.eval("document.getElementById('messages').innerText");
    ASSERT_TRUE(page.wait_for(
      "[...document.querySelectorAll('.msg.assistant .body')].some(b => b."
      "textContent.includes(\"'forget that, just say hi'\")) && "
      "!document.querySelector('[data-live]')"))
      << page.eval("document.getElementById('messages').innerText");

    // max_steps chosen for one turn: the scripted run takes 2 steps.
    page.eval("document.getElementById('max-steps').value = '2'; true");
    type_and("be brief", "send");
    ASSERT_TRUE(page.wait_for(
      "[...document.querySelectorAll('.msg.assistant .body')].some(b => b."
      "textContent.includes(\"'be brief' and answers in 2 careful steps\"))"))
      << page.eval("document.getElementById('messages').innerText");
    page.eval("document.getElementById('max-steps').value = ''; true");
    EXPECT_TRUE(fits());
    shot("answered");
    last_thread = thread;
  }

  // -- history: after a reload, the thread is in the list and its whole
  // transcript comes back
  // ------------------------------------------------------
  ASSERT_TRUE(page.viewport(1280, 860, false));
  page.eval("localStorage.removeItem('butlers.chat.thread'); true");
  ASSERT_TRUE(browser
                ->call("Page.navigate",
                       R"({"url":)" + js(base + "/chat?again") + "}", session)
                .ok);
  ASSERT_TRUE(page.wait_for("document.body.dataset.ready === 'true'"));
  auto row = "document.querySelector('[data-thread=" + js(last_thread)
             + "] button')";
  ASSERT_TRUE(page.wait_for(row))
    << page.eval("document.getElementById('thread-list').innerText");
  EXPECT_EQ(page.eval("document.querySelectorAll('#thread-list li').length"),
            "2");
  page.eval(row + ".click(); true");
  auto stored = query("SELECT count(*)::text FROM thread_transcript WHERE "
                      "thread_id = $1",
                      last_thread);
  ASSERT_TRUE(page.wait_for(
    "document.querySelectorAll('#messages li[data-cursor]').length === "
    + stored))
    << stored;
  EXPECT_EQ(str(page.eval("document.getElementById('thread-title')"
                          ".textContent")),
            "plan my week");
  page.screenshot(shots_ + "/chat-history-desktop.png");
  auto errs = page.errors();
  EXPECT_TRUE(errs.empty()) << errs.front();
  EXPECT_EQ(browser->dropped_events(), 0u);
}

} // namespace
} // namespace butlers::test
