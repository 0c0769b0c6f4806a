// Codex sessions against a real node process, real PostgreSQL, real HTTP
// over loopback and butlers-fake-codex speaking the `codex app-server`
// protocol as the butler's command: a steer sent during a run goes to the
// running turn as turn/steer and shows in the reply, a thread subscriber
// sees the answer streamed as `delta` events before its transcript entry,
// interrupt ends the run and starts the new input, cancel takes the process
// group down within a second, and approvals and failed turns end well.

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string str(const rapidjson::Value& v, const char* key) {
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct turn_answer {
  int status = 0;
  std::string run_id;
  std::string kind;
  std::string body;
};

class CodexSessions : public node_fixture {
 protected:
  /// Starts a node whose `general` butler runs codex sessions on the fake,
  /// with `env` (NAME=VALUE) for the fake; it logs what it reads to `log()`.
  void start(std::vector<std::string> env, uint32_t kill_grace_ms = 500) {
    use_database("codex");
    use_files("codex");
    std::string command = R"(["env", "FAKE_CODEX_LOG=)" + log() + "\"";
    for (auto& e : env)
      command += ", " + json::quote(e);
    command += std::string{", "} + json::quote(BUTLERS_FAKE_CODEX) + "]";
    ASSERT_TRUE(start_node(
      node_head("codex-test", 5, "request_timeout_ms = 10000\n")
      + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
        "[butler.runtime]\nkind = \"cli\"\nfamily = \"codex\"\ncommand = "
      + command + "\nkill_grace_ms = " + std::to_string(kill_grace_ms) + "\n"
      + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
      + "/outbox.jsonl\"\n"));
  }

  std::string log() const {
    return dir_ + "/fake-codex.log";
  }

  /// The messages the fake read with this method.
  std::vector<std::string> received(const std::string& method) const {
    std::vector<std::string> out;
    std::istringstream in{slurp(log())};
    std::string line;
    while (std::getline(in, line))
      if (line.find(R"("method":")" + method + "\"") != std::string::npos)
        out.push_back(line);
    return out;
  }

  turn_answer turn(const std::string& thread, const std::string& message_id,
                   const std::string& text, const std::string& more = {}) {
    auto r = http_->post("/v1/threads/" + thread + "/turns",
                         R"({"message_id":")" + message_id + R"(","text":)"
                           + json::quote(text) + more + "}");
    turn_answer a;
    a.status = r.status;
    a.body = r.body;
    rapidjson::Document doc;
    if (!json::parse(r.body, doc) && doc.IsObject()) {
      a.run_id = str(doc, "run_id");
      a.kind = str(doc, "kind");
    }
    return a;
  }

  std::string run_state(const std::string& run_id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT state FROM thread_runs WHERE run_id = $1",
                            run_id);
    return r.empty() ? std::string{} : r[0][0].as<std::string>();
  }

  bool finished(const std::string& run_id) {
    auto s = run_state(run_id);
    return s == "ok" || s == "error" || s == "cancelled";
  }

  /// The run's assistant transcript entry ("" before there is one).
  std::string reply(const std::string& run_id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT body FROM thread_transcript WHERE "
                            "run_id = $1 AND role = 'assistant'",
                            run_id);
    return r.empty() ? std::string{} : r[0][0].as<std::string>();
  }

  /// Waits until the fake runs a turn (it read `count` turn/starts).
  ::testing::AssertionResult turn_running(size_t count = 1) {
    if (eventually(
          [&] {
            return received("turn/start").size() >= count;
          },
          10s))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "no turn/start: " << slurp(log());
  }
};

TEST_F(CodexSessions, ASteerDuringTheRunGoesInAsTurnSteerAndShowsInTheReply) {
  start({"FAKE_CODEX_TURN_MS=1500"});
  sse_client events{port_, "/v1/threads/t-steer/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    10s));
  auto first = turn("t-steer", "m1", "plan my week");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(turn_running());
  auto steer = turn("t-steer", "m2", "and book the gym");
  ASSERT_EQ(steer.status, 200) << steer.body;
  EXPECT_EQ(steer.kind, "steer");
  EXPECT_EQ(steer.run_id, first.run_id);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  // It reached the fake as user input of the running turn.
  auto steers = received("turn/steer");
  ASSERT_EQ(steers.size(), 1u) << slurp(log());
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(steers[0], doc));
  EXPECT_EQ(str(doc["params"], "expectedTurnId"), "turn_1");
  EXPECT_STREQ(doc["params"]["input"][0]["text"].GetString(),
               "and book the gym");
  EXPECT_EQ(received("turn/start").size(), 1u) << "one turn took both";
  // The turn's answer echoes the prompt and then the steer.
  auto text = reply(first.run_id);
  auto prompt_at = text.find("plan my week");
  auto steer_at = text.find("| and book the gym");
  EXPECT_NE(prompt_at, std::string::npos) << text;
  EXPECT_NE(steer_at, std::string::npos) << text;
  EXPECT_LT(prompt_at, steer_at);
  ASSERT_TRUE(eventually(
    [&] {
      return events.count("event: steer.applied") >= 1
             && events.count(R"("role":"assistant")") >= 1;
    },
    10s))
    << events.text();
  EXPECT_NE(events.text().find(R"("message_ids":["m2"])"), std::string::npos)
    << events.text();
}

TEST_F(CodexSessions,
       ASubscriberSeesDeltasWhileTheAnswerIsWrittenThenTheEntry) {
  start({"FAKE_CODEX_TURN_MS=1500"});
  sse_client events{port_, "/v1/threads/t-delta/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    10s));
  auto first = turn("t-delta", "d1", "stream this");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(eventually(
    [&] {
      return events.count("event: delta") >= 1;
    },
    10s))
    << events.text();
  EXPECT_EQ(run_state(first.run_id), "running")
    << "the first delta arrives while the turn runs";
  EXPECT_NE(events.text().find(R"("text":"echo: ")"), std::string::npos)
    << events.text();
  ASSERT_TRUE(eventually(
    [&] {
      return events.count(R"("role":"assistant")") >= 1;
    },
    20s))
    << events.text();
  auto text = events.text();
  auto last_delta = text.rfind("event: delta");
  auto entry = text.find(R"("role":"assistant")");
  EXPECT_LT(last_delta, entry) << text;
  EXPECT_GE(events.count("event: delta"), 2u) << "the rest streams too";
  EXPECT_NE(text.find("stream this", last_delta), std::string::npos) << text;
  EXPECT_EQ(run_state(first.run_id), "ok");
}

TEST_F(CodexSessions, InterruptStopsTheRunAndStartsTheNewInput) {
  start({"FAKE_CODEX_TURN_MS=5000"});
  auto first = turn("t-int", "i1", "long task");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(turn_running());
  auto second = turn("t-int", "i2", "no, do this", R"(,"mode":"interrupt")");
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.kind, "start");
  EXPECT_NE(second.run_id, first.run_id);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id) && finished(second.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "cancelled");
  EXPECT_EQ(run_state(second.run_id), "ok");
  EXPECT_NE(reply(second.run_id).find("no, do this"), std::string::npos)
    << reply(second.run_id);
  EXPECT_EQ(reply(second.run_id).find("long task"), std::string::npos)
    << "a fresh app-server process and thread";
}

TEST_F(CodexSessions, CancelEndsTheProcessGroupWithinOneSecond) {
  // The fake and its "tool" child ignore SIGTERM: SIGKILL after the grace.
  use_files("codex");
  start({"FAKE_CODEX_TURN_MS=600000", "FAKE_CODEX_IGNORE_TERM=1",
         "FAKE_CODEX_PIDFILE=" + dir_ + "/pids"},
        300);
  auto first = turn("t-cancel", "c1", "never ends");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(turn_running());
  auto pids = read_pids(dir_ + "/pids");
  ASSERT_EQ(pids.size(), 2u);
  auto cancel = http_->post("/v1/runs/" + first.run_id + "/cancel", "");
  auto answered = std::chrono::steady_clock::now();
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  for (auto pid : pids) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      answered + 1s - std::chrono::steady_clock::now());
    EXPECT_TRUE(eventually(
      [&] {
        return gone(pid);
      },
      std::max(left, 0ms), 5ms))
      << "pid " << pid << " outlived the cancel by more than 1 s";
  }
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    10s));
  EXPECT_EQ(run_state(first.run_id), "cancelled");
}

TEST_F(CodexSessions, ApprovalRequestsAreDeclinedAndTheTurnFinishes) {
  start({"FAKE_CODEX_APPROVAL=1"});
  auto first = turn("t-appr", "a1", "delete the build");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  EXPECT_NE(reply(first.run_id).find("approval: decline"), std::string::npos)
    << reply(first.run_id);
}

TEST_F(CodexSessions, AFailedTurnOrAnAbruptExitFailsTheRun) {
  start({"FAKE_CODEX_FAIL=1"});
  auto failed = turn("t-fail", "f1", "try");
  ASSERT_EQ(failed.status, 200) << failed.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(failed.run_id);
    },
    20s));
  EXPECT_EQ(run_state(failed.run_id), "error");
  EXPECT_NE(reply(failed.run_id).find("fake failure"), std::string::npos)
    << reply(failed.run_id);
  ASSERT_TRUE(stop_node());
  start({"FAKE_CODEX_EXIT=turn"});
  auto crashed = turn("t-exit", "e1", "try");
  ASSERT_EQ(crashed.status, 200) << crashed.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(crashed.run_id);
    },
    20s));
  EXPECT_EQ(run_state(crashed.run_id), "error");
  EXPECT_NE(reply(crashed.run_id).find("exited with code 3"), std::string::npos)
    << reply(crashed.run_id);
}

} // namespace
} // namespace butlers::test
