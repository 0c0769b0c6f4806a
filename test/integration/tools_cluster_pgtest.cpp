// Reminders and schedules across a cluster: two real `butlers-node`
// processes (the cluster harness) on one PostgreSQL database, both hosting
// the same butler, so both tool servers sweep for due reminders and both
// butlers fire its schedules. Each reminder and each fire time must start
// exactly one session, across a SIGKILL of the whole cluster too.
//
// A reminder is set the way a session sets it: the butler's runtime is a
// CLI (`sh`) that keeps its prompt (stdin) in a marker file per run and
// writes its MCP URL and token to a file, so the test speaks MCP with the
// token of a live session, and counts the sessions a reminder started by
// the marker files holding its message.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/uuid.hpp"
#include "test/support/cluster_harness.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A butler `name` whose session is `sh`: it stores its prompt (stdin) in
/// DIR/prompt-<work id>-<pid> (one file per session run), then its MCP URL
/// and token in DIR/token-<work id>, and waits (up to a minute) until
/// cancelled. Both files appear whole (written aside, then renamed).
std::string marker_butler(const std::string& name, const std::string& dir) {
  auto run = dir + "/prompt-$BUTLERS_WORK_ID-$$";
  auto token = dir + "/token-$BUTLERS_WORK_ID";
  return "[[butler]]\nname = \"" + name
         + "\"\nmax_concurrent_sessions = 8\n"
           "[butler.runtime]\nkind = \"cli\"\nfamily = \"opencode\"\n"
           "command = [\"sh\", \"-c\", '"
         + "cat > " + run + ".tmp && mv " + run + ".tmp " + run
         + "; { echo \"$BUTLERS_MCP_URL\"; echo \"$BUTLERS_MCP_TOKEN\"; } > "
         + token + ".tmp && mv " + token + ".tmp " + token + "; sleep 60']\n";
}

/// Liveness settings that notice a lost peer within a second.
const char* fast_liveness = "heartbeat_interval_ms = 200\n"
                            "connection_timeout_ms = 1000\n"
                            "quarantine_after_ms = 1500\n"
                            "reconnect_cap_ms = 500\n";

/// node-a runs the switchboard (and the messenger) and hosts every butler;
/// node-b hosts `butler` too. Both on the harness's database.
void add_two_nodes(cluster_harness& h, const std::string& butler,
                   const std::string& node_extra = "") {
  cluster_node_spec a;
  a.name = "node-a";
  a.node_extra = node_extra;
  a.cluster_extra = fast_liveness;
  h.add(a);
  cluster_node_spec b;
  b.name = "node-b";
  b.node_extra = node_extra;
  b.switchboard = false;
  b.butlers = {butler};
  b.peers = {"node-a"};
  b.cluster_extra = fast_liveness;
  h.add(b);
}

/// A scripted butler `health` whose reply names the request (one per fire
/// time), a cron every minute that catches up the minute that just began,
/// its reply for Telegram chat `chat`, and a telegram adapter borrowing a
/// disabled connector's token and api_base (the fake Bot API).
std::string schedule_common(const fake_telegram& tg, int64_t chat) {
  return "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
         "endpoint_identity = \"butlers_test_bot\"\nenabled = false\n"
         "token = \""
         + tg.token() + "\"\napi_base = \"" + tg.base_url()
         + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
           "connector = \"bot\"\n"
           "[[butler]]\nname = \"health\"\n[butler.runtime]\n"
           "kind = \"scripted\"\nturn_ms = 10\n"
           "reply = \"{butler}: {prompt} [{request_id}]\"\n"
           "[[butler.schedule]]\nname = \"evening\"\n"
           "cron = \"* * * * *\"\nprompt = \"evening check\"\n"
           "notify_to = \"telegram:"
         + std::to_string(chat) + "\"\ncatch_up = \"once\"\n";
}

rapidjson::Document parse(const std::string& body) {
  rapidjson::Document d;
  EXPECT_FALSE(json::parse(body, d)) << body;
  return d;
}

/// How often `needle` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}

/// A live session's way into the tools: the node its session runs on (from
/// its MCP URL), its token and its MCP session.
struct mcp_session {
  std::unique_ptr<http_client> http;
  std::string token;
  std::string sid;

  /// One POST to /mcp.
  http_response post(const std::string& body) const {
    std::string req = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\n"
                      "Content-Type: application/json\r\n"
                      "Accept: application/json, text/event-stream\r\n"
                      "Authorization: Bearer "
                      + token + "\r\n";
    if (!sid.empty())
      req += "Mcp-Session-Id: " + sid + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return http->raw(req);
  }

  /// tools/call of `tool` with `arguments`: the JSON-RPC answer.
  rapidjson::Document call(const std::string& tool,
                           const std::string& arguments) const {
    auto r = post(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":)"
                  R"({"name":")"
                  + tool + R"(","arguments":)" + arguments + "}}");
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r.body);
  }
};

class ToolsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = fresh_database("tools_cluster");
    dir_ = make_temp_dir("tools-cluster");
  }

  void TearDown() override {
    h_.reset(); // stops the nodes before their files go
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  /// Starts node-a and node-b, both hosting a marker butler `health`, and
  /// waits until node-a sees node-b's `health` as active: the cluster is
  /// formed.
  void start_reminder_cluster() {
    h_ = std::make_unique<
      cluster_harness>(url_,
                       "[tools]\nreminder_poll_ms = 100\n"
                       "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
                         + dir_ + "/outbox.jsonl\"\n"
                         + marker_butler("health", dir_));
    add_two_nodes(*h_, "health");
    std::string why;
    ASSERT_TRUE(h_->start_all(&why)) << why;
    ASSERT_TRUE(eventually(
      [&] {
        auto hosts = h_->hosts(0);
        return hosts[{"health", "node-a"}] == "active"
               && hosts[{"health", "node-b"}] == "active";
      },
      20s))
      << h_->log(0) << h_->log(1);
  }

  /// Routes a request to `health` through node-a and opens an MCP session
  /// with the token its session got, on the node the session runs on.
  mcp_session open_session() {
    mcp_session s;
    route_envelope env;
    env.request_id = make_uuid_v7().to_string();
    env.received_at = "2026-11-28T20:00:00Z";
    env.source_channel = "api";
    env.source_endpoint_identity = "tests";
    env.source_sender_identity = "user-1";
    env.butler = "health";
    env.tool = "route.execute";
    env.prompt = "hello";
    auto r = h_->http(0).post("/v1/butlers/health/route", make_route_json(env));
    EXPECT_EQ(r.status, 202) << r.body;
    auto d = parse(r.body);
    if (!d.IsObject() || !d.HasMember("result")
        || !d["result"].HasMember("work_id"))
      return s;
    auto path = dir_ + "/token-" + d["result"]["work_id"].GetString();
    EXPECT_TRUE(eventually(
      [&] {
        return read_file(path).find("bt_") != std::string::npos;
      },
      20s))
      << h_->log(0) << h_->log(1);
    auto text = read_file(path);
    auto nl = text.find('\n');
    auto mcp_url = text.substr(0, nl);
    s.token = text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
    // http://127.0.0.1:PORT/mcp
    const std::string prefix = "http://127.0.0.1:";
    EXPECT_EQ(mcp_url.compare(0, prefix.size(), prefix), 0) << mcp_url;
    auto port = std::stoi(mcp_url.substr(prefix.size()));
    s.http = std::make_unique<http_client>("127.0.0.1",
                                           static_cast<uint16_t>(port));
    auto init = s.post(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)"
      R"({"protocolVersion":"2025-06-18","capabilities":{},)"
      R"("clientInfo":{"name":"t","version":"1"}}})");
    EXPECT_EQ(init.status, 200) << init.body;
    s.sid = init.headers["mcp-session-id"];
    EXPECT_FALSE(s.sid.empty());
    EXPECT_EQ(s.post(
                 R"({"jsonrpc":"2.0","method":"notifications/initialized"})")
                .status,
              202);
    return s;
  }

  /// Sets a reminder `after_s` seconds ahead with `message`; its id.
  std::string remind(const mcp_session& s, int after_s,
                     const std::string& message) {
    auto set = s.call("remind", R"({"after_s":)" + std::to_string(after_s)
                                  + R"(,"message":)" + json::quote(message)
                                  + "}");
    if (!set.HasMember("result") || set["result"]["isError"].GetBool()) {
      ADD_FAILURE() << json::to_string(set);
      return {};
    }
    return set["result"]["structuredContent"]["reminder_id"].GetString();
  }

  std::string state_of(const std::string& reminder) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto rows = tx.exec_params("SELECT state FROM butler_reminders WHERE "
                               "reminder_id = $1",
                               reminder);
    return rows.empty() ? "" : rows[0][0].as<std::string>();
  }

  int count(const std::string& sql, const std::string& param) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec_params1(sql, param)[0].as<int>();
  }

  /// Work items stored for `request_id`.
  int work_items(const std::string& request_id) {
    return count("SELECT count(*) FROM route_work WHERE request_id = $1",
                 request_id);
  }

  /// Session runs whose prompt held `message` (their marker files).
  int runs_with(const std::string& message) {
    int n = 0;
    for (auto& entry : std::filesystem::directory_iterator{dir_}) {
      auto name = entry.path().filename().string();
      if (name.rfind("prompt-", 0) == 0
          && name.find(".tmp") == std::string::npos
          && read_file(entry.path().string()).find(message)
               != std::string::npos)
        ++n;
    }
    return n;
  }

  /// Ends the session runs a SIGKILLed node left behind: a killed node
  /// cannot end its CLIs' process groups, and their `sleep 60` should not
  /// outlive the test. Each run's shell leads its group; its pid ends its
  /// marker file's name.
  void end_orphaned_sessions() {
    for (auto& entry : std::filesystem::directory_iterator{dir_}) {
      auto name = entry.path().filename().string();
      if (name.rfind("prompt-", 0) != 0
          || name.find(".tmp") != std::string::npos)
        continue;
      auto pid = std::stol(name.substr(name.rfind('-') + 1));
      if (pid > 1)
        ::kill(static_cast<pid_t>(-pid), SIGKILL);
    }
  }

  /// Both nodes' logs (of their current runs).
  std::string logs() {
    return h_->log(0) + h_->log(1);
  }

  std::string url_;
  std::string dir_;
  std::unique_ptr<cluster_harness> h_;
};

TEST_F(ToolsCluster, AReminderFiresExactlyOnceWithTwoNodesHostingItsButler) {
  ASSERT_NO_FATAL_FAILURE(start_reminder_cluster());
  auto s = open_session();
  ASSERT_FALSE(s.token.empty());
  const std::string message = "take the blue pill (two nodes)";
  auto id = remind(s, 2, message);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(state_of(id), "pending");
  ASSERT_TRUE(eventually(
    [&] {
      return state_of(id) == "fired" && runs_with(message) >= 1;
    },
    20s))
    << state_of(id) << "\n"
    << logs();
  // One work item (the reminder's id is its request id), one session that
  // got the message, one hand-over in the two nodes' logs.
  EXPECT_EQ(work_items(id), 1);
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE request_id = $1 "
                  "AND segment_id = 'reminder' AND butler = 'health'",
                  id),
            1);
  EXPECT_EQ(runs_with(message), 1);
  EXPECT_EQ(occurrences(logs(), "reminder " + id + " of butler health fired"),
            1u)
    << logs();
  EXPECT_EQ(h_->metric(0, "butlers_reminders_fired_total")
              + h_->metric(1, "butlers_reminders_fired_total"),
            1);
}

TEST_F(ToolsCluster,
       AReminderFiresExactlyOnceAfterTheClusterIsKilledAndRestarted) {
  ASSERT_NO_FATAL_FAILURE(start_reminder_cluster());
  auto s = open_session();
  ASSERT_FALSE(s.token.empty());
  const std::string message = "take the red pill (after a SIGKILL)";
  auto id = remind(s, 3, message);
  ASSERT_FALSE(id.empty());
  // Both nodes die before it is due: no node is left to fire it.
  h_->kill(1);
  h_->kill(0);
  end_orphaned_sessions();
  ASSERT_EQ(state_of(id), "pending");
  std::string restarted_at;
  {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    restarted_at = tx.exec1("SELECT now()::text")[0].as<std::string>();
  }
  std::string why;
  ASSERT_TRUE(h_->start_all(&why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return state_of(id) == "fired" && runs_with(message) >= 1;
    },
    20s))
    << state_of(id) << "\n"
    << logs();
  EXPECT_EQ(count("SELECT count(*) FROM butler_reminders WHERE reminder_id "
                  "= $1 AND fired_at > '"
                    + restarted_at + "'::timestamptz",
                  id),
            1);
  EXPECT_EQ(work_items(id), 1);
  EXPECT_EQ(runs_with(message), 1);
  EXPECT_EQ(occurrences(logs(), "reminder " + id + " of butler health fired"),
            1u)
    << logs();
}

TEST_F(ToolsCluster,
       AScheduleWithNotifyToReachesTheTelegramChatOncePerFireTime) {
  fake_telegram tg;
  const int64_t chat = 5550042;
  h_ = std::make_unique<cluster_harness>(url_, schedule_common(tg, chat));
  // Debug logs show a fire another node stored first.
  add_two_nodes(*h_, "health", "log_level = \"debug\"\n");
  std::string why;
  ASSERT_TRUE(h_->start(0, &why)) << why;
  // node-a alone: its catch-up reaches the chat.
  ASSERT_TRUE(eventually(
    [&] {
      return !tg.messages_to(chat).empty();
    },
    30s))
    << h_->log(0);
  auto first = tg.messages_to(chat)[0].text;
  EXPECT_EQ(first.rfind("health: evening check [", 0), 0u) << first;
  // node-b joins on the same database, hosting the same butler: its
  // catch-up fires the latest minute too (the same one, or a new minute
  // that node-a fires as well). Wait until it did: it stored the fire or
  // found it stored already.
  ASSERT_TRUE(h_->start(1, &why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return h_->log(1).find("schedule evening already fired elsewhere")
               != std::string::npos
             || h_->metric(1, "butlers_route_accepted_total{butler=\"health\"}")
                  > 0;
    },
    30s))
    << h_->log(1);
  // Every fire time is one work item, finished, and one message naming
  // its request: never one per node.
  std::vector<std::string> fires;
  std::set<std::string> fire_times;
  ASSERT_TRUE(eventually(
    [&] {
      pqxx::connection conn{url_};
      pqxx::nontransaction tx{conn};
      auto rows = tx.exec("SELECT request_id::text, state, "
                          "envelope->'request_context'->>'received_at' "
                          "FROM route_work "
                          "WHERE butler = 'health' AND segment_id = "
                          "'schedule:evening'");
      fires.clear();
      fire_times.clear();
      for (auto row : rows) {
        if (row[1].as<std::string>() != "ok")
          return false;
        fires.push_back(row[0].as<std::string>());
        fire_times.insert(row[2].as<std::string>());
      }
      return !fires.empty() && tg.messages_to(chat).size() == fires.size();
    },
    30s))
    << "fires " << fires.size() << ", messages " << tg.messages_to(chat).size()
    << "\n"
    << logs();
  // One minute, or two when a minute began meanwhile; each stored once.
  EXPECT_LE(fires.size(), 2u);
  EXPECT_EQ(fire_times.size(), fires.size());
  auto sent = tg.messages_to(chat);
  for (auto& request : fires) {
    size_t n = 0;
    for (auto& m : sent)
      n += m.text == "health: evening check [" + request + "]";
    EXPECT_EQ(n, 1u) << request;
  }
  // The first message was the reply of one of them.
  EXPECT_TRUE(std::any_of(fires.begin(), fires.end(),
                          [&](const std::string& request) {
                            return first.find(request) != std::string::npos;
                          }))
    << first;
}

TEST_F(ToolsCluster,
       AScheduleOfAButlerOnlyNodeReachesTheChatThroughTheSwitchboardNode) {
  fake_telegram tg;
  const int64_t chat = 5550043;
  h_ = std::make_unique<cluster_harness>(url_, schedule_common(tg, chat));
  // node-a runs the messenger and hosts no butler; node-b hosts health
  // alone: its session's reply crosses the cluster to node-a's messenger.
  cluster_node_spec a;
  a.name = "node-a";
  a.butlers = {};
  a.cluster_extra = fast_liveness;
  h_->add(a);
  cluster_node_spec b;
  b.name = "node-b";
  b.switchboard = false;
  b.butlers = {"health"};
  b.peers = {"node-a"};
  b.cluster_extra = fast_liveness;
  h_->add(b);
  std::string why;
  ASSERT_TRUE(h_->start_all(&why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return !tg.messages_to(chat).empty();
    },
    30s))
    << logs();
  auto text = tg.messages_to(chat)[0].text;
  EXPECT_EQ(text.rfind("health: evening check [", 0), 0u) << text;
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto rows = tx.exec("SELECT request_id::text FROM route_work WHERE "
                      "butler = 'health' AND segment_id = 'schedule:evening'");
  // The fire's work item (another if a minute began meanwhile) is the
  // one the message names.
  ASSERT_GE(rows.size(), 1u);
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(),
                          [&](const auto& row) {
                            return text.find(row[0].template as<std::string>())
                                   != std::string::npos;
                          }))
    << text;
  EXPECT_GE(h_->metric(1, "butlers_route_accepted_total{butler=\"health\"}"), 1)
    << h_->log(1);
}

} // namespace
} // namespace butlers::test
