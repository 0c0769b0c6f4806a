// Claude sessions against a real node process, real PostgreSQL and real
// HTTP over loopback, with butlers-fake-claude (Claude Code's stream-json
// protocol; it echoes what it receives) as the butler's command: steer
// input reaching the model at the next boundary, text deltas on the thread
// stream before the transcript entry, interrupt, cancel killing the process
// group within a second, usage, and a failed answer.

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
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

/// A turn's answer.
struct turn_answer {
  int status = 0;
  std::string run_id;
  std::string kind;
  std::string body;
};

/// One event frame of a stream: its type and its data.
struct sse_event {
  std::string type;
  std::string data;
};

/// The event frames in what an `sse_client` received, in order (chunk
/// framing lines are neither `event:` nor `data:` lines and are skipped).
std::vector<sse_event> frames(const std::string& text) {
  std::vector<sse_event> out;
  std::istringstream in{text};
  std::string line;
  sse_event cur;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.rfind("event: ", 0) == 0) {
      cur = sse_event{line.substr(7), {}};
    } else if (line.rfind("data: ", 0) == 0 && !cur.type.empty()) {
      cur.data = line.substr(6);
      out.push_back(cur);
      cur = {};
    }
  }
  return out;
}

class ClaudeSessions : public node_fixture {
 protected:
  /// Starts a node whose butler `coder` runs the fake with `env`
  /// (NAME=VALUE, through env(1), which execs it under the same pid).
  void SetUp() override {
    use_database("claude");
    use_files("claude"); // dir_ names the fake's files before start()
  }

  void start(const std::vector<std::string>& env) {
    std::string command = R"(["env", )";
    for (auto& e : env)
      command += json::quote(e) + ", ";
    command += json::quote(BUTLERS_FAKE_CLAUDE) + "]";
    ASSERT_TRUE(
      start_node(node_head("claude-test", 5, "request_timeout_ms = 10000\n")
                 + "[[butler]]\nname = \"coder\"\nmax_concurrent_sessions = 4\n"
                 + "max_pending = 100\nsession_timeout_s = 60\n"
                 + "[butler.runtime]\nkind = \"cli\"\nfamily = \"claude\"\n"
                 + "kill_grace_ms = 300\ncommand = " + command + "\n"
                 + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
                 + "/outbox.jsonl\"\n"));
  }

  turn_answer turn(const std::string& thread, const std::string& message_id,
                   const std::string& text, const std::string& mode = {}) {
    auto body = R"({"message_id":)" + json::quote(message_id) + R"(,"text":)"
                + json::quote(text) + R"(,"butler":"coder")"
                + (mode.empty() ? "" : R"(,"mode":)" + json::quote(mode)) + "}";
    auto r = http_->post("/v1/threads/" + thread + "/turns", body);
    turn_answer a;
    a.status = r.status;
    a.body = r.body;
    rapidjson::Document doc;
    if (json::parse(r.body, doc) || !doc.IsObject())
      return a;
    a.run_id = str(doc, "run_id");
    a.kind = str(doc, "kind");
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

  /// The assistant's transcript entry of a run: (kind, body).
  std::pair<std::string, std::string> reply_of(const std::string& run_id) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT kind, body FROM thread_transcript "
                            "WHERE run_id = $1 AND role = 'assistant'",
                            run_id);
    if (r.empty())
      return {};
    return {r[0][0].as<std::string>(), r[0][1].as<std::string>()};
  }

  /// The user messages the fake received, in order.
  std::vector<std::string> inputs() const {
    std::vector<std::string> out;
    std::string all = read_file(input_log());
    const std::string sep = "\n--- end of message ---\n";
    for (size_t pos = 0;;) {
      auto end = all.find(sep, pos);
      if (end == std::string::npos)
        return out;
      out.push_back(all.substr(pos, end - pos));
      pos = end + sep.size();
    }
  }

  std::string input_log() const {
    return dir_ + "/inputs.log";
  }

  std::string pidfile() const {
    return dir_ + "/pids";
  }

  /// Waits until the fake wrote its pid and its child's.
  std::vector<pid_t> await_pids() {
    std::vector<pid_t> pids;
    EXPECT_TRUE(eventually(
      [&] {
        pids = read_pids(pidfile());
        return pids.size() == 2;
      },
      10s, 5ms));
    return pids;
  }
};

// (a), (e): a steer sent while the fake is inside its first answer reaches
// it as the next user message, at the boundary after that answer; the
// reply is the answer to it, the thread hears `steer.applied`, and the
// usage of both answers is summed.
TEST_F(ClaudeSessions, SteerInputReachesTheModelAtTheNextBoundary) {
  start(
    {"FAKE_CLAUDE_TURN_DELAY_MS=1500", "FAKE_CLAUDE_INPUT_LOG=" + input_log()});
  sse_client events{port_, "/v1/threads/t-steer/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    10s));
  auto first = turn("t-steer", "m1", "plan my week");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.kind, "start");
  // The fake got the prompt and is inside its first answer.
  ASSERT_TRUE(eventually(
    [&] {
      return inputs().size() == 1;
    },
    10s, 5ms));
  auto steer = turn("t-steer", "m2", "and \"book\" the gym");
  ASSERT_EQ(steer.status, 200) << steer.body;
  EXPECT_EQ(steer.kind, "steer");
  EXPECT_EQ(steer.run_id, first.run_id);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  auto got = inputs();
  ASSERT_EQ(got.size(), 2u) << "the prompt, then one message for the steer";
  EXPECT_NE(got[0].find(R"(User message (data, JSON string): "plan my week")"),
            std::string::npos)
    << got[0];
  EXPECT_EQ(got[0].find("book"), std::string::npos)
    << "the steer was not mixed into the running answer";
  // Fenced as data, JSON-quoted, after the rules.
  EXPECT_NE(got[1].find("untrusted data"), std::string::npos) << got[1];
  EXPECT_NE(got[1].find(
              R"(User message 1 (data, JSON string): "and \"book\" the gym")"),
            std::string::npos)
    << got[1];
  // The reply is the fake's answer to the steer message.
  auto [kind, body] = reply_of(first.run_id);
  EXPECT_EQ(kind, "reply");
  EXPECT_EQ(body, "echo: " + got[1]);
  ASSERT_TRUE(eventually(
    [&] {
      return events.count("event: steer.applied") == 1
             && events.count(R"("role":"assistant")") == 1;
    },
    10s))
    << events.text();
  EXPECT_NE(events.text().find(R"("message_ids":["m2"])"), std::string::npos)
    << events.text();
  // Usage of both answers reached the outcome: two turns of the fake's 10
  // in, 5 out, 100 cache reads and 20 cache writes; the cost is the
  // process's running total.
  EXPECT_TRUE(eventually(
    [&] {
      return node_->log().find(
               "answered, 2 turns, model fake-claude-model, tokens in 20 "
               "out 10 cache read 200 write 40, cost 0.025000 USD")
             != std::string::npos;
    },
    10s))
    << node_->log();
  // ...and was stored with the work item's result.
  pqxx::connection conn{url_};
  pqxx::result u;
  ASSERT_TRUE(eventually(
    [&] {
      pqxx::nontransaction tx{conn};
      u = tx.exec_params("SELECT w.model, w.input_tokens, w.output_tokens, "
                         "w.cache_read_tokens, w.cache_write_tokens, "
                         "w.cost_usd, "
                         "w.model_calls FROM route_work w JOIN thread_runs r "
                         "ON r.work_id = w.work_id WHERE r.run_id = $1 "
                         "AND w.model_calls IS NOT NULL",
                         first.run_id);
      return u.size() == 1;
    },
    10s));
  EXPECT_EQ(u[0][0].as<std::string>(), "fake-claude-model");
  EXPECT_EQ(u[0][1].as<int64_t>(), 20);
  EXPECT_EQ(u[0][2].as<int64_t>(), 10);
  EXPECT_EQ(u[0][3].as<int64_t>(), 200);
  EXPECT_EQ(u[0][4].as<int64_t>(), 40);
  EXPECT_NEAR(u[0][5].as<double>(), 0.025, 1e-9);
  EXPECT_EQ(u[0][6].as<int64_t>(), 2);
}

// (b): the answer streams as `delta` events while it is written, before
// the transcript entry, and the deltas add up to the reply.
TEST_F(ClaudeSessions, DeltasStreamBeforeTheTranscriptEntry) {
  start({"FAKE_CLAUDE_DELTA_DELAY_MS=20"});
  sse_client events{port_, "/v1/threads/t-delta/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    10s));
  auto first = turn("t-delta", "d1", "write me a poem");
  ASSERT_EQ(first.status, 200) << first.body;
  // A delta arrives while the run is still running.
  ASSERT_TRUE(eventually(
    [&] {
      return events.count("event: delta") >= 1;
    },
    20s, 5ms))
    << events.text();
  EXPECT_EQ(events.count(R"("role":"assistant")"), 0u)
    << "a delta came only after the answer";
  ASSERT_TRUE(eventually(
    [&] {
      return events.count(R"("role":"assistant")") == 1;
    },
    30s))
    << events.text();
  std::string streamed;
  size_t deltas = 0;
  bool after_reply = false;
  std::string reply;
  for (auto& f : frames(events.text())) {
    rapidjson::Document doc;
    ASSERT_FALSE(json::parse(f.data, doc)) << f.data;
    if (f.type == "delta") {
      EXPECT_FALSE(after_reply) << "a delta after the transcript entry";
      EXPECT_EQ(str(doc, "run_id"), first.run_id);
      streamed += str(doc, "text");
      ++deltas;
    } else if (f.type == "transcript" && str(doc, "role") == "assistant") {
      after_reply = true;
      reply = str(doc, "body");
    }
  }
  EXPECT_GE(deltas, 2u) << "coalesced, but not into one event";
  EXPECT_EQ(streamed, reply);
  EXPECT_NE(reply.find("write me a poem"), std::string::npos) << reply;
  EXPECT_EQ(reply_of(first.run_id).second, reply);
}

// (c): an interrupt cancels the running session (its process group goes)
// and starts a new run with the new input.
TEST_F(ClaudeSessions, InterruptStopsTheRunAndStartsOneWithTheNewInput) {
  start({"FAKE_CLAUDE_TURN_DELAY_MS=2000", "FAKE_CLAUDE_PIDFILE=" + pidfile()});
  auto first = turn("t-int", "i1", "long task");
  ASSERT_EQ(first.status, 200) << first.body;
  auto pids = await_pids();
  ASSERT_EQ(pids.size(), 2u);
  auto second = turn("t-int", "i2", "no, do this instead", "interrupt");
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.kind, "start");
  EXPECT_NE(second.run_id, first.run_id);
  for (auto pid : pids)
    EXPECT_TRUE(eventually(
      [pid] {
        return gone(pid);
      },
      5s, 5ms))
      << pid;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id) && finished(second.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "cancelled");
  EXPECT_EQ(run_state(second.run_id), "ok");
  auto body = reply_of(second.run_id).second;
  EXPECT_NE(body.find("no, do this instead"), std::string::npos) << body;
  EXPECT_EQ(body.find("long task"), std::string::npos) << body;
}

// (d): a cancel ends the whole process group within a second of its answer,
// even when the CLI ignores SIGTERM (SIGKILL after kill_grace_ms).
TEST_F(ClaudeSessions, CancelKillsTheProcessGroupWithinASecond) {
  start({"FAKE_CLAUDE_TURN_DELAY_MS=100000", "FAKE_CLAUDE_IGNORE_TERM=1",
         "FAKE_CLAUDE_PIDFILE=" + pidfile()});
  auto first = turn("t-cancel", "c1", "never finishes");
  ASSERT_EQ(first.status, 200) << first.body;
  auto pids = await_pids();
  ASSERT_EQ(pids.size(), 2u);
  auto r = http_->post("/v1/runs/" + first.run_id + "/cancel", "");
  auto answered = std::chrono::steady_clock::now();
  ASSERT_EQ(r.status, 200) << r.body;
  auto deadline = answered + 1s;
  bool all_gone = false;
  while (!all_gone && std::chrono::steady_clock::now() < deadline) {
    all_gone = gone(pids[0]) && gone(pids[1]);
    if (!all_gone)
      std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(all_gone) << "the group outlived the cancel by a second";
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    10s));
  EXPECT_EQ(run_state(first.run_id), "cancelled");
}

// An error result fails the run with the CLI's words.
TEST_F(ClaudeSessions, AnErrorResultFailsTheRun) {
  start({"FAKE_CLAUDE_FAIL=1"});
  auto first = turn("t-fail", "f1", "try this");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "error");
  auto [kind, body] = reply_of(first.run_id);
  EXPECT_EQ(kind, "error");
  EXPECT_NE(body.find("fake error: "), std::string::npos) << body;
}

// A CLI that dies in the middle of its answer fails the run.
TEST_F(ClaudeSessions, ACrashMidAnswerFailsTheRun) {
  start({"FAKE_CLAUDE_CRASH=1"});
  auto first = turn("t-crash", "x1", "try this");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    30s));
  EXPECT_EQ(run_state(first.run_id), "error");
  auto body = reply_of(first.run_id).second;
  EXPECT_NE(body.find("claude exited with code 3"), std::string::npos) << body;
}

} // namespace
} // namespace butlers::test
