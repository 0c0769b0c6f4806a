// The turn rules of a conversation thread, without an actor system: every
// branch of what a turn does against the active run of its butler and the
// thread's limits, and the answer a refused turn gets.

#include <gtest/gtest.h>

#include "runtime/turn_policy.hpp"

namespace butlers {
namespace {

thread_turn turn(std::string mode, std::string expected = {}) {
  thread_turn t;
  t.thread_id = "chat-1";
  t.message_id = "m1";
  t.text = "hi";
  t.mode = std::move(mode);
  t.expected_run_id = std::move(expected);
  return t;
}

struct TurnPolicy : ::testing::Test {
  threads_config cfg = [] {
    threads_config c;
    c.max_pending_turns = 3;
    c.max_queued_runs = 2;
    return c;
  }();
  turn_policy policy{cfg};
};

TEST_F(TurnPolicy, ATurnWaitsWhileFewerThanTheLimitWait) {
  EXPECT_FALSE(policy.admit(0));
  EXPECT_FALSE(policy.admit(2));
}

TEST_F(TurnPolicy, ATurnIsRefused429WhenMaxPendingTurnsWait) {
  auto d = policy.admit(3);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->action, turn_action::refuse);
  EXPECT_EQ(d->refusal, turn_refusal::turns_full);
  auto r = refusal_result(*d, turn("steer"), "general");
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.error, "overload_rejected");
  EXPECT_EQ(r.message,
            "thread has 3 turns waiting (threads.max_pending_turns)");
  EXPECT_EQ(r.active_run_id, "");
}

TEST_F(TurnPolicy, EveryModeStartsARunWhenNoneIsActive) {
  for (auto mode : {"steer", "queue", "interrupt", "reject"}) {
    auto d = policy.decide(turn(mode), "", 0);
    EXPECT_EQ(d.action, turn_action::start) << mode;
    EXPECT_EQ(d.refusal, turn_refusal::none) << mode;
    EXPECT_EQ(d.active_run_id, "") << mode;
  }
}

TEST_F(TurnPolicy, ExpectingARunWhenNoneIsActiveIsRunChanged) {
  auto t = turn("steer", "r0");
  auto d = policy.decide(t, "", 0);
  EXPECT_EQ(d.action, turn_action::refuse);
  EXPECT_EQ(d.refusal, turn_refusal::run_changed);
  auto r = refusal_result(d, t, "health");
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.error, "run_changed");
  EXPECT_EQ(r.message, "expected run r0 but the thread has no active run "
                       "for butler 'health'");
  EXPECT_EQ(r.active_run_id, "");
}

TEST_F(TurnPolicy, ExpectingAnotherRunThanTheActiveOneIsRunChanged) {
  // Checked before the mode: even an interrupt must name the right run.
  for (auto mode : {"steer", "queue", "interrupt", "reject"}) {
    auto t = turn(mode, "r0");
    auto d = policy.decide(t, "r1", 0);
    EXPECT_EQ(d.refusal, turn_refusal::run_changed) << mode;
    auto r = refusal_result(d, t, "general");
    EXPECT_EQ(r.status, 409u);
    EXPECT_EQ(r.message, "expected run r0 but run r1 is active");
    EXPECT_EQ(r.active_run_id, "r1");
  }
}

TEST_F(TurnPolicy, SteerGoesIntoTheActiveRun) {
  auto d = policy.decide(turn("steer"), "r1", 0);
  EXPECT_EQ(d.action, turn_action::steer);
  EXPECT_EQ(d.active_run_id, "r1");
  EXPECT_EQ(stored_kind(d.action), "steer");
}

TEST_F(TurnPolicy, ExpectingTheActiveRunIsNoConflict) {
  auto d = policy.decide(turn("steer", "r1"), "r1", 0);
  EXPECT_EQ(d.action, turn_action::steer);
}

TEST_F(TurnPolicy, AnUnknownModeSteers) {
  EXPECT_EQ(turn_mode_of("sideways"), turn_mode::steer);
  EXPECT_EQ(policy.decide(turn("sideways"), "r1", 0).action,
            turn_action::steer);
}

TEST_F(TurnPolicy, RejectIsRefusedWhileARunIsActive) {
  auto t = turn("reject");
  auto d = policy.decide(t, "r1", 0);
  EXPECT_EQ(d.refusal, turn_refusal::run_active);
  auto r = refusal_result(d, t, "general");
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.error, "run_active");
  EXPECT_EQ(r.message, "run r1 is active (mode reject)");
  EXPECT_EQ(r.active_run_id, "r1");
}

TEST_F(TurnPolicy, QueueQueuesWhileTheQueueHasRoom) {
  auto d = policy.decide(turn("queue"), "r1", 1);
  EXPECT_EQ(d.action, turn_action::queue);
  EXPECT_EQ(d.active_run_id, "r1");
  EXPECT_EQ(stored_kind(d.action), "queued");
}

TEST_F(TurnPolicy, QueueIsRefused429WhenMaxQueuedRunsAreQueued) {
  auto t = turn("queue");
  auto d = policy.decide(t, "r1", 2);
  EXPECT_EQ(d.refusal, turn_refusal::queue_full);
  auto r = refusal_result(d, t, "general");
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.error, "overload_rejected");
  EXPECT_EQ(r.message, "thread has 2 queued runs (threads.max_queued_runs)");
  EXPECT_EQ(r.active_run_id, "r1");
}

TEST_F(TurnPolicy, InterruptReplacesTheActiveRunWithANewStart) {
  auto d = policy.decide(turn("interrupt"), "r1", 2);
  EXPECT_EQ(d.action, turn_action::interrupt);
  EXPECT_EQ(d.active_run_id, "r1");
  EXPECT_EQ(stored_kind(d.action), "start");
}

TEST_F(TurnPolicy, AStartIsStoredAsStart) {
  EXPECT_EQ(stored_kind(turn_action::start), "start");
}

TEST(TurnMode, ReadsEveryDocumentedName) {
  EXPECT_EQ(turn_mode_of("steer"), turn_mode::steer);
  EXPECT_EQ(turn_mode_of("queue"), turn_mode::queue);
  EXPECT_EQ(turn_mode_of("interrupt"), turn_mode::interrupt);
  EXPECT_EQ(turn_mode_of("reject"), turn_mode::reject);
}

TEST(TurnRefusal, ConflictsAre409AndFullLimits429) {
  EXPECT_EQ(status_of(turn_refusal::run_changed), 409u);
  EXPECT_EQ(status_of(turn_refusal::run_active), 409u);
  EXPECT_EQ(status_of(turn_refusal::turns_full), 429u);
  EXPECT_EQ(status_of(turn_refusal::queue_full), 429u);
}

// -- collect mode
// ---------------------------------------------------------------

struct CollectPolicy : TurnPolicy {
  turn_policy collecting = [this] {
    auto c = cfg;
    c.collect_ms = 500;
    return turn_policy{c};
  }();
};

TEST_F(CollectPolicy, OffByDefault) {
  EXPECT_FALSE(policy.collects());
  EXPECT_TRUE(collecting.collects());
  EXPECT_EQ(policy.decide(turn("steer"), "", 0, "r9").action,
            turn_action::start)
    << "without collect mode a window id changes nothing";
}

TEST_F(CollectPolicy, EveryModeIsCollectedWhenNoRunIsActive) {
  for (auto mode : {"steer", "queue", "interrupt", "reject"}) {
    auto first = collecting.decide(turn(mode), "", 0);
    EXPECT_EQ(first.action, turn_action::collect) << mode;
    EXPECT_EQ(first.active_run_id, "") << mode << ": opens a window";
    auto next = collecting.decide(turn(mode), "", 0, "r1");
    EXPECT_EQ(next.action, turn_action::collect) << mode;
    EXPECT_EQ(next.active_run_id, "r1") << mode << ": joins the window";
  }
  EXPECT_EQ(stored_kind(turn_action::collect), "collect");
}

TEST_F(CollectPolicy, TheModesApplyUnchangedWhileARunIsActive) {
  EXPECT_EQ(collecting.decide(turn("steer"), "r1", 0).action,
            turn_action::steer);
  EXPECT_EQ(collecting.decide(turn("queue"), "r1", 0).action,
            turn_action::queue);
  EXPECT_EQ(collecting.decide(turn("interrupt"), "r1", 0).action,
            turn_action::interrupt);
  EXPECT_EQ(collecting.decide(turn("reject"), "r1", 0).refusal,
            turn_refusal::run_active);
}

TEST_F(CollectPolicy, ExpectingTheCollectingRunJoinsItAnyOtherIsRunChanged) {
  EXPECT_EQ(collecting.decide(turn("steer", "r1"), "", 0, "r1").action,
            turn_action::collect);
  auto other = collecting.decide(turn("steer", "r0"), "", 0, "r1");
  EXPECT_EQ(other.refusal, turn_refusal::run_changed);
  EXPECT_EQ(other.active_run_id, "r1");
  auto none = collecting.decide(turn("steer", "r0"), "", 0);
  EXPECT_EQ(none.refusal, turn_refusal::run_changed);
  EXPECT_EQ(none.active_run_id, "");
}

} // namespace
} // namespace butlers
