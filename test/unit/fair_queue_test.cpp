#include <gtest/gtest.h>

#include "runtime/fair_queue.hpp"
#include "runtime/hot_queue.hpp"
#include "runtime/metrics.hpp"

using namespace butlers;

namespace {

/// A request of `sender` on `channel` in `tier`, named `id`.
std::shared_ptr<const inbox_record> from(const std::string& channel,
                                         const std::string& sender,
                                         const std::string& tier = "default") {
  auto r = std::make_shared<inbox_record>();
  r->context.source_channel = channel;
  r->context.source_sender_identity = sender;
  r->policy_tier = tier;
  return r;
}

std::vector<std::string> ids(const std::vector<queued_request>& qs) {
  std::vector<std::string> out;
  for (auto& q : qs)
    out.push_back(q.ref.request_id);
  return out;
}

using strings = std::vector<std::string>;

/// Offers `id` from `rec` to `q`.
bool put(hot_queue& q, const std::string& id,
         std::shared_ptr<const inbox_record> rec, std::string thread = {}) {
  return q.offer(inbox_ref{id, 1}, std::move(thread), std::move(rec));
}

} // namespace

TEST(FairQueue, OffIsOneFifoWhateverTheSource) {
  hot_queue q{10, fairness_mode::off};
  put(q, "a1", from("api", "a"));
  put(q, "a2", from("api", "a"));
  put(q, "b1", from("api", "b", "interactive"));
  EXPECT_EQ(q.sources(), 1u);
  EXPECT_EQ(ids(q.take(3)), (strings{"a1", "a2", "b1"}));
}

TEST(FairQueue, SendersTakeTurnsOldestFirst) {
  hot_queue q{20, fairness_mode::sender};
  for (auto id : {"a1", "a2", "a3", "a4"})
    put(q, id, from("api", "a"));
  put(q, "b1", from("api", "b"));
  put(q, "b2", from("api", "b"));
  put(q, "c1", from("telegram", "a"));
  EXPECT_EQ(q.sources(), 3u);
  EXPECT_EQ(ids(q.take(3)), (strings{"a1", "b1", "c1"}));
  // The round goes on where it stopped, and sources that ran dry leave it.
  EXPECT_EQ(ids(q.take(10)), (strings{"a2", "b2", "a3", "a4"}));
  EXPECT_EQ(q.sources(), 0u);
}

TEST(FairQueue, ChannelModeSharesOneTurnAmongTheSendersOfAChannel) {
  hot_queue q{20, fairness_mode::channel};
  put(q, "a1", from("api", "a"));
  put(q, "b1", from("api", "b"));
  put(q, "a2", from("api", "a"));
  put(q, "t1", from("telegram", "x"));
  EXPECT_EQ(q.sources(), 2u);
  EXPECT_EQ(ids(q.take(4)), (strings{"a1", "t1", "b1", "a2"}));
}

TEST(FairQueue, PolicyTiersKeepTheirPriority) {
  hot_queue q{20, fairness_mode::sender};
  put(q, "d1", from("api", "a"));
  put(q, "d2", from("api", "b"));
  put(q, "i1", from("api", "a", "interactive"));
  put(q, "h1", from("api", "c", "high_priority"));
  put(q, "i2", from("api", "a", "interactive"));
  put(q, "i3", from("api", "b", "interactive"));
  // Higher tiers first; fair among the sources within a tier.
  EXPECT_EQ(ids(q.take(10)), (strings{"h1", "i1", "i3", "i2", "d1", "d2"}));
}

TEST(FairQueue, ABlockedSourceThreadPassesTheTurnOn) {
  hot_queue q{20, fairness_mode::sender};
  put(q, "a1", from("api", "a"), "thread-a");
  put(q, "a2", from("api", "a"), "thread-a");
  put(q, "a3", from("api", "a"), "thread-a2");
  put(q, "b1", from("api", "b"), "thread-b");
  EXPECT_EQ(ids(q.take(2)), (strings{"a1", "b1"}));
  // a2 waits in place for a1; a3 of the same sender is not held up by it.
  EXPECT_EQ(ids(q.take(5)), (strings{"a3"}));
  q.done("a1");
  EXPECT_EQ(ids(q.take(5)), (strings{"a2"}));
}

TEST(FairQueue, AFullQueueShedsTheLargestSourcesNewest) {
  metrics_registry m;
  fair_queue_metrics fm;
  fm.shed = &m.get_counter("shed", "shed");
  fm.total_full = &m.get_counter("total", "total");
  fm.sources = &m.get_gauge("sources", "sources");
  hot_queue q{4, fairness_mode::sender, 0, fm};
  for (auto id : {"a1", "a2", "a3", "a4"})
    EXPECT_TRUE(put(q, id, from("api", "a")));
  // A is the largest source: its own fifth is refused (stored, the cold
  // path offers it again).
  EXPECT_FALSE(put(q, "a5", from("api", "a")));
  EXPECT_EQ(fm.total_full->value(), 1u);
  // B holds nothing: A's newest makes room, and is no longer held here.
  EXPECT_TRUE(put(q, "b1", from("api", "b")));
  EXPECT_EQ(q.take_shed(), 1u);
  EXPECT_EQ(q.take_shed(), 0u);
  EXPECT_FALSE(q.holds("a4"));
  EXPECT_EQ(fm.shed->value(), 1u);
  EXPECT_TRUE(put(q, "b2", from("api", "b")));
  // Now A (2) and B (2) are even: B's third may not shed A's.
  EXPECT_FALSE(put(q, "b3", from("api", "b")));
  EXPECT_EQ(fm.total_full->value(), 2u);
  EXPECT_EQ(fm.sources->value(), 2);
  EXPECT_EQ(ids(q.take(10)), (strings{"a1", "b1", "a2", "b2"}));
}

TEST(FairQueue, AHigherTierShedsALowerOneEvenFromASmallSource) {
  hot_queue q{2, fairness_mode::sender};
  put(q, "a1", from("api", "a"));
  put(q, "b1", from("api", "b"));
  EXPECT_TRUE(put(q, "i1", from("api", "c", "interactive")));
  EXPECT_EQ(q.take_shed(), 1u);
  // A lower tier never sheds a higher one.
  EXPECT_TRUE(put(q, "i2", from("api", "d", "interactive")));
  EXPECT_FALSE(put(q, "d9", from("api", "e")));
  EXPECT_EQ(ids(q.take(10)), (strings{"i1", "i2"}));
}

TEST(FairQueue, ASourceOverItsShareIsRefused) {
  metrics_registry m;
  fair_queue_metrics fm;
  fm.source_full = &m.get_counter("source_full", "source_full");
  hot_queue q{10, fairness_mode::sender, 2, fm};
  EXPECT_TRUE(put(q, "a1", from("api", "a")));
  EXPECT_TRUE(put(q, "a2", from("api", "a")));
  EXPECT_FALSE(put(q, "a3", from("api", "a")));
  EXPECT_TRUE(put(q, "b1", from("api", "b")));
  EXPECT_EQ(fm.source_full->value(), 1u);
  // Its share frees as it is served.
  q.take(1);
  EXPECT_TRUE(put(q, "a3", from("api", "a")));
}

TEST(FairQueue, WithoutARecordARequestIsOfTheUnnamedSource) {
  hot_queue q{10, fairness_mode::sender};
  EXPECT_TRUE(q.offer(inbox_ref{"r1", 1}));
  put(q, "a1", from("api", "a"));
  EXPECT_TRUE(q.offer(inbox_ref{"r2", 1}));
  EXPECT_EQ(q.sources(), 2u);
  EXPECT_EQ(ids(q.take(3)), (strings{"r1", "a1", "r2"}));
}

TEST(FairQueue, TierRanks) {
  EXPECT_EQ(tier_rank("high_priority"), 0);
  EXPECT_EQ(tier_rank("interactive"), 1);
  EXPECT_EQ(tier_rank("default"), 2);
  EXPECT_EQ(tier_rank(""), 2);
}
