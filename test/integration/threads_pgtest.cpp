// Conversation threads against a real node process, real PostgreSQL and
// real HTTP over loopback: start-or-steer, where a steer lands, queue,
// interrupt, the 409s (with nothing stored), idempotent retries, cancel by
// run and by thread, both event stream scopes, many threads at once, and
// idle stop and resume.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"
#include "test/support/thread_node.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// One turn of a scripted run as its result records it.
struct turn_record {
  uint32_t turn = 0;
  int64_t started_us = 0;
  /// (message_id, arrived_us, arrived_turn)
  std::vector<std::tuple<std::string, int64_t, uint32_t>> steers;
};

class Threads : public thread_node {
 protected:
  /// Kills the node (SIGKILL) and starts it again on the same database.
  void crash_and_restart(const std::string& config_tail) {
    ASSERT_TRUE(kill_node());
    launch(config_tail);
  }

  /// The turns a finished scripted run recorded (its reply's detail).
  std::vector<turn_record> turns_of(const std::string& run_id) {
    std::vector<turn_record> out;
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params("SELECT detail::text FROM thread_transcript "
                            "WHERE run_id = $1 AND role = 'assistant'",
                            run_id);
    if (r.empty() || r[0][0].is_null())
      return out;
    rapidjson::Document doc;
    if (json::parse(r[0][0].as<std::string>(), doc) || !doc.IsObject()
        || !doc.HasMember("turn_log"))
      return out;
    for (auto& t : doc["turn_log"].GetArray()) {
      turn_record rec;
      rec.turn = t["turn"].GetUint();
      rec.started_us = t["started_us"].GetInt64();
      for (auto& s : t["steers"].GetArray())
        rec.steers.emplace_back(s["message_id"].GetString(),
                                s["arrived_us"].GetInt64(),
                                s["arrived_turn"].GetUint());
      out.push_back(std::move(rec));
    }
    return out;
  }
};

TEST_F(Threads, StartOrSteerAndTheSteerLandsAtTheNextBoundary) {
  start(400, 3, 4);
  auto first = turn("t-steer", "m1", "plan my week");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.kind, "start");
  // Wait until the run is inside its first turn, then steer.
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(first.run_id) == "running";
    },
    10s));
  auto steer = turn("t-steer", "m2", "and book the gym");
  ASSERT_EQ(steer.status, 200) << steer.body;
  EXPECT_EQ(steer.kind, "steer");
  EXPECT_EQ(steer.run_id, first.run_id) << "input for an active run steers it";
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  auto turns = turns_of(first.run_id);
  ASSERT_GE(turns.size(), 3u);
  // The steer appears exactly once, at the start of the first turn that
  // began after it arrived: it waited for the boundary (never mid-turn) and
  // no later.
  int seen = 0;
  for (size_t k = 0; k < turns.size(); ++k) {
    for (auto& [id, arrived_us, arrived_turn] : turns[k].steers) {
      EXPECT_EQ(id, "m2");
      ++seen;
      EXPECT_GE(turns[k].started_us, arrived_us) << "applied before it arrived";
      ASSERT_GE(k, 1u) << "the run had started before the steer";
      EXPECT_LT(turns[k - 1].started_us, arrived_us)
        << "arrived during the previous turn";
      EXPECT_EQ(arrived_turn, turns[k - 1].turn)
        << "the session saw it arrive mid-turn";
      EXPECT_EQ(turns[k].turn, arrived_turn + 1)
        << "applied at the next boundary";
      EXPECT_LE(arrived_us, steer.answered_us + 1000000);
    }
  }
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_runs"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript WHERE role = "
                   "'user'"),
            2);
}

TEST_F(Threads, ASteerWhileTheRunWaitsForASlotJoinsItsPendingInput) {
  start(300, 2, 1);
  auto busy = turn("t-busy", "b1", "occupy the only slot");
  ASSERT_EQ(busy.status, 200) << busy.body;
  auto waiting = turn("t-wait", "w1", "wait for a slot");
  ASSERT_EQ(waiting.status, 200) << waiting.body;
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(waiting.run_id) == "running";
    },
    10s));
  // The butler stored it, but its only session is busy: the steer joins
  // the pending work item and is seen at the run's first turn.
  auto steer = turn("t-wait", "w2", "more input");
  ASSERT_EQ(steer.status, 200) << steer.body;
  EXPECT_EQ(steer.kind, "steer");
  EXPECT_EQ(steer.run_id, waiting.run_id);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(waiting.run_id);
    },
    20s));
  auto turns = turns_of(waiting.run_id);
  ASSERT_FALSE(turns.empty());
  ASSERT_EQ(turns[0].steers.size(), 1u);
  EXPECT_EQ(std::get<0>(turns[0].steers[0]), "w2");
  EXPECT_EQ(std::get<2>(turns[0].steers[0]), 0u)
    << "arrived before the session started";
  auto busy_turns = turns_of(busy.run_id);
  ASSERT_FALSE(busy_turns.empty());
  EXPECT_GE(turns[0].started_us, busy_turns.back().started_us)
    << "the waiting run started only after the busy one's last turn";
}

TEST_F(Threads, QueueStartsTheNextRunWhenTheActiveOneEnds) {
  start(300, 2, 4);
  auto first = turn("t-queue", "q1", "first");
  ASSERT_EQ(first.status, 200);
  auto queued = turn("t-queue", "q2", "second", R"(,"mode":"queue")");
  ASSERT_EQ(queued.status, 200) << queued.body;
  EXPECT_EQ(queued.kind, "queued");
  EXPECT_NE(queued.run_id, first.run_id);
  EXPECT_EQ(run_state(queued.run_id), "queued");
  ASSERT_TRUE(eventually(
    [&] {
      return finished(queued.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok");
  EXPECT_EQ(run_state(queued.run_id), "ok");
  auto a = turns_of(first.run_id);
  auto b = turns_of(queued.run_id);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_GE(b.front().started_us, a.back().started_us)
    << "the queued run began after the active one's last turn";
  for (auto& t : a)
    EXPECT_TRUE(t.steers.empty()) << "queued input is not a steer";
}

TEST_F(Threads, QueueIsBoundedWith429) {
  start(2000, 3, 4, "[threads]\nmax_queued_runs = 2\n");
  ASSERT_EQ(turn("t-qb", "a", "x").status, 200);
  EXPECT_EQ(turn("t-qb", "b", "x", R"(,"mode":"queue")").status, 200);
  EXPECT_EQ(turn("t-qb", "c", "x", R"(,"mode":"queue")").status, 200);
  auto full = http_->post("/v1/threads/t-qb/turns",
                          R"({"message_id":"d","text":"x","mode":"queue"})");
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.headers["retry-after"], "1");
  EXPECT_NE(full.body.find("overload_rejected"), std::string::npos);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript "
                   "WHERE message_id = 'd'"),
            0);
  EXPECT_EQ(metric("butlers_thread_overload_rejected_total"), 1);
}

TEST_F(Threads, InterruptCancelsTheActiveRunAndStartsANewOne) {
  start(500, 4, 4);
  auto first = turn("t-int", "i1", "long task");
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(first.run_id) == "running";
    },
    10s));
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
  // The new run is now the active one: a steer with its id goes there.
  EXPECT_EQ(metric("butlers_thread_runs_interrupted_total"), 1);
}

TEST_F(Threads, StaleExpectedRunIdAndRejectAnswer409WithNothingStored) {
  start(2000, 3, 4);
  auto first = turn("t-409", "x1", "start");
  ASSERT_EQ(first.status, 200);
  auto before = scalar("SELECT count(*) FROM thread_transcript");
  auto runs_before = scalar("SELECT count(*) FROM thread_runs");
  auto stale = turn("t-409", "x2", "steer",
                    R"(,"expected_run_id":"00000000-0000-7000-8000-)"
                    R"(000000000000")");
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ(stale.code, "run_changed");
  EXPECT_NE(stale.body.find(first.run_id), std::string::npos)
    << "the answer names the active run";
  auto rejected = turn("t-409", "x3", "busy?", R"(,"mode":"reject")");
  EXPECT_EQ(rejected.status, 409) << rejected.body;
  EXPECT_EQ(rejected.code, "run_active");
  // No active run on another thread, but one was expected.
  auto none = turn("t-409-other", "y1", "hi",
                   R"(,"expected_run_id":")" + first.run_id + "\"");
  EXPECT_EQ(none.status, 409);
  EXPECT_EQ(none.code, "run_changed");
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript"), before);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_runs"), runs_before);
  // The matching expected id steers.
  auto ok = turn("t-409", "x4", "steer",
                 R"(,"expected_run_id":")" + first.run_id + "\"");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.kind, "steer");
}

TEST_F(Threads, BadInputAnswers4xxNamingTheProblem) {
  start(200, 1, 4);
  auto missing = http_->post("/v1/threads/t-bad/turns", R"({"text":"x"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("message_id"), std::string::npos);
  auto mode = http_->post("/v1/threads/t-bad/turns",
                          R"({"message_id":"a","text":"x","mode":"later"})");
  EXPECT_EQ(mode.status, 400);
  EXPECT_NE(mode.body.find("'mode'"), std::string::npos);
  auto extra = http_->post("/v1/threads/t-bad/turns",
                           R"({"message_id":"a","text":"x","temperature":1})");
  EXPECT_EQ(extra.status, 400);
  EXPECT_NE(extra.body.find("'temperature'"), std::string::npos);
  auto model = http_->post("/v1/threads/t-bad/turns",
                           R"({"message_id":"a","text":"x","model":"y z"})");
  EXPECT_EQ(model.status, 400);
  EXPECT_NE(model.body.find("'model'"), std::string::npos);
  auto steps
    = http_->post("/v1/threads/t-bad/turns",
                  R"({"message_id":"a","text":"x","options":{"max_steps":0}})");
  EXPECT_EQ(steps.status, 400);
  EXPECT_NE(steps.body.find("'options.max_steps'"), std::string::npos);
  EXPECT_EQ(http_->post("/v1/threads/t-bad/turns", "{").status, 400);
  EXPECT_EQ(http_
              ->post("/v1/threads/t-bad/turns",
                     R"({"message_id":"a","text":"x"})", "text/plain")
              .status,
            415);
  EXPECT_EQ(http_
              ->post("/v1/threads/bad%20id/turns",
                     R"({"message_id":"a","text":"x"})")
              .status,
            400);
  auto unknown = turn("t-bad", "a", "x", R"(,"butler":"nobody")");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("nobody"), std::string::npos);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript"), 0);
  EXPECT_EQ(http_->post("/v1/runs/not-a-uuid/cancel", "").status, 400);
}

TEST_F(Threads, RetriesWithTheSameMessageIdAreIdempotent) {
  start(300, 2, 4, "[threads]\nidle_timeout_s = 1\n");
  auto first = turn("t-idem", "m1", "hello");
  ASSERT_EQ(first.status, 200);
  EXPECT_FALSE(first.duplicate);
  auto again = turn("t-idem", "m1", "hello");
  EXPECT_EQ(again.status, 200);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.run_id, first.run_id);
  EXPECT_EQ(again.kind, "start");
  // The same message in another mode is still the original answer.
  auto interrupt = turn("t-idem", "m1", "hello", R"(,"mode":"interrupt")");
  EXPECT_EQ(interrupt.run_id, first.run_id);
  EXPECT_EQ(interrupt.kind, "start");
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok") << "the retry interrupted nothing";
  // After the thread actor retired, the database answers the retry.
  ASSERT_TRUE(eventually(
    [&] {
      return metric("butlers_threads_live") == 0;
    },
    20s));
  auto late = turn("t-idem", "m1", "hello");
  EXPECT_EQ(late.status, 200);
  EXPECT_TRUE(late.duplicate);
  EXPECT_EQ(late.run_id, first.run_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_runs"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript WHERE role = "
                   "'user'"),
            1);
}

TEST_F(Threads, CancelByRunAndByThread) {
  start(2000, 5, 8);
  auto a = turn("t-ca", "a1", "one");
  ASSERT_EQ(a.status, 200);
  auto by_run = http_->post("/v1/runs/" + a.run_id + "/cancel", "");
  EXPECT_EQ(by_run.status, 200) << by_run.body;
  EXPECT_NE(by_run.body.find(R"("cancelled":1)"), std::string::npos);
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(a.run_id) == "cancelled";
    },
    10s));
  EXPECT_EQ(http_->post("/v1/runs/" + a.run_id + "/cancel", "").status, 404)
    << "a finished run is not active";
  auto b = turn("t-cb", "b1", "two");
  auto q = turn("t-cb", "b2", "three", R"(,"mode":"queue")");
  ASSERT_EQ(q.kind, "queued");
  auto by_thread = http_->post("/v1/threads/t-cb/cancel", "");
  EXPECT_EQ(by_thread.status, 200);
  EXPECT_NE(by_thread.body.find(R"("cancelled":2)"), std::string::npos)
    << by_thread.body;
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(b.run_id) == "cancelled"
             && run_state(q.run_id) == "cancelled";
    },
    10s));
  // The thread takes new turns after a cancel: a fresh run starts.
  auto c = turn("t-cb", "b3", "again");
  EXPECT_EQ(c.kind, "start");
  EXPECT_NE(c.run_id, b.run_id);
}

TEST_F(Threads, CancellingTheActiveRunStartsTheQueuedOne) {
  start(300, 3, 4);
  auto a = turn("t-cq", "a1", "one");
  ASSERT_EQ(a.status, 200);
  auto q = turn("t-cq", "a2", "two", R"(,"mode":"queue")");
  ASSERT_EQ(q.kind, "queued");
  EXPECT_EQ(http_->post("/v1/runs/" + a.run_id + "/cancel", "").status, 200);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(a.run_id) && finished(q.run_id);
    },
    20s));
  EXPECT_EQ(run_state(a.run_id), "cancelled");
  EXPECT_EQ(run_state(q.run_id), "ok");
}

TEST_F(Threads, ManyThreadsRunAtOnce) {
  start(300, 2, 64);
  constexpr int n = 40;
  std::vector<std::string> runs;
  for (int i = 0; i < n; ++i) {
    auto a = turn("t-many-" + std::to_string(i), "m", "hi");
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.kind, "start");
    runs.push_back(a.run_id);
  }
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(std::unique(runs.begin(), runs.end()), runs.end());
  ASSERT_TRUE(eventually(
    [&] {
      return scalar("SELECT count(*) FROM thread_runs WHERE state = 'ok'") == n;
    },
    30s));
  // They ran side by side: some run began its first turn before another
  // one's last turn had begun.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (auto& id : runs) {
    auto t = turns_of(id);
    ASSERT_FALSE(t.empty());
    spans.emplace_back(t.front().started_us, t.back().started_us);
  }
  int overlapping = 0;
  for (size_t i = 0; i < spans.size(); ++i)
    for (size_t j = i + 1; j < spans.size(); ++j)
      if (spans[i].first < spans[j].second && spans[j].first < spans[i].second)
        ++overlapping;
  EXPECT_GT(overlapping, n);
  EXPECT_EQ(metric("butlers_threads_spawned_total"), n);
}

TEST_F(Threads, EventStreamsThreadScopeAndSummaryScope) {
  start(300, 3, 4);
  sse_client thread_events{port_, "/v1/threads/t-ev/events"};
  sse_client other_events{port_, "/v1/threads/t-other/events"};
  sse_client summary{port_, "/v1/events/summary"};
  ASSERT_TRUE(eventually(
    [&] {
      return thread_events.open() && other_events.open() && summary.open();
    },
    10s));
  auto first = turn("t-ev", "e1", "secret body one");
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(first.run_id) == "running";
    },
    10s));
  auto steer = turn("t-ev", "e2", "secret body two");
  ASSERT_EQ(steer.kind, "steer");
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  ASSERT_TRUE(eventually(
    [&] {
      return thread_events.count("event: transcript") >= 3
             && thread_events.count(R"("state":"ok")") >= 1;
    },
    10s))
    << thread_events.text();
  auto text = thread_events.text();
  EXPECT_EQ(thread_events.count("event: steer.accepted"), 1u);
  EXPECT_EQ(thread_events.count("event: steer.applied"), 1u);
  EXPECT_NE(text.find("secret body one"), std::string::npos);
  EXPECT_NE(text.find(R"("message_ids":["e2"])"), std::string::npos);
  EXPECT_NE(text.find("id: 1\n"), std::string::npos) << "frames carry cursors";
  EXPECT_EQ(text.find("t-other"), std::string::npos);
  EXPECT_EQ(other_events.count("event:"), 0u)
    << "another thread's subscriber sees nothing";
  ASSERT_TRUE(eventually(
    [&] {
      return summary.count(R"("run_status":"ok")") >= 1;
    },
    10s))
    << summary.text();
  auto sum = summary.text();
  EXPECT_NE(sum.find(R"("thread_id":"t-ev")"), std::string::npos);
  // A summary names the thread by its title and previews its last message
  // (bounded); it never carries transcript events.
  EXPECT_NE(sum.find(R"("title":"secret body one")"), std::string::npos) << sum;
  EXPECT_EQ(sum.find("event: transcript"), std::string::npos);
  // Backfill after the first cursor returns the rest of the transcript.
  auto backfill = http_->get("/v1/threads/t-ev/transcript?after=1");
  EXPECT_EQ(backfill.status, 200);
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(backfill.body, doc)) << backfill.body;
  ASSERT_TRUE(doc["messages"].IsArray());
  EXPECT_EQ(doc["messages"].Size(), 2u);
  EXPECT_EQ(str(doc["messages"][0], "message_id"), "e2");
  EXPECT_EQ(str(doc["messages"][1], "role"), "assistant");
  EXPECT_EQ(http_->get("/v1/threads/t-ev/transcript?after=x").status, 400);
}

TEST_F(Threads, ASlowSubscriberHasEventsDroppedAndNeverSlowsTheRun) {
  start(50, 60, 4, "[threads]\nsubscriber_buffer = 2\n");
  // A client that subscribes and then never reads, with a tiny receive
  // buffer: the server's socket fills up and stays busy.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string get = "GET /v1/threads/t-slow/events HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, get.data(), get.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(get.size()));
  // A reading subscriber of the same thread keeps up.
  sse_client fast{port_, "/v1/threads/t-slow/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return fast.open();
    },
    10s));
  auto first = turn("t-slow", "s0", "start");
  ASSERT_EQ(first.status, 200);
  // Large steers: each transcript event carries 500 KB, 20 MB in all, more
  // than the kernel buffers between the node and the sleeping client.
  std::string big(500000, 'x');
  for (int i = 1; i <= 40; ++i) {
    auto r = turn("t-slow", "s" + std::to_string(i), big);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    20s));
  EXPECT_EQ(run_state(first.run_id), "ok") << "the run was not held up";
  EXPECT_GT(metric("butlers_thread_events_dropped_total"), 0);
  EXPECT_GE(fast.count("event: transcript"), 1u);
  // Whatever a subscriber missed, the transcript has: the backfill.
  auto tail = http_->get("/v1/threads/t-slow/transcript?after=0&limit=1000");
  EXPECT_EQ(tail.status, 200);
  EXPECT_NE(tail.body.find(R"("message_id" : "s40")"), std::string::npos);
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript "
                   "WHERE thread_id = 't-slow' AND role = 'user'"),
            41);
  ::close(fd);
}

TEST_F(Threads, IdleThreadsStopAndResume) {
  start(200, 1, 4, "[threads]\nidle_timeout_s = 1\n");
  auto first = turn("t-idle", "m1", "hello");
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id);
    },
    10s));
  ASSERT_TRUE(eventually(
    [&] {
      return metric("butlers_threads_retired_total") == 1
             && metric("butlers_threads_live") == 0;
    },
    20s));
  // A new actor for the same thread resumes it: the transcript continues
  // and the next turn starts a run.
  auto second = turn("t-idle", "m2", "again");
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.kind, "start");
  EXPECT_EQ(metric("butlers_threads_spawned_total"), 2);
  ASSERT_TRUE(eventually(
    [&] {
      return finished(second.run_id);
    },
    10s));
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript "
                   "WHERE thread_id = 't-idle'"),
            4);
  EXPECT_GT(scalar("SELECT max(cursor) FROM thread_transcript "
                   "WHERE message_id = 'm2'"),
            scalar("SELECT max(cursor) FROM thread_transcript "
                   "WHERE message_id = 'm1'"));
}

TEST_F(Threads, RunsLeftOpenByACrashAreResumed) {
  std::string general = "[[butler]]\nname = \"general\"\n"
                        "max_concurrent_sessions = 4\n[butler.runtime]\n"
                        "turn_ms = 1500\nturns = 2\n";
  start(1500, 2, 4);
  auto first = turn("t-crash", "c1", "survive this");
  ASSERT_EQ(first.status, 200);
  auto queued = turn("t-crash", "c2", "and then this", R"(,"mode":"queue")");
  ASSERT_EQ(queued.kind, "queued");
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(first.run_id) == "running";
    },
    10s));
  crash_and_restart(general);
  // Nobody talks to the thread: the directory wakes it, the open run is
  // handed to its butler again (which recovered the work item), and the
  // queued run follows.
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id) && finished(queued.run_id);
    },
    40s))
    << node_->log();
  EXPECT_EQ(run_state(first.run_id), "ok");
  EXPECT_EQ(run_state(queued.run_id), "ok");
  EXPECT_EQ(scalar("SELECT count(*) FROM thread_transcript "
                   "WHERE role = 'assistant'"),
            2);
  EXPECT_EQ(scalar("SELECT count(*) FROM route_work"), 2)
    << "the resumed run found its work item; nothing ran twice as new";
}

} // namespace
} // namespace butlers::test
