#include <gtest/gtest.h>

#include "runtime/worker_queue.hpp"
#include "runtime/worker_wire.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// A queue with 3 deliveries, 1 s default visibility, and tokens t1, t2...
struct WorkerQueue : ::testing::Test {
  worker_queue q{worker_limits{3, 1000ms, 250ms, 10000ms}, [this] {
                   return "t" + std::to_string(++tokens);
                 }};
  int tokens = 0;
  clock::time_point t0 = clock::time_point{} + 1h;
};

TEST_F(WorkerQueue, HandsOutOldestFirstUnderFreshTokens) {
  q.add("a");
  q.add("b");
  q.add("c");
  auto got = q.take(2, 0ms, t0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].work_id, "a");
  EXPECT_EQ(got[1].work_id, "b");
  EXPECT_NE(got[0].lease_token, got[1].lease_token);
  EXPECT_EQ(got[0].attempt, 1u);
  EXPECT_EQ(q.in_flight(), 2u);
  EXPECT_EQ(q.ready(t0), 1u);
  EXPECT_EQ(q.take(5, 0ms, t0).size(), 1u);
  EXPECT_TRUE(q.take(5, 0ms, t0).empty());
}

TEST_F(WorkerQueue, AckNeedsTheCurrentToken) {
  q.add("a");
  auto got = q.take(1, 0ms, t0);
  EXPECT_EQ(q.ack("a", "wrong"), worker_check::stale);
  EXPECT_EQ(q.ack("nope", got[0].lease_token), worker_check::unknown);
  EXPECT_EQ(q.ack("a", got[0].lease_token), worker_check::ok);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.ack("a", got[0].lease_token), worker_check::unknown)
    << "a second ack finds nothing";
}

TEST_F(WorkerQueue, LapsedVisibilityRedeliversUnderANewToken) {
  q.add("a");
  auto first = q.take(1, 500ms, t0);
  ASSERT_EQ(q.next_deadline(t0), t0 + 500ms);
  EXPECT_TRUE(q.expire(t0 + 499ms).requeued.empty());
  auto ex = q.expire(t0 + 500ms);
  ASSERT_EQ(ex.requeued.size(), 1u);
  EXPECT_TRUE(ex.dead.empty());
  EXPECT_EQ(q.ack("a", first[0].lease_token), worker_check::stale)
    << "the old token is void once the visibility lapsed";
  auto second = q.take(1, 0ms, t0 + 500ms);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].lease_token, first[0].lease_token);
  EXPECT_EQ(second[0].attempt, 2u);
  EXPECT_EQ(q.ack("a", first[0].lease_token), worker_check::stale);
  EXPECT_EQ(q.ack("a", second[0].lease_token), worker_check::ok);
}

TEST_F(WorkerQueue, ExtendMovesTheDeadline) {
  q.add("a");
  auto got = q.take(1, 0ms, t0);
  EXPECT_EQ(q.extend("a", got[0].lease_token, 5000ms, t0 + 900ms),
            worker_check::ok);
  EXPECT_TRUE(q.expire(t0 + 5000ms).requeued.empty());
  EXPECT_EQ(q.ack("a", got[0].lease_token), worker_check::ok);
  q.add("b");
  auto b = q.take(1, 0ms, t0);
  EXPECT_EQ(q.extend("b", "other", 5000ms, t0), worker_check::stale);
}

TEST_F(WorkerQueue, VisibilityIsClamped) {
  EXPECT_EQ(q.clamp(0ms), 1000ms);
  EXPECT_EQ(q.clamp(1ms), 250ms);
  EXPECT_EQ(q.clamp(1h), 10000ms);
  q.add("a");
  q.take(1, 1ms, t0);
  EXPECT_EQ(q.next_deadline(t0), t0 + 250ms);
}

TEST_F(WorkerQueue, DeadLettersAfterMaxDeliveriesOfLapses) {
  q.add("a");
  auto now = t0;
  for (uint32_t i = 1; i <= 2; ++i) {
    auto got = q.take(1, 0ms, now);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].attempt, i);
    now += 1000ms;
    EXPECT_EQ(q.expire(now).requeued.size(), 1u);
  }
  q.take(1, 0ms, now);
  now += 1000ms;
  auto ex = q.expire(now);
  EXPECT_TRUE(ex.requeued.empty());
  ASSERT_EQ(ex.dead.size(), 1u);
  EXPECT_EQ(ex.dead[0].work_id, "a");
  EXPECT_EQ(ex.dead[0].error_class, "timeout");
  EXPECT_EQ(ex.dead[0].deliveries, 3u);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.next_deadline(now));
}

TEST_F(WorkerQueue, RetryableNacksWaitTheirDelayThenDeadLetter) {
  q.add("a");
  auto now = t0;
  auto got = q.take(1, 0ms, now);
  auto r = q.nack("a", got[0].lease_token, true, 300ms, "internal_error",
                  "boom", now);
  EXPECT_EQ(r.check, worker_check::ok);
  EXPECT_TRUE(r.requeued);
  EXPECT_TRUE(q.take(1, 0ms, now + 299ms).empty()) << "held back";
  EXPECT_EQ(q.next_deadline(now), now + 300ms);
  got = q.take(1, 0ms, now + 300ms);
  ASSERT_EQ(got.size(), 1u);
  r = q.nack("a", got[0].lease_token, true, 0ms, "internal_error", "boom", now);
  EXPECT_TRUE(r.requeued);
  got = q.take(1, 0ms, now + 300ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempt, 3u);
  r = q.nack("a", got[0].lease_token, true, 0ms, "routing_error", "last", now);
  EXPECT_FALSE(r.requeued);
  ASSERT_TRUE(r.dead);
  EXPECT_EQ(r.dead->error_class, "routing_error");
  EXPECT_EQ(r.dead->message, "last");
  EXPECT_EQ(r.dead->deliveries, 3u);
  EXPECT_EQ(q.size(), 0u);
}

TEST_F(WorkerQueue, AFinalNackFailsWithoutRedelivery) {
  q.add("a");
  auto got = q.take(1, 0ms, t0);
  EXPECT_EQ(q.nack("a", "old", false, 0ms, "x", "y", t0).check,
            worker_check::stale);
  auto r = q.nack("a", got[0].lease_token, false, 0ms, "validation_error",
                  "bad", t0);
  EXPECT_TRUE(r.failed);
  EXPECT_FALSE(r.dead);
  EXPECT_EQ(q.size(), 0u);
}

TEST_F(WorkerQueue, RemovedItemsAreNotHandedOut) {
  q.add("a");
  q.add("b");
  q.remove("a");
  auto got = q.take(5, 0ms, t0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].work_id, "b");
  q.remove("b");
  EXPECT_TRUE(q.expire(t0 + 1h).requeued.empty());
  EXPECT_FALSE(q.contains("b"));
}

// -- request bodies -----------------------------------------------------------

TEST(WorkerWire, RecvBodyDefaultsAndRanges) {
  worker_call c;
  EXPECT_EQ(parse_worker_body(worker_op::recv, "", c), "");
  EXPECT_EQ(c.max, 1u);
  EXPECT_EQ(c.wait_ms, 0u);
  EXPECT_EQ(parse_worker_body(worker_op::recv,
                              R"({"max":4,"visibility_ms":1000,"wait_ms":50})",
                              c),
            "");
  EXPECT_EQ(c.max, 4u);
  EXPECT_EQ(c.visibility_ms, 1000u);
  EXPECT_EQ(c.wait_ms, 50u);
  worker_call d;
  EXPECT_NE(parse_worker_body(worker_op::recv, R"({"max":0})", d).find("'max'"),
            std::string::npos);
  EXPECT_NE(parse_worker_body(worker_op::recv, R"({"visibility_ms":10})", d)
              .find("'visibility_ms'"),
            std::string::npos);
  EXPECT_NE(parse_worker_body(worker_op::recv, R"({"wait_ms":"5"})", d)
              .find("'wait_ms'"),
            std::string::npos);
  EXPECT_NE(parse_worker_body(worker_op::recv, R"({"mux":1})", d)
              .find("unknown field 'mux'"),
            std::string::npos);
  EXPECT_NE(parse_worker_body(worker_op::recv, "[", d).find("not valid JSON"),
            std::string::npos);
}

TEST(WorkerWire, AckNackAndExtendBodies) {
  worker_call c;
  EXPECT_NE(parse_worker_body(worker_op::ack, R"({"reply":"hi"})", c)
              .find("'lease_token'"),
            std::string::npos);
  worker_call a;
  EXPECT_EQ(parse_worker_body(worker_op::ack,
                              R"({"lease_token":"t","reply":"hi"})", a),
            "");
  EXPECT_EQ(a.reply, "hi");
  worker_call none;
  EXPECT_NE(parse_worker_body(worker_op::ack, R"({"lease_token":"t"})", none)
              .find("exactly one"),
            std::string::npos);
  worker_call bad;
  EXPECT_NE(parse_worker_body(worker_op::ack,
                              R"({"lease_token":"t","response":{"x":1}})", bad)
              .find("field 'response'"),
            std::string::npos);
  worker_call n;
  EXPECT_EQ(
    parse_worker_body(
      worker_op::nack,
      R"({"lease_token":"t","retryable":false,"delay_ms":5,"error":"e"})", n),
    "");
  EXPECT_FALSE(n.retryable);
  EXPECT_EQ(n.delay_ms, 5u);
  EXPECT_EQ(n.error_class, "internal_error");
  worker_call nc;
  EXPECT_NE(parse_worker_body(worker_op::nack,
                              R"({"lease_token":"t","error_class":"oops"})", nc)
              .find("'error_class'"),
            std::string::npos);
  worker_call e;
  EXPECT_EQ(parse_worker_body(worker_op::extend,
                              R"({"lease_token":"t","visibility_ms":900})", e),
            "");
  EXPECT_EQ(e.visibility_ms, 900u);
  worker_op op;
  EXPECT_TRUE(parse_worker_verb("nack", op));
  EXPECT_EQ(op, worker_op::nack);
  EXPECT_FALSE(parse_worker_verb("cancel", op));
}

TEST(WorkerWire, RendersDeliveries) {
  worker_delivery d;
  d.work_id = "w";
  d.lease_token = "t";
  d.envelope = R"({"a":1})";
  d.attempt = 2;
  d.visible_until_ms = 7;
  d.steer_inputs.push_back(steer_input{"m1", "more", 5, 0, 0});
  EXPECT_EQ(render_deliveries({d}),
            R"({"items":[{"work_id":"w","lease_token":"t","envelope":{"a":1},)"
            R"("attempt":2,"visible_until_ms":7,"steer_inputs":[{"message_id":)"
            R"("m1","text":"more","accepted_us":5}]}]})");
  EXPECT_EQ(render_deliveries({}), R"({"items":[]})");
}

} // namespace
} // namespace butlers
