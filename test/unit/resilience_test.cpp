// Backoff and the circuit breaker of spec 001 §10.3.

#include <gtest/gtest.h>

#include "runtime/resilience.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, FullJitterStaysUnderTheGrowingCeiling) {
  std::mt19937_64 rng{7};
  for (uint32_t attempt = 1; attempt <= 12; ++attempt) {
    auto ceiling = std::min<int64_t>(30000, 500 * (int64_t{1} << attempt));
    int64_t max_seen = 0;
    for (int i = 0; i < 200; ++i) {
      auto d = backoff_delay(attempt, 500ms, 30000ms, rng).count();
      EXPECT_GE(d, 0);
      EXPECT_LE(d, ceiling);
      max_seen = std::max(max_seen, d);
    }
    // 200 uniform draws land in the top half of [0, ceiling] almost surely.
    EXPECT_GT(max_seen, ceiling / 2) << attempt;
  }
  EXPECT_EQ(backoff_delay(3, 0ms, 100ms, rng).count(), 0);
}

TEST(CircuitBreaker, OpensAfterConsecutiveFailuresAndProbesWhenHalfOpen) {
  circuit_breaker cb{3, 1000ms};
  auto t = circuit_breaker::clock::now();
  circuit_breaker::state from, to;
  EXPECT_TRUE(cb.allow(t));
  cb.on_failure(t);
  cb.on_failure(t);
  cb.on_success(); // resets the count
  cb.on_failure(t);
  cb.on_failure(t);
  EXPECT_EQ(cb.current(), circuit_breaker::state::closed);
  EXPECT_FALSE(cb.take_transition(from, to));
  cb.on_failure(t);
  EXPECT_EQ(cb.current(), circuit_breaker::state::open);
  ASSERT_TRUE(cb.take_transition(from, to));
  EXPECT_EQ(from, circuit_breaker::state::closed);
  EXPECT_EQ(to, circuit_breaker::state::open);
  EXPECT_FALSE(cb.allow(t + 999ms)) << "open: fail fast";
  EXPECT_TRUE(cb.allow(t + 1000ms)) << "one probe after the pause";
  EXPECT_EQ(cb.current(), circuit_breaker::state::half_open);
  EXPECT_FALSE(cb.allow(t + 1001ms)) << "only one probe at a time";
  cb.on_failure(t + 1100ms);
  EXPECT_EQ(cb.current(), circuit_breaker::state::open);
  EXPECT_FALSE(cb.allow(t + 1500ms));
  EXPECT_TRUE(cb.allow(t + 2100ms));
  cb.on_success();
  EXPECT_EQ(cb.current(), circuit_breaker::state::closed);
  ASSERT_TRUE(cb.take_transition(from, to));
  EXPECT_EQ(to, circuit_breaker::state::closed);
  EXPECT_TRUE(cb.allow(t + 2101ms));
}

TEST(CircuitBreaker, AProbeWhoseOutcomeNeverComesDoesNotBlockForever) {
  circuit_breaker cb{1, 1000ms};
  auto t = circuit_breaker::clock::now();
  cb.on_failure(t);
  EXPECT_TRUE(cb.allow(t + 1000ms)) << "the probe";
  // Its request was abandoned: no on_success / on_failure arrives.
  EXPECT_FALSE(cb.allow(t + 1500ms));
  EXPECT_TRUE(cb.allow(t + 2000ms)) << "another probe after a pause";
  cb.on_success();
  EXPECT_EQ(cb.current(), circuit_breaker::state::closed);
}

TEST(CircuitBreaker, HeldOpenWhileTheTargetHasNoLiveHost) {
  circuit_breaker cb{3, 1000ms};
  auto t = circuit_breaker::clock::now();
  circuit_breaker::state from, to;
  cb.hold_open(t);
  EXPECT_TRUE(cb.held());
  ASSERT_TRUE(cb.take_transition(from, to));
  EXPECT_EQ(to, circuit_breaker::state::open);
  EXPECT_FALSE(cb.allow(t + 1h)) << "no half-open probes while held";
  cb.on_success(); // a late answer from the lost host
  EXPECT_EQ(cb.current(), circuit_breaker::state::open);
  cb.release();
  EXPECT_FALSE(cb.held());
  EXPECT_EQ(cb.current(), circuit_breaker::state::closed);
  ASSERT_TRUE(cb.take_transition(from, to));
  EXPECT_EQ(to, circuit_breaker::state::closed);
  EXPECT_TRUE(cb.allow(t + 1h));
  cb.release(); // not held: nothing happens
  EXPECT_FALSE(cb.take_transition(from, to));
}

} // namespace
} // namespace butlers
