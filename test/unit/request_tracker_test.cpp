// The request tracker without an actor system: each event goes in with a
// time, the decisions come out as actions.

#include <gtest/gtest.h>

#include "runtime/planning.hpp"
#include "runtime/request_tracker.hpp"
#include "runtime/uuid.hpp"

using namespace butlers;
using namespace std::chrono_literals;

namespace {

using clock_type = request_tracker::clock;

/// One stored segment row as `fanout_plan_store` returns it.
std::vector<std::string> row(const std::string& mode, const std::string& id,
                             const std::string& butler, bool first_stored) {
  return {mode,
          id,
          "0",
          butler,
          "do " + butler,
          "pending",
          "0",
          "0",
          "",
          "",
          "",
          first_stored ? "true" : "false"};
}

struct Tracker : testing::Test {
  switchboard_config cfg;
  metrics_registry metrics;
  std::optional<request_tracker> tracker;
  clock_type::time_point now = clock_type::time_point{} + 1h;
  int64_t wall_us = 1'800'000'000'000'000;
  std::string id = make_uuid_v7().to_string();

  void make(std::vector<policy_config> policies = {}) {
    cfg.retry_base_ms = 100;
    cfg.retry_cap_ms = 1000;
    cfg.route_timeout_s = 30;
    cfg.circuit_failure_threshold = 2;
    tracker.emplace(cfg, std::move(policies), metrics, 42);
  }

  tracker_actions start(std::vector<std::vector<std::string>> rows) {
    if (!tracker)
      make();
    inbox_record rec;
    rec.context.request_id = id;
    rec.context.received_at_us = wall_us;
    rec.context.source_channel = "api";
    named_result stored{true, std::move(rows)};
    tracker_actions out;
    EXPECT_TRUE(tracker->start(inbox_ref{id, wall_us}, 7, rec, stored, wall_us,
                               now, out));
    return out;
  }

  route_response ok(const dispatch_order& d, std::string work = "w-1") {
    route_response r;
    r.status = "ok";
    r.request_id = id;
    r.segment_id = d.envelope.segment_id;
    r.work_id = std::move(work);
    return r;
  }

  route_response error(const dispatch_order& d, std::string cls, bool retryable,
                       std::string work = "w-1") {
    auto r = make_error_response(id, std::move(cls), "it failed", retryable);
    r.segment_id = d.envelope.segment_id;
    r.work_id = std::move(work);
    return r;
  }

  tracker_actions outcome(const route_response& r) {
    tracker_actions out;
    tracker->on_outcome(r, now, out);
    return out;
  }

  uint64_t count(const std::string& name) {
    return metrics.get_counter(name, "").value();
  }
};

} // namespace

TEST_F(Tracker, AStartedRequestSendsEveryReadySegmentOfAParallelPlan) {
  auto out = start({row("parallel", "seg-1", "health", true),
                    row("parallel", "seg-2", "finance", true)});
  ASSERT_EQ(out.dispatches.size(), 2u);
  EXPECT_EQ(out.dispatches[0].butler, "health");
  EXPECT_EQ(out.dispatches[0].envelope.segment_id, "seg-1");
  EXPECT_EQ(out.dispatches[0].envelope.request_id, id);
  EXPECT_EQ(out.dispatches[0].envelope.prompt, "do health");
  EXPECT_EQ(out.dispatches[1].envelope.segment_id, "seg-2");
  EXPECT_NE(out.dispatches[0].envelope.subrequest_id,
            out.dispatches[1].envelope.subrequest_id);
  // The plan store wrote these first dispatches already.
  EXPECT_TRUE(out.writes.empty());
  EXPECT_EQ(tracker->size(), 1u);
}

TEST_F(Tracker, AnOrderedPlanSendsTheNextSegmentOnlyAfterTheFirstSucceeds) {
  auto out = start({row("ordered", "seg-1", "health", true),
                    row("ordered", "seg-2", "finance", false)});
  ASSERT_EQ(out.dispatches.size(), 1u);
  auto next = outcome(ok(out.dispatches[0]));
  ASSERT_EQ(next.dispatches.size(), 1u);
  EXPECT_EQ(next.dispatches[0].butler, "finance");
  // The settled segment and the new dispatch are both written.
  EXPECT_EQ(next.writes.size(), 2u);
}

TEST_F(Tracker, AllSegmentsOkFinishesTheRequestParsedWithItsOutcomes) {
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto done = outcome(ok(out.dispatches[0]));
  ASSERT_EQ(done.finished.size(), 1u);
  auto& f = done.finished[0];
  EXPECT_EQ(f.done.state, "parsed");
  EXPECT_EQ(f.done.lease_token, 7);
  EXPECT_TRUE(f.notify.empty());
  EXPECT_NE(f.done.dispatch_outcomes.find(R"("work_id":"w-1")"),
            std::string::npos);
  EXPECT_NE(f.done.response_summary.find(R"("succeeded":["health"])"),
            std::string::npos);
  // Finishing: later events about it change nothing until it is forgotten.
  EXPECT_TRUE(outcome(ok(out.dispatches[0])).empty());
  tracker->forget(id);
  EXPECT_EQ(tracker->size(), 0u);
}

TEST_F(Tracker, ARetryableErrorBacksOffAndTheRetryIsANewAttempt) {
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto failed = outcome(error(out.dispatches[0], "timeout", true));
  ASSERT_EQ(failed.retries.size(), 1u);
  EXPECT_EQ(failed.retries[0].segment_id, "seg-1");
  EXPECT_GE(failed.retries[0].delay, 0ms);
  EXPECT_LE(failed.retries[0].delay, 1000ms);
  EXPECT_TRUE(failed.dispatches.empty());
  EXPECT_EQ(count("butlers_switchboard_route_retries_total"), 1u);
  tracker_actions again;
  tracker->on_retry(id, "seg-1", now, again);
  ASSERT_EQ(again.dispatches.size(), 1u);
  EXPECT_EQ(again.dispatches[0].envelope.segment_id, "seg-1:a2");
}

TEST_F(Tracker, OutOfRetriesTheSegmentIsDeadLetteredAndTheUserToldWhy) {
  policy_config p;
  p.tier = "default";
  p.retry_max_attempts = 1;
  make({p});
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto failed = outcome(error(out.dispatches[0], "target_unavailable", true));
  EXPECT_TRUE(failed.retries.empty());
  ASSERT_FALSE(failed.writes.empty());
  EXPECT_EQ(failed.writes[0].query, "dead_letter_insert");
  ASSERT_EQ(failed.finished.size(), 1u);
  EXPECT_EQ(failed.finished[0].done.state, "errored");
  EXPECT_EQ(failed.finished[0].done.error_class, "target_unavailable");
  // The user is told, through the messenger, what failed and what to do.
  auto& notify = failed.finished[0].notify;
  EXPECT_NE(notify.find("Reference: request " + id), std::string::npos);
  EXPECT_NE(notify.find("\"error:" + id + ":1\""), std::string::npos) << notify;
  EXPECT_EQ(count("butlers_switchboard_dead_letters_total"), 1u);
}

TEST_F(Tracker, ANonRetryableErrorEndsTheSegmentWithoutADeadLetter) {
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto failed = outcome(error(out.dispatches[0], "validation_error", false));
  EXPECT_TRUE(failed.retries.empty());
  for (auto& w : failed.writes)
    EXPECT_NE(w.query, "dead_letter_insert");
  ASSERT_EQ(failed.finished.size(), 1u);
  EXPECT_EQ(failed.finished[0].done.state, "errored");
}

TEST_F(Tracker, AFullButlerMakesTheSegmentWaitAndTheNextOutcomeThereWakesIt) {
  auto out = start({row("parallel", "seg-1", "health", true),
                    row("parallel", "seg-2", "health", true)});
  ASSERT_EQ(out.dispatches.size(), 2u);
  tracker_actions refused;
  tracker->on_refused_full(id, "seg-2", "full", now, refused);
  EXPECT_EQ(tracker->waiting_count(), 1u);
  ASSERT_EQ(refused.retries.size(), 1u); // the timer in case none comes
  EXPECT_EQ(count("butlers_switchboard_overload_waits_total"), 1u);
  // seg-1's outcome frees a slot at health: seg-2 goes out again as the
  // same attempt (a redelivery, not a retry).
  auto woken = outcome(ok(out.dispatches[0]));
  EXPECT_TRUE(woken.room_freed);
  EXPECT_EQ(tracker->waiting_count(), 0u);
  ASSERT_EQ(woken.dispatches.size(), 1u);
  EXPECT_EQ(woken.dispatches[0].envelope.segment_id, "seg-2");
  EXPECT_EQ(count("butlers_switchboard_route_retries_total"), 0u);
  // The wait's own timer, arriving later, finds nothing to do.
  tracker_actions late;
  tracker->on_retry(id, "seg-2", now + 1h, late);
  EXPECT_TRUE(late.dispatches.empty());
}

TEST_F(Tracker, AnAcceptedAttemptWithoutAnOutcomeTimesOutAndIsCancelled) {
  auto out = start({row("parallel", "seg-1", "health", true)});
  tracker->on_accepted(id, "seg-1", "w-9", now);
  tracker_actions early;
  tracker->expire_due(now + 29s, early);
  EXPECT_TRUE(early.empty());
  tracker_actions due;
  tracker->expire_due(now + 31s, due);
  ASSERT_EQ(due.cancels.size(), 1u);
  EXPECT_EQ(due.cancels[0].work_id, "w-9");
  EXPECT_EQ(due.retries.size(), 1u);
  EXPECT_EQ(count("butlers_switchboard_route_timeouts_total"), 1u);
}

TEST_F(Tracker, TheWallClockBudgetEndsTheRequestWithATimeout) {
  policy_config p;
  p.tier = "default";
  p.wall_clock_s = 5;
  make({p});
  auto out = start({row("parallel", "seg-1", "health", true)});
  tracker->on_accepted(id, "seg-1", "w-3", now);
  tracker_actions due;
  tracker->expire_due(now + 6s, due);
  ASSERT_EQ(due.finished.size(), 1u);
  EXPECT_EQ(due.finished[0].done.state, "errored");
  EXPECT_EQ(due.finished[0].done.error_class, "timeout");
  ASSERT_EQ(due.cancels.size(), 1u);
  EXPECT_EQ(due.cancels[0].work_id, "w-3");
  EXPECT_EQ(count("butlers_switchboard_budget_exhausted_total"), 1u);
}

TEST_F(Tracker, TheInvocationBudgetStopsDispatchesWithARoutingError) {
  policy_config p;
  p.tier = "default";
  p.max_invocations = 1;
  make({p});
  auto out = start({row("ordered", "seg-1", "health", true),
                    row("ordered", "seg-2", "finance", false)});
  auto next = outcome(ok(out.dispatches[0]));
  EXPECT_TRUE(next.dispatches.empty());
  ASSERT_EQ(next.finished.size(), 1u);
  EXPECT_EQ(next.finished[0].done.error_class, "routing_error");
}

TEST_F(Tracker, FailuresOpenTheCircuitAndTheNextDispatchFailsFast) {
  policy_config p;
  p.tier = "default";
  p.retry_max_attempts = 10;
  make({p});
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto d = out.dispatches[0];
  for (int i = 0; i < 2; ++i) {
    auto failed = outcome(error(d, "target_unavailable", true));
    ASSERT_EQ(failed.retries.size(), 1u);
    tracker_actions again;
    tracker->on_retry(id, "seg-1", now, again);
    if (again.dispatches.empty())
      break;
    d = again.dispatches[0];
  }
  // Two failures (the threshold): the circuit is open, so the retry failed
  // without a dispatch and backs off again.
  EXPECT_EQ(metrics
              .get_gauge("butlers_switchboard_circuit_open", "",
                         "butler=\"health\"")
              .value(),
            1);
}

TEST_F(Tracker, ADatabaseFailureIsRetriedWithoutOpeningTheButlersCircuit) {
  policy_config p;
  p.tier = "default";
  p.retry_max_attempts = 10;
  make({p});
  auto out = start({row("parallel", "seg-1", "health", true)});
  auto d = out.dispatches[0];
  // More failures than the threshold, each the node's database failing the
  // butler: every one is retried as target_unavailable, every retry is
  // dispatched, and the circuit stays closed.
  for (int i = 0; i < 4; ++i) {
    auto failed = outcome(error(d, "database_unavailable", true));
    ASSERT_EQ(failed.retries.size(), 1u) << i;
    tracker_actions again;
    tracker->on_retry(id, "seg-1", now, again);
    ASSERT_EQ(again.dispatches.size(), 1u) << i;
    d = again.dispatches[0];
  }
  EXPECT_EQ(metrics
              .get_gauge("butlers_switchboard_circuit_open", "",
                         "butler=\"health\"")
              .value(),
            0);
  auto done = outcome(ok(d));
  ASSERT_EQ(done.finished.size(), 1u);
  EXPECT_EQ(done.finished[0].done.state, "parsed");
}

TEST_F(Tracker, ALostHostHoldsTheCircuitOpenUntilOneReturns) {
  make();
  tracker->on_host_change("health", false, now);
  auto out = start({row("parallel", "seg-1", "health", true)});
  EXPECT_TRUE(out.dispatches.empty());
  EXPECT_EQ(out.retries.size(), 1u);
  tracker->on_host_change("health", true, now);
  tracker_actions again;
  tracker->on_retry(id, "seg-1", now, again);
  EXPECT_EQ(again.dispatches.size(), 1u);
}

TEST_F(Tracker, AStoredPlanWithoutSegmentsIsNotTracked) {
  make();
  tracker_actions out;
  named_result stored{true, {}};
  EXPECT_FALSE(tracker->start(inbox_ref{id, wall_us}, 1, inbox_record{}, stored,
                              wall_us, now, out));
  EXPECT_EQ(tracker->size(), 0u);
}

TEST_F(Tracker, CancelStopsTheRunningWorkAndForgetsTheRequest) {
  auto out = start({row("parallel", "seg-1", "health", true)});
  tracker->on_accepted(id, "seg-1", "w-5", now);
  tracker_actions cancelled;
  tracker->cancel(id, cancelled);
  ASSERT_EQ(cancelled.cancels.size(), 1u);
  EXPECT_EQ(cancelled.cancels[0].butler, "health");
  EXPECT_FALSE(tracker->contains(id));
}

TEST_F(Tracker,
       ADispatchLeftOutByAGoneSwitchboardIsRedeliveredAsTheSameAttempt) {
  make();
  auto r = row("parallel", "seg-1", "health", false);
  r[5] = "dispatched";
  r[6] = "2";
  r[7] = "2";
  auto out = start({r});
  ASSERT_EQ(out.dispatches.size(), 1u);
  EXPECT_EQ(out.dispatches[0].envelope.segment_id, "seg-1:a2");
}

TEST(PlanStatement, NumbersSegmentsAndStoresTheFirstDispatches) {
  routing_plan plan;
  plan.router = "rules";
  plan.segments.resize(2);
  plan.segments[0].butler = "health";
  plan.segments[0].segment_id = "x";
  plan.segments[1].butler = "finance";
  inbox_record rec;
  rec.policy_tier = "default";
  named_statement stmt;
  auto rerouted = make_plan_statement(inbox_ref{"r-1", 5}, rec, {}, "ordered",
                                      plan, stmt);
  EXPECT_EQ(rerouted, 0u);
  EXPECT_EQ(stmt.query, "fanout_plan_store");
  EXPECT_EQ(plan.segments[0].segment_id, "seg-1");
  auto& segments = stmt.params.back();
  // Ordered: only the first goes out before any outcome.
  EXPECT_NE(
    segments.find(
      R"("segment_id":"seg-1","ordinal":0,"butler":"health","prompt":"","dispatched":true)"),
    std::string::npos)
    << segments;
  EXPECT_NE(segments.find(
              R"("butler":"finance","prompt":"","dispatched":false)"),
            std::string::npos)
    << segments;
}
