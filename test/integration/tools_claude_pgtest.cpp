// A Claude Code session's tools, end to end: a person writes to the bot
// (the fake Telegram Bot API, fetched by a telegram connector polling it),
// the message routes to a butler whose runtime is butlers-fake-claude, and
// the fake, as Claude Code does, speaks MCP over Streamable HTTP to the
// node's tool server with the config `--mcp-config` names: initialize,
// tools/list, then `notify` twice before it answers. The person gets the
// two notifies and the answer, in order, once each, also when the node is
// SIGKILLed between the two notifies and the session is retried on the
// restarted node.

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
namespace tgu = telegram;

const std::string thumbs_up = "\xf0\x9f\x91\x8d";

/// The tools/call the fake makes: notify "first", then notify "second".
const std::string two_notifies
  = R"([{"name":"notify","arguments":{"message":"first"}},)"
    R"({"name":"notify","arguments":{"message":"second"}}])";

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in{path};
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

class ToolsClaude : public node_fixture {
 protected:
  fake_telegram tg;
  int64_t chat = 5550042;

  void SetUp() override {
    use_database("tools_claude");
    use_files("tools_claude");
  }

  std::string mcp_log() const {
    return dir_ + "/mcp.log";
  }

  /// The node: a `helper` butler (keyword "pill") running the fake with
  /// `fake_env` (NAME=VALUE, through env(1)), `butler_extra` in its table;
  /// a `bot` connector polling the fake Bot API, whose token the telegram
  /// adapter borrows to answer.
  std::string config(const std::vector<std::string>& fake_env,
                     const std::string& butler_extra = "",
                     const std::string& node_extra = "") {
    std::string command = R"(["env", )";
    for (auto& e : fake_env)
      command += json::quote(e) + ", ";
    command += json::quote("FAKE_CLAUDE_MCP_LOG=" + mcp_log()) + ", ";
    command += json::quote(BUTLERS_FAKE_CLAUDE) + "]";
    return node_head("tools-claude-test", 5, "request_timeout_ms = 10000\n")
           + "[[butler]]\nname = \"helper\"\nkeywords = [\"pill\"]\n"
             "session_timeout_s = 60\n"
           + butler_extra
           + "[butler.runtime]\nkind = \"cli\"\nfamily = \"claude\"\n"
             "kill_grace_ms = 300\ncommand = "
           + command
           + "\n[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
             "endpoint_identity = \"butlers_test_bot\"\nmode = \"poll\"\n"
             "poll_timeout_s = 2\napi_base = \""
           + tg.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
             "connector = \"bot\"\n"
           + node_extra;
  }

  ::testing::AssertionResult start(const std::string& cfg) {
    return start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}});
  }

  /// The person writes `text` to the bot; its message_id.
  int64_t write(const std::string& text) {
    tgu::message_spec m;
    m.message_id = tg.next_message_id(chat);
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    tg.push_update(tgu::message_update(m));
    return m.message_id;
  }

  std::vector<std::string> texts() const {
    std::vector<std::string> out;
    for (auto& m : tg.messages_to(chat))
      out.push_back(m.text);
    return out;
  }

  /// The request is done: its last reaction is 👍.
  bool done(int64_t message) const {
    auto seen = tg.reactions_of(chat, message);
    return !seen.empty() && seen.back() == thumbs_up;
  }

  /// The answers the fake logged, one per tools/call.
  std::string mcp_results() const {
    std::string out;
    for (auto& l : lines_of(mcp_log()))
      out += l + "\n";
    return out;
  }

  /// First, second and the answer (which echoes `text`), once each, in
  /// this order.
  void expect_in_order(const std::string& text) {
    auto sent = texts();
    ASSERT_EQ(sent.size(), 3u) << ::testing::PrintToString(sent);
    EXPECT_EQ(sent[0], "first");
    EXPECT_EQ(sent[1], "second");
    EXPECT_NE(sent[2].find("echo: "), std::string::npos) << sent[2];
    EXPECT_NE(sent[2].find(text), std::string::npos) << sent[2];
  }
};

TEST_F(ToolsClaude, TwoNotifiesThenTheAnswerReachTheChatInOrder) {
  ASSERT_TRUE(start(config({"FAKE_CLAUDE_MCP_CALLS=" + two_notifies})));
  auto msg = write("my pill at nine");
  ASSERT_TRUE(eventually(
    [&] {
      return done(msg);
    },
    30s))
    << ::testing::PrintToString(texts()) << "\n"
    << mcp_results() << node_->log();
  expect_in_order("my pill at nine");
  // Each notify was answered delivered, in the order made.
  auto results = lines_of(mcp_log());
  ASSERT_EQ(results.size(), 2u) << mcp_results();
  for (size_t i = 0; i < results.size(); ++i) {
    rapidjson::Document d;
    ASSERT_FALSE(json::parse(results[i], d)) << results[i];
    ASSERT_TRUE(d.IsObject() && d.HasMember("result")) << results[i];
    EXPECT_EQ(d["id"].GetInt(), static_cast<int>(3 + i)) << results[i];
    auto& r = d["result"];
    EXPECT_FALSE(r["isError"].GetBool()) << results[i];
    ASSERT_TRUE(r.HasMember("structuredContent")) << results[i];
    EXPECT_EQ(std::string{r["structuredContent"]["status"].GetString()},
              "delivered")
      << results[i];
    EXPECT_EQ(r["structuredContent"]["sequence"].GetInt(), static_cast<int>(i))
      << results[i];
  }
}

TEST_F(ToolsClaude, ASessionRetriedAfterSigkillRepeatsNoNotify) {
  // Short leases and scans: the work item and the request, held by the
  // killed node, are taken over soon after the restart.
  auto cfg = config({"FAKE_CLAUDE_MCP_CALLS=" + two_notifies,
                     "FAKE_CLAUDE_MCP_DELAY_MS=1500"},
                    "lease_s = 3\n",
                    "[switchboard]\nlease_s = 3\nscanner_interval_s = 1\n");
  ASSERT_TRUE(start(cfg));
  auto msg = write("my pill at ten");
  // "first" reached the chat and its notify was answered (so its ledger
  // entry is committed as sent); the session now waits before "second".
  ASSERT_TRUE(eventually(
    [&] {
      return texts() == std::vector<std::string>{"first"}
             && lines_of(mcp_log()).size() == 1;
    },
    30s))
    << ::testing::PrintToString(texts()) << "\n"
    << mcp_results() << node_->log();
  ASSERT_TRUE(kill_node());
  auto first_log = node_->log();
  node_.reset();
  ASSERT_TRUE(start(cfg)) << first_log;
  ASSERT_TRUE(eventually(
    [&] {
      return done(msg);
    },
    60s))
    << ::testing::PrintToString(texts()) << "\n"
    << mcp_results() << first_log << "\n--- restarted ---\n"
    << node_->log();
  expect_in_order("my pill at ten");
  // The retried session made both calls again; the first was known sent.
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM outbound_ledger WHERE kind = "
                     "'message' AND state = 'sent'")[0]
              .as<int>(),
            3);
}

} // namespace
} // namespace butlers::test
