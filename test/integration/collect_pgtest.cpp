// Collect mode of conversation threads against a real node process, real
// PostgreSQL and real HTTP over loopback: turns sent close together before
// a run starts become one run with all their inputs in order; a SIGKILL in
// the middle of a collect window loses none of the turns answered; and with
// collect off a thread behaves as it always did.

#include <chrono>
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

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A turn's answer.
struct turn_answer {
  int status = 0;
  std::string run_id;
  std::string kind;
  std::string body;
};

class Collect : public node_fixture {
 protected:
  /// Starts (or restarts) a node whose `general` butler runs one scripted
  /// turn of `turn_ms` and replies with its prompt, with `threads` as the
  /// body of its [threads] table.
  void launch(const std::string& threads, int turn_ms = 100) {
    use_database("collect");
    use_files("collect");
    ASSERT_TRUE(start_node(
      node_head("collect-test", 5, "request_timeout_ms = 10000\n")
      + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
        "[butler.runtime]\nturn_ms = "
      + std::to_string(turn_ms)
      + "\nturns = 1\n"
        "reply = \"{butler}: {prompt}\"\n[threads]\n"
      + threads + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
      + "/outbox.jsonl\"\n"));
  }

  turn_answer turn(const std::string& thread, const std::string& message_id,
                   const std::string& text) {
    auto r = http_->post("/v1/threads/" + thread + "/turns",
                         R"({"message_id":)" + json::quote(message_id)
                           + R"(,"text":)" + json::quote(text) + "}");
    turn_answer a;
    a.status = r.status;
    a.body = r.body;
    rapidjson::Document doc;
    if (json::parse(r.body, doc) || !doc.IsObject())
      return a;
    if (doc.HasMember("run_id") && doc["run_id"].IsString())
      a.run_id = doc["run_id"].GetString();
    if (doc.HasMember("kind") && doc["kind"].IsString())
      a.kind = doc["kind"].GetString();
    return a;
  }

  /// Sends the turns `texts` (message ids m1, m2, ...) to `thread`, one
  /// every `gap`, as a user typing them would: the pacing of the input,
  /// not a wait for a result.
  std::vector<turn_answer> burst(const std::string& thread,
                                 const std::vector<std::string>& texts,
                                 std::chrono::milliseconds gap) {
    std::vector<turn_answer> out;
    auto at = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      std::this_thread::sleep_until(at + i * gap);
      out.push_back(turn(thread, "m" + std::to_string(i + 1), texts[i]));
    }
    return out;
  }

  /// The one text value `sql` (with `$1` = `arg`) answers; "" for none.
  std::string text(const std::string& sql, const std::string& arg) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(sql, arg);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  }

  int64_t count(const std::string& sql, const std::string& arg) {
    auto x = text(sql, arg);
    return x.empty() ? -1 : std::stoll(x);
  }

  std::string run_state(const std::string& run_id) {
    return text("SELECT state FROM thread_runs WHERE run_id = $1", run_id);
  }

  bool finished(const std::string& run_id) {
    auto s = run_state(run_id);
    return s == "ok" || s == "error" || s == "cancelled";
  }

  /// The run's answer in the transcript.
  std::string reply(const std::string& run_id) {
    return text("SELECT body FROM thread_transcript WHERE run_id = $1 "
                "AND role = 'assistant'",
                run_id);
  }

  /// The prompt of the run's work item (its route.v1 envelope).
  std::string work_prompt(const std::string& run_id) {
    return text("SELECT envelope->'input'->>'prompt' FROM route_work "
                "WHERE request_id = $1",
                run_id);
  }

  /// The user turns stored for the run: "kind:message_id" in transcript
  /// order, comma-separated.
  std::string stored_turns(const std::string& run_id) {
    return text("SELECT string_agg(kind || ':' || message_id, ',' "
                "ORDER BY cursor) FROM thread_transcript "
                "WHERE run_id = $1 AND role = 'user'",
                run_id);
  }
};

TEST_F(Collect, ThreeTurnsSent100msApartBecomeOneRunWithAllInputsInOrder) {
  launch("collect_ms = 500\n");
  auto answers = burst("t-burst", {"book a table", "for four", "at eight"},
                       100ms);
  auto run_id = answers[0].run_id;
  ASSERT_FALSE(run_id.empty()) << answers[0].body;
  for (auto& a : answers) {
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.kind, "collect");
    EXPECT_EQ(a.run_id, run_id) << "every turn joined the same run";
  }
  // All three are stored; the run waits for its window to close.
  EXPECT_EQ(stored_turns(run_id), "collect:m1,collect:m2,collect:m3");
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run_id);
    },
    20s))
    << node_->log();
  EXPECT_EQ(run_state(run_id), "ok");
  EXPECT_EQ(work_prompt(run_id), "book a table\n\nfor four\n\nat eight");
  EXPECT_EQ(reply(run_id), "general: book a table\n\nfor four\n\nat eight");
  EXPECT_EQ(count("SELECT count(*) FROM thread_runs WHERE thread_id = $1",
                  "t-burst"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE butler = $1",
                  "general"),
            1);
}

TEST_F(Collect, ASigkillInTheMiddleOfAWindowLosesNoAnsweredTurn) {
  // A window long enough to be surely open when the node is killed.
  std::string threads = "collect_ms = 5000\ncollect_max_ms = 20000\n";
  launch(threads);
  auto answers = burst("t-kill", {"one", "two"}, 100ms);
  auto run_id = answers[0].run_id;
  for (auto& a : answers) {
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_EQ(a.kind, "collect");
    ASSERT_EQ(a.run_id, run_id);
  }
  ASSERT_EQ(run_state(run_id), "collecting");
  ASSERT_TRUE(kill_node());
  // Both answered turns are in PostgreSQL, the run still collecting.
  EXPECT_EQ(run_state(run_id), "collecting");
  EXPECT_EQ(stored_turns(run_id), "collect:m1,collect:m2");
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE butler = $1",
                  "general"),
            0)
    << "the window had not closed";
  // Restarted, the node finds the run and runs its turns as one run at
  // once (the window is not opened again), with nobody talking to it.
  auto restarted = std::chrono::steady_clock::now();
  launch(threads);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(run_id);
    },
    20s))
    << node_->log();
  EXPECT_LT(std::chrono::steady_clock::now() - restarted, 15s);
  EXPECT_EQ(run_state(run_id), "ok");
  EXPECT_EQ(work_prompt(run_id), "one\n\ntwo");
  EXPECT_EQ(reply(run_id), "general: one\n\ntwo");
  EXPECT_EQ(count("SELECT count(*) FROM thread_runs WHERE thread_id = $1",
                  "t-kill"),
            1);
  // The third turn, sent after the restart, opens a window of its own.
  auto third = turn("t-kill", "m3", "three");
  ASSERT_EQ(third.status, 200) << third.body;
  EXPECT_EQ(third.kind, "collect");
  EXPECT_NE(third.run_id, run_id);
  auto retry = turn("t-kill", "m2", "two");
  EXPECT_EQ(retry.run_id, run_id) << "a retry of a collected turn answers "
                                     "its run";
  EXPECT_EQ(retry.kind, "collect");
}

TEST_F(Collect, WithCollectOffTheFirstTurnStartsARunAndTheNextSteerIt) {
  launch("", 2000);
  auto answers = burst("t-off", {"one", "two", "three"}, 100ms);
  ASSERT_EQ(answers[0].status, 200) << answers[0].body;
  EXPECT_EQ(answers[0].kind, "start");
  for (size_t i = 1; i < answers.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(answers[i].kind, "steer") << "the 2 s run is still going";
    EXPECT_EQ(answers[i].run_id, answers[0].run_id);
  }
  ASSERT_TRUE(eventually(
    [&] {
      return finished(answers[0].run_id);
    },
    20s));
  EXPECT_EQ(work_prompt(answers[0].run_id), "one");
  EXPECT_EQ(count("SELECT count(*) FROM thread_transcript "
                  "WHERE thread_id = $1 AND kind = 'collect'",
                  "t-off"),
            0);
}

} // namespace
} // namespace butlers::test
