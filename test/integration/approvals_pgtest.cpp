// Tool approvals (runtime/approvals.md) against a real node process, real
// PostgreSQL, the fake Bot API and butlers-fake-codex asking
// item/commandExecution/requestApproval in every turn (its reply ends with
// "approval: <decision>", so the test sees what reached the model): the
// run's starter gets Approve / Deny buttons in their Telegram chat and a
// press decides; someone else's press or API call is refused (403,
// counted); no answer by the expiry denies; a SIGKILL of the node while
// the question waits loses neither the question nor the answer.

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
namespace tgu = telegram;

class Approvals : public node_fixture {
 protected:
  fake_telegram tg;
  int64_t chat = 5550001;
  int64_t next_message = 100;
  int64_t next_update = 9000;

  /// A `health` butler (keyword "pill") on the fake codex, asking its
  /// starter (`approval_timeout_s` = `timeout_s`), a polling Telegram
  /// connector and the telegram adapter on the fake Bot API.
  std::string config(int timeout_s) {
    return config_with(timeout_s, "codex",
                       R"(["env", "FAKE_CODEX_APPROVAL=1", )"
                         + json::quote(BUTLERS_FAKE_CODEX) + "]",
                       "");
  }

  /// The same on the fake Claude Code, which wants to use the tools of
  /// `wanted` (FAKE_CLAUDE_PERMISSION), with `policy` lines for the butler.
  std::string claude_config(const std::string& wanted,
                            const std::string& policy) {
    return config_with(60, "claude",
                       R"(["env", )"
                         + json::quote("FAKE_CLAUDE_PERMISSION=" + wanted)
                         + ", " + json::quote(BUTLERS_FAKE_CLAUDE) + "]",
                       policy);
  }

  std::string config_with(int timeout_s, const std::string& family,
                          const std::string& command,
                          const std::string& policy) {
    return node_head("approvals-test", 5)
           + "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
             "approvals = \"ask\"\napproval_timeout_s = "
           + std::to_string(timeout_s) + "\n" + policy
           + "lease_s = 4\n[butler.runtime]\nkind = \"cli\"\n"
             "family = \""
           + family + "\"\ncommand = " + command
           + "\n[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
             "endpoint_identity = \"butlers_test_bot\"\nmode = \"poll\"\n"
             "poll_timeout_s = 1\napi_base = \""
           + tg.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
             "connector = \"bot\"\n";
  }

  void start(int timeout_s) {
    start_on(config(timeout_s));
  }

  void start_on(const std::string& cfg) {
    use_database("approvals");
    use_files("approvals");
    ASSERT_TRUE(start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  }

  /// The starter writes `text` in the chat.
  void say(const std::string& text) {
    tgu::message_spec m;
    m.message_id = next_message++;
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    tg.push_update(tgu::message_update(m, next_update++));
  }

  /// The bot's messages to the chat with buttons (the questions).
  std::vector<telegram_sent_message> questions() {
    std::vector<telegram_sent_message> out;
    for (auto& m : tg.messages_to(chat))
      if (m.reply_markup.find("ap:") != std::string::npos || m.edits > 0)
        out.push_back(m);
    return out;
  }

  /// Waits for the question; returns its approval id and message id.
  std::pair<std::string, int64_t> question() {
    std::pair<std::string, int64_t> out;
    eventually(
      [&] {
        return !questions().empty();
      },
      30s);
    auto qs = questions();
    if (qs.empty())
      return out;
    auto& markup = qs[0].reply_markup;
    auto at = markup.find("ap:");
    if (at == std::string::npos || markup.size() < at + 41)
      return out;
    out.first = markup.substr(at + 3, 36);
    out.second = qs[0].message_id;
    return out;
  }

  void press(int64_t from, int64_t message_id, const std::string& data) {
    tg.push_update(tg.callback_query_update(from, chat, message_id, data));
  }

  /// The bot's answer to the run (a message without buttons that the
  /// fake codex wrote).
  std::string reply() {
    for (auto& m : tg.messages_to(chat))
      if (m.text.find("echo:") != std::string::npos)
        return m.text;
    return {};
  }

  std::string wait_reply() {
    eventually(
      [&] {
        return !reply().empty();
      },
      30s);
    return reply();
  }

  std::vector<std::string> callback_texts() {
    std::vector<std::string> out;
    for (auto& c : tg.calls("answerCallbackQuery"))
      out.push_back(c.string_param("text").value_or(""));
    return out;
  }

  std::vector<std::string> row(const std::string& id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT status, coalesce(answered_by, ''), tool, "
                            "summary, requester_channel, requester_sender, "
                            "run_id FROM approvals WHERE approval_id = $1",
                            id);
    std::vector<std::string> out;
    if (!r.empty())
      for (auto f : r[0])
        out.push_back(f.as<std::string>());
    return out;
  }

  std::string notice_ref(const std::string& id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(
      "SELECT notice_ref FROM approvals WHERE approval_id = $1", id);
    return r.empty() ? std::string{} : r[0][0].as<std::string>();
  }

  int approvals_count() {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1("SELECT count(*) FROM approvals")[0].as<int>();
  }

  double metric(const std::string& series) {
    auto body = http_->get("/metrics").body;
    auto at = body.find("\n" + series + " ");
    return at == std::string::npos
             ? -1
             : std::stod(body.substr(at + series.size() + 2));
  }
};

TEST_F(Approvals, TheStarterApprovesWithAButtonAndTheRunFinishes) {
  start(60);
  say("my pill: clean the build");
  auto [id, message] = question();
  ASSERT_EQ(id.size(), 36u) << node_->log();
  auto q = questions()[0];
  EXPECT_NE(q.text.find("health asks to use shell: rm -rf build"),
            std::string::npos)
    << q.text;
  EXPECT_NE(q.reply_markup.find(R"("text":"Approve")"), std::string::npos)
    << q.reply_markup;
  EXPECT_NE(q.reply_markup.find("ap:" + id + ":n"), std::string::npos);
  auto pending = row(id);
  ASSERT_EQ(pending.size(), 7u);
  EXPECT_EQ(pending[0], "pending");
  EXPECT_EQ(pending[2], "shell");
  EXPECT_EQ(pending[4], "telegram");
  EXPECT_EQ(pending[5], std::to_string(chat));
  press(chat, message, "ap:" + id + ":y");
  auto text = wait_reply();
  EXPECT_NE(text.find("approval: accept"), std::string::npos)
    << text << node_->log();
  auto done = row(id);
  EXPECT_EQ(done[0], "approved");
  EXPECT_EQ(done[1], "telegram:" + std::to_string(chat));
  ASSERT_TRUE(eventually(
    [&] {
      auto qs = questions();
      return !qs.empty() && qs[0].edits > 0;
    },
    10s));
  auto edited = questions()[0];
  EXPECT_NE(edited.text.find("Approved"), std::string::npos) << edited.text;
  EXPECT_EQ(edited.reply_markup.find("ap:"), std::string::npos);
  EXPECT_TRUE(eventually(
    [&] {
      return callback_texts() == std::vector<std::string>{"Approved"};
    },
    10s));
}

TEST_F(Approvals, SomeoneElsesPressIsRefusedAndTheStartersDenyReachesTheModel) {
  start(60);
  say("my pill: clean the build");
  auto [id, message] = question();
  ASSERT_EQ(id.size(), 36u) << node_->log();
  // Someone else in the chat presses Approve: refused, counted, logged.
  press(777, message, "ap:" + id + ":y");
  ASSERT_TRUE(eventually(
    [&] {
      return callback_texts().size() == 1;
    },
    10s))
    << node_->log();
  EXPECT_NE(callback_texts()[0].find("Only the person who asked"),
            std::string::npos);
  EXPECT_EQ(row(id)[0], "pending");
  EXPECT_EQ(metric("butlers_approval_refusals_total"), 1);
  EXPECT_NE(node_->log().find("refused: only the run's starter"),
            std::string::npos);
  // And through the API, under another name: 403.
  auto run_id = row(id)[6];
  auto stranger = http_->post("/v1/runs/" + run_id + "/approvals/" + id,
                              R"({"decision":"approve","sender":"777"})");
  EXPECT_EQ(stranger.status, 403) << stranger.body;
  EXPECT_EQ(metric("butlers_approval_refusals_total"), 2);
  // The starter denies: the model hears the refusal.
  press(chat, message, "ap:" + id + ":n");
  auto text = wait_reply();
  EXPECT_NE(text.find("approval: decline"), std::string::npos)
    << text << node_->log();
  EXPECT_EQ(row(id)[0], "denied");
  // Answered: a second answer is a conflict.
  auto late = http_->post("/v1/runs/" + run_id + "/approvals/" + id,
                          R"({"decision":"approve","sender":")"
                            + std::to_string(chat) + "\"}");
  EXPECT_EQ(late.status, 409) << late.body;
}

TEST_F(Approvals, NoAnswerByTheExpiryDenies) {
  start(2);
  say("my pill: clean the build");
  auto [id, message] = question();
  ASSERT_EQ(id.size(), 36u) << node_->log();
  auto text = wait_reply();
  EXPECT_NE(text.find("approval: decline"), std::string::npos)
    << text << node_->log();
  auto r = row(id);
  EXPECT_EQ(r[0], "expired");
  EXPECT_EQ(r[1], "timeout");
  ASSERT_TRUE(eventually(
    [&] {
      auto qs = questions();
      return !qs.empty() && qs[0].edits > 0;
    },
    10s));
  EXPECT_NE(questions()[0].text.find("Expired"), std::string::npos);
  // A late press is refused as answered.
  press(chat, message, "ap:" + id + ":y");
  EXPECT_TRUE(eventually(
    [&] {
      auto t = callback_texts();
      return t.size() == 1
             && t[0].find("answered already") != std::string::npos;
    },
    10s));
}

TEST_F(Approvals, ASigkillWhileTheQuestionWaitsLosesNeitherQuestionNorAnswer) {
  start(120);
  say("my pill: clean the build");
  auto [id, message] = question();
  ASSERT_EQ(id.size(), 36u) << node_->log();
  // Killed once the question's message is on record. Killed between the
  // send and that write, the node cannot know the question went out and
  // rightly asks a second time after the restart (at least once).
  ASSERT_TRUE(eventually(
    [&] {
      return !notice_ref(id).empty();
    },
    10s));
  ASSERT_TRUE(kill_node());
  node_.reset();
  ASSERT_TRUE(
    start_node(config(120), {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  // The run is taken back and asks again: the same question, not a second
  // one, still pending.
  ASSERT_TRUE(eventually(
    [&] {
      return node_->log().find("asked again") != std::string::npos;
    },
    30s))
    << node_->log();
  EXPECT_EQ(row(id)[0], "pending");
  press(chat, message, "ap:" + id + ":y");
  auto text = wait_reply();
  EXPECT_NE(text.find("approval: accept"), std::string::npos)
    << text << node_->log();
  EXPECT_EQ(row(id)[0], "approved");
  EXPECT_EQ(approvals_count(), 1);
  EXPECT_EQ(questions().size(), 1u);
}

// Claude Code asks through `--permission-prompt-tool`: the fake calls the
// node's approval_prompt tool for Bash, the starter approves with the
// button, and Claude Code's answer format says allow.
TEST_F(Approvals, ClaudeCodesPermissionPromptIsPutToTheStarter) {
  start_on(claude_config(
    R"([{"tool_name":"Bash","input":{"command":"rm -rf build"}}])", ""));
  say("my pill: clean the build");
  auto [id, message] = question();
  ASSERT_EQ(id.size(), 36u) << node_->log();
  EXPECT_NE(questions()[0].text.find("health asks to use Bash: rm -rf build"),
            std::string::npos)
    << questions()[0].text;
  EXPECT_EQ(row(id)[2], "Bash");
  press(chat, message, "ap:" + id + ":y");
  auto text = wait_reply();
  EXPECT_NE(text.find("[permission Bash: allow]"), std::string::npos)
    << text << node_->log();
  EXPECT_EQ(row(id)[0], "approved");
}

// The butler's allow and deny patterns answer Claude Code at once: nobody
// is asked.
TEST_F(Approvals, ClaudeCodesPermissionPromptFollowsTheButlersPatterns) {
  start_on(
    claude_config(R"([{"tool_name":"Bash","input":{"command":"rm -rf /"}},)"
                  R"({"tool_name":"Read","input":{"file_path":"notes.txt"}}])",
                  "approvals_deny = [\"Bash\"]\napprovals_allow = "
                  "[\"Read\"]\n"));
  say("my pill: what do my notes say");
  auto text = wait_reply();
  EXPECT_NE(text.find("[permission Bash: deny] [permission Read: allow]"),
            std::string::npos)
    << text << node_->log();
  EXPECT_TRUE(questions().empty());
  EXPECT_EQ(approvals_count(), 0);
}

// Steer input while a run waits for approval (spec 003 §8.3): a turn of
// the same thread joins the waiting run as steer input (stored at once, no
// second run), and once the starter answers, the run's next step sees it.
class ApprovalsWhileWaiting : public node_fixture {
 protected:
  /// The `general` butler on `family`'s fake with `command`, asking its
  /// starter; runs come through the thread API.
  void start(const std::string& family, const std::string& command) {
    use_database("approvals_steer");
    use_files("approvals_steer");
    ASSERT_TRUE(
      start_node(node_head("approvals-steer-test", 5)
                 + "[[butler]]\nname = \"general\"\napprovals = \"ask\"\n"
                   "approval_timeout_s = 60\n[butler.runtime]\nkind = \"cli\"\n"
                   "family = \""
                 + family + "\"\ncommand = " + command
                 + "\n[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
                 + dir_ + "/outbox.jsonl\"\n"));
  }

  /// POSTs a turn; the answer's status, run_id and kind.
  std::vector<std::string> turn(const std::string& thread,
                                const std::string& message_id,
                                const std::string& text) {
    auto r = http_->post("/v1/threads/" + thread + "/turns",
                         R"({"message_id":")" + message_id + R"(","text":)"
                           + json::quote(text) + "}");
    rapidjson::Document doc;
    std::vector<std::string> out{std::to_string(r.status), "", "", r.body};
    if (!json::parse(r.body, doc) && doc.IsObject()) {
      for (auto [i, key] : {std::pair{1, "run_id"}, std::pair{2, "kind"}})
        if (doc.HasMember(key) && doc[key].IsString())
          out[static_cast<size_t>(i)] = doc[key].GetString();
    }
    return out;
  }

  std::string query(const std::string& sql, const std::string& arg) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(sql, arg);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  }

  /// The pending question of run `run_id` ("" until there is one).
  std::string pending_question(const std::string& run_id) {
    return query("SELECT approval_id::text FROM approvals WHERE run_id = $1 "
                 "AND status = 'pending'",
                 run_id);
  }

  std::string run_state(const std::string& run_id) {
    return query("SELECT state FROM thread_runs WHERE run_id = $1", run_id);
  }

  std::string reply(const std::string& run_id) {
    return query("SELECT body FROM thread_transcript WHERE run_id = $1 AND "
                 "role = 'assistant'",
                 run_id);
  }

  int runs_of(const std::string& thread) {
    return std::stoi(
      query("SELECT count(*) FROM thread_runs WHERE thread_id = $1", thread));
  }

  /// Starts a run that asks, steers it while the question waits, then
  /// approves; returns the run's answer.
  std::string steer_while_waiting(const std::string& thread) {
    auto first = turn(thread, "w1", "clean the build");
    EXPECT_EQ(first[0], "200") << first[3];
    auto run_id = first[1];
    std::string id;
    EXPECT_TRUE(eventually(
      [&] {
        id = pending_question(run_id);
        return !id.empty();
      },
      30s))
      << node_->log();
    if (id.empty())
      return {};
    auto steer = turn(thread, "w2", "and keep the logs");
    EXPECT_EQ(steer[0], "200") << steer[3];
    EXPECT_EQ(steer[2], "steer") << steer[3];
    EXPECT_EQ(steer[1], run_id) << "joined the waiting run";
    // Stored at once, while the run still waits.
    EXPECT_EQ(query("SELECT body FROM thread_transcript WHERE thread_id = $1 "
                    "AND message_id = 'w2'",
                    thread),
              "and keep the logs");
    EXPECT_EQ(pending_question(run_id), id) << "still waiting";
    EXPECT_EQ(run_state(run_id), "running");
    auto yes = http_->post("/v1/runs/" + run_id + "/approvals/" + id,
                           R"({"decision":"approve"})");
    EXPECT_EQ(yes.status, 200) << yes.body;
    EXPECT_TRUE(eventually(
      [&] {
        auto s = run_state(run_id);
        return s == "ok" || s == "error" || s == "cancelled";
      },
      30s))
      << node_->log();
    EXPECT_EQ(run_state(run_id), "ok") << node_->log();
    EXPECT_EQ(runs_of(thread), 1) << "no run of its own for the steer";
    return reply(run_id);
  }
};

TEST_F(ApprovalsWhileWaiting, ACodexRunSeesSteerInputThatCameDuringTheWait) {
  start("codex", R"(["env", "FAKE_CODEX_APPROVAL=1", )"
                   + json::quote(BUTLERS_FAKE_CODEX) + "]");
  auto text = steer_while_waiting("t-wait-codex");
  // The turn took the steer while the approval request was open, and its
  // answer (after the approval) covers both.
  auto prompt_at = text.find(R"("clean the build")");
  auto rest_at = text.find(" | and keep the logs | approval: accept");
  EXPECT_NE(prompt_at, std::string::npos) << text;
  EXPECT_NE(rest_at, std::string::npos) << text << node_->log();
  EXPECT_LT(prompt_at, rest_at) << text << node_->log();
}

TEST_F(ApprovalsWhileWaiting, AClaudeRunSeesSteerInputThatCameDuringTheWait) {
  start("claude",
        R"(["env", )"
          + json::quote(R"(FAKE_CLAUDE_PERMISSION=[{"tool_name":"Bash",)"
                        R"("input":{"command":"rm -rf build"}}])")
          + ", " + json::quote(BUTLERS_FAKE_CLAUDE) + "]");
  auto text = steer_while_waiting("t-wait-claude");
  // Claude Code gets the steer as the next user message once its answer
  // after the permission is done: the run's last answer echoes it.
  EXPECT_NE(text.find("and keep the logs"), std::string::npos)
    << text << node_->log();
}

} // namespace
} // namespace butlers::test
