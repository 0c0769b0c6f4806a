// The butler's session pool without an actor system: admission, the
// store-as-started rule, which item starts next, deadlines, and the leases
// it asks to renew.

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/session_pool.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

held_item item(const std::string& id, int32_t attempts = 0) {
  held_item h;
  h.item.work_id = id;
  h.item.butler = "health";
  h.item.lease_token = 7;
  h.item.attempts = attempts;
  h.since = clock_type::now();
  return h;
}

/// Takes the next item and starts it at `now`; returns whether the timer
/// must be armed.
bool start_next(session_pool& pool, clock_type::time_point now) {
  auto next = pool.next();
  EXPECT_TRUE(next.has_value());
  return pool.start(std::move(next->held), caf::actor{}, now);
}

std::vector<std::string> ids(const std::vector<work_item>& items) {
  std::vector<std::string> out;
  for (auto& i : items)
    out.push_back(i.work_id);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SessionPool, StartsNoMoreSessionsThanSlots) {
  session_pool pool{"health", 2, 10, 1s};
  for (auto id : {"a", "b", "c"})
    pool.enqueue(item(id));
  auto now = clock_type::now();
  start_next(pool, now);
  start_next(pool, now);
  EXPECT_FALSE(pool.next()) << "both slots busy";
  EXPECT_EQ(pool.active(), 2u);
  EXPECT_EQ(pool.queued(), 1u);
  ASSERT_TRUE(pool.finish("a", 7));
  auto next = pool.next();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->held.item.work_id, "c") << "first come, first started";
}

TEST(SessionPool, AFullPoolRejectsRetryably) {
  session_pool pool{"health", 1, 1, 1s};
  EXPECT_FALSE(pool.admit("route", ""));
  pool.begin_append();
  EXPECT_FALSE(pool.admit("route", "")) << "one slot, no queue used yet";
  pool.begin_append();
  auto full = pool.admit("route", "");
  ASSERT_TRUE(full);
  EXPECT_TRUE(full->retryable);
  EXPECT_NE(full->message.find("max_pending 1"), std::string::npos)
    << full->message;
}

TEST(SessionPool, ASelfTriggerWhileEverySlotIsBusyIsRejectedForGood) {
  session_pool pool{"health", 1, 100, 1s};
  pool.enqueue(item("a"));
  start_next(pool, clock_type::now());
  auto own = pool.admit("trigger", "health");
  ASSERT_TRUE(own);
  EXPECT_FALSE(own->retryable);
  EXPECT_NE(own->message.find("deadlock"), std::string::npos);
  EXPECT_FALSE(pool.admit("trigger", "finance")) << "other butlers queue";
  EXPECT_FALSE(pool.admit("route", "")) << "other sources queue";
}

TEST(SessionPool, ItemsAreStoredStartedWhileFewerThanTwiceTheSlotsAreAhead) {
  session_pool pool{"health", 2, 100, 1s};
  EXPECT_TRUE(pool.begin_append());
  EXPECT_TRUE(pool.begin_append());
  EXPECT_TRUE(pool.begin_append());
  EXPECT_TRUE(pool.begin_append()) << "three ahead of two slots";
  EXPECT_FALSE(pool.begin_append()) << "four ahead: a round away or more";
  EXPECT_EQ(pool.queued(), 5u);
  for (int i = 0; i < 5; ++i)
    pool.end_append();
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_TRUE(pool.begin_append());
}

TEST(SessionPool, AnItemStartedTooOftenIsAbandonedInsteadOfStarted) {
  session_pool pool{"health", 1, 10, 1s};
  pool.enqueue(item("crashy", session_pool::max_attempts));
  pool.enqueue(item("fine", session_pool::max_attempts - 1));
  auto first = pool.next();
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->abandon);
  auto second = pool.next();
  ASSERT_TRUE(second) << "an abandoned item takes no slot";
  EXPECT_FALSE(second->abandon);
}

TEST(SessionPool, RecoveryMayLeaseAsManyItemsAsSlotsAndQueueHaveRoomFor) {
  session_pool pool{"health", 2, 3, 1s};
  EXPECT_EQ(pool.room(), 5u);
  pool.enqueue(item("a"));
  pool.begin_append();
  EXPECT_EQ(pool.room(), 3u);
  for (auto id : {"b", "c", "d", "e"})
    pool.enqueue(item(id));
  EXPECT_EQ(pool.room(), 0u) << "never negative";
}

TEST(SessionPool, OneTimerServesSessionsStartedApart) {
  session_pool pool{"health", 3, 10, 2s};
  for (auto id : {"a", "b", "c"})
    pool.enqueue(item(id));
  auto t0 = clock_type::time_point{} + 1h;
  EXPECT_TRUE(start_next(pool, t0)) << "the first start arms the timer";
  EXPECT_FALSE(start_next(pool, t0 + 1s)) << "armed already, for earlier";
  EXPECT_FALSE(start_next(pool, t0 + 1500ms));
  auto due = pool.on_timeout(t0 + 2s);
  EXPECT_EQ(due.expired, std::vector<std::string>{"a"});
  ASSERT_TRUE(due.next);
  EXPECT_EQ(*due.next, clock_type::duration{1s}) << "b's deadline next";
  due = pool.on_timeout(t0 + 3s);
  // a has not ended yet (its session is on its way out), so it is
  // reported again with b; stopping a session twice is harmless.
  EXPECT_EQ(due.expired.size(), 2u);
  ASSERT_TRUE(due.next);
  EXPECT_EQ(*due.next, clock_type::duration{500ms});
}

TEST(SessionPool, NoTimerIsNeededOnceEverySessionEnded) {
  session_pool pool{"health", 1, 10, 1s};
  pool.enqueue(item("a"));
  auto t0 = clock_type::time_point{} + 1h;
  EXPECT_TRUE(start_next(pool, t0));
  pool.finish("a", 7);
  auto due = pool.on_timeout(t0 + 1s);
  EXPECT_TRUE(due.expired.empty());
  EXPECT_FALSE(due.next);
  pool.enqueue(item("b"));
  EXPECT_TRUE(start_next(pool, t0 + 2s)) << "the next start arms again";
}

TEST(SessionPool, FinishingItemsKeepTheirLeaseUntilTheResultIsWritten) {
  session_pool pool{"health", 1, 10, 1s};
  pool.enqueue(item("a"));
  pool.enqueue(item("b"));
  start_next(pool, clock_type::now());
  EXPECT_EQ(ids(pool.leases()), (std::vector<std::string>{"a", "b"}));
  auto ended = pool.finish("a", 9);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->held.item.work_id, "a");
  EXPECT_FALSE(pool.holds("a"));
  EXPECT_TRUE(pool.holds_lease("a"));
  auto leases = pool.leases();
  auto a = std::find_if(leases.begin(), leases.end(), [](const work_item& i) {
    return i.work_id == "a";
  });
  ASSERT_NE(a, leases.end());
  EXPECT_EQ(a->lease_token, 9) << "renewed under the session's token";
  EXPECT_EQ(a->butler, "health");
  pool.written("a");
  EXPECT_FALSE(pool.holds_lease("a"));
  EXPECT_EQ(ids(pool.leases()), std::vector<std::string>{"b"});
}

TEST(SessionPool, AWaitingItemCanBeFoundAndTakenOut) {
  session_pool pool{"health", 1, 10, 1s};
  pool.enqueue(item("a"));
  pool.enqueue(item("b"));
  start_next(pool, clock_type::now());
  EXPECT_NE(pool.running("a"), nullptr);
  EXPECT_EQ(pool.waiting("a"), nullptr);
  ASSERT_NE(pool.waiting("b"), nullptr);
  EXPECT_TRUE(pool.holds("b"));
  EXPECT_TRUE(pool.take_waiting("b"));
  EXPECT_FALSE(pool.holds("b"));
  EXPECT_FALSE(pool.take_waiting("b"));
  EXPECT_FALSE(pool.finish("b", 7)) << "never ran";
}

} // namespace
} // namespace butlers
