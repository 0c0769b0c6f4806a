#include <gtest/gtest.h>

#include "runtime/hot_queue.hpp"

using namespace butlers;

namespace {

inbox_ref ref(const std::string& id) {
  return inbox_ref{id, 1};
}

std::vector<std::string> ids(const std::vector<queued_request>& qs) {
  std::vector<std::string> out;
  for (auto& q : qs)
    out.push_back(q.ref.request_id);
  return out;
}

} // namespace

TEST(HotQueue, TakesInArrivalOrderUpToTheWorkersAsked) {
  hot_queue q{10};
  for (auto id : {"a", "b", "c"})
    EXPECT_TRUE(q.offer(ref(id)));
  EXPECT_EQ(ids(q.take(2)), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(q.active(), 2u);
  EXPECT_EQ(q.size(), 1u);
}

TEST(HotQueue, RefusesBeyondItsCapacity) {
  hot_queue q{2};
  EXPECT_TRUE(q.offer(ref("a")));
  EXPECT_TRUE(q.offer(ref("b")));
  EXPECT_FALSE(q.offer(ref("c")));
}

TEST(HotQueue, ARequestHeldAlreadyCountsAsTakenAndIsNotQueuedTwice) {
  hot_queue q{10};
  EXPECT_TRUE(q.offer(ref("a"), "t1"));
  EXPECT_TRUE(q.offer(ref("a"), "t1"));
  EXPECT_EQ(q.size(), 1u);
  q.take(1);
  EXPECT_TRUE(q.holds("a"));
  EXPECT_TRUE(q.offer(ref("a"), "t1"));
  EXPECT_EQ(q.size(), 0u);
}

TEST(HotQueue, TheSameSourceThreadWaitsInPlaceWhileOthersGoAhead) {
  hot_queue q{10};
  q.offer(ref("a1"), "thread-a");
  q.offer(ref("a2"), "thread-a");
  q.offer(ref("b1"), "thread-b");
  EXPECT_EQ(ids(q.take(3)), (std::vector<std::string>{"a1", "b1"}));
  // a2 waits for a1, also while a1's claim and plan commit.
  EXPECT_TRUE(q.free_worker("a1"));
  EXPECT_TRUE(q.take(3).empty());
  q.done("a1");
  EXPECT_EQ(ids(q.take(3)), (std::vector<std::string>{"a2"}));
}

TEST(HotQueue, AFreedWorkerCountsAsCommittingUntilDone) {
  hot_queue q{10};
  q.offer(ref("a"));
  q.take(1);
  EXPECT_TRUE(q.free_worker("a"));
  EXPECT_FALSE(q.free_worker("a"));
  EXPECT_EQ(q.active(), 0u);
  EXPECT_EQ(q.committing(), 1u);
  q.done("a");
  EXPECT_EQ(q.committing(), 0u);
  EXPECT_EQ(q.active(), 0u);
  EXPECT_FALSE(q.holds("a"));
}

TEST(HotQueue, OrderKeysNameChannelEndpointAndThread) {
  request_context ctx;
  EXPECT_EQ(order_key_of(ctx), "");
  ctx.source_channel = "telegram";
  ctx.source_endpoint_identity = "bot";
  ctx.source_thread_identity = "42";
  EXPECT_EQ(order_key_of(ctx), "telegram\x1f"
                               "bot\x1f"
                               "42");
}
