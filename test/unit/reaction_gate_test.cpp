// The messenger's order of lifecycle reactions (runtime/reaction_gate.hpp)
// and its chat action ticker (runtime/typing_ticker.hpp): a reaction
// handed over after a higher one is dropped unsent, one handed over before
// a higher one goes out first, and "typing" repeats until stopped.

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/reaction_gate.hpp"
#include "runtime/typing_ticker.hpp"
#include "test/support/poll.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

int64_t rank_of(lifecycle_state x, int64_t at_us) {
  return reaction_rank(x, at_us);
}

TEST(ReactionGate, ReadsTheReactionOfAMessengerSegment) {
  auto x = reaction_of_segment("notify:react:parsed:1700000000000123");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->state, lifecycle_state::parsed);
  EXPECT_EQ(x->rank, rank_of(lifecycle_state::parsed, 1700000000000123));
  auto q = reaction_of_segment("notify:react:queued:5");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->rank, 5);
  EXPECT_FALSE(reaction_of_segment("notify:reply:abc"));
  EXPECT_FALSE(reaction_of_segment("notify:react:bogus:5"));
  EXPECT_FALSE(reaction_of_segment("notify:react:parsed:5x"));
  EXPECT_FALSE(reaction_of_segment("notify:react:parsed"));
}

TEST(ReactionGate, ALowerStateHandedOverAfterAHigherOneIsNeverSent) {
  reaction_gate gate;
  auto parsed = rank_of(lifecycle_state::parsed, 100);
  auto late = rank_of(lifecycle_state::progress, 200); // a late 👀
  EXPECT_TRUE(gate.announce("r", parsed));
  EXPECT_FALSE(gate.announce("r", late));
  ASSERT_TRUE(gate.begin("r", parsed));
  gate.end("r", parsed, true);
  EXPECT_FALSE(gate.begin("r", late));
  EXPECT_EQ(gate.overtaken(), 1u);
  // Another message is not concerned.
  EXPECT_TRUE(gate.announce("other", late));
  EXPECT_TRUE(gate.begin("other", late));
  gate.end("other", late, true);
}

TEST(ReactionGate, AnEarlierStateGoesOutBeforeALaterOneThatRanFirst) {
  reaction_gate gate;
  auto progress = rank_of(lifecycle_state::progress, 100);
  auto parsed = rank_of(lifecycle_state::parsed, 200);
  ASSERT_TRUE(gate.announce("r", progress));
  ASSERT_TRUE(gate.announce("r", parsed));
  std::mutex mtx;
  std::vector<int64_t> sent;
  // The terminal state's delivery may start first: it waits for 👀.
  std::thread later{[&] {
    ASSERT_TRUE(gate.begin("r", parsed));
    {
      std::lock_guard<std::mutex> guard{mtx};
      sent.push_back(parsed);
    }
    gate.end("r", parsed, true);
  }};
  ASSERT_TRUE(gate.begin("r", progress));
  {
    std::lock_guard<std::mutex> guard{mtx};
    sent.push_back(progress);
  }
  gate.end("r", progress, true);
  later.join();
  EXPECT_EQ(sent, (std::vector<int64_t>{progress, parsed}));
  EXPECT_EQ(gate.overtaken(), 0u);
}

TEST(ReactionGate, AStuckEarlierStateHoldsALaterOneOnlyForTheTurnWait) {
  reaction_gate gate{{16, 100ms}};
  auto progress = rank_of(lifecycle_state::progress, 100);
  auto parsed = rank_of(lifecycle_state::parsed, 200);
  ASSERT_TRUE(gate.announce("r", progress)); // its delivery never comes
  ASSERT_TRUE(gate.announce("r", parsed));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(gate.begin("r", parsed));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  gate.end("r", parsed, true);
  // Should it come after all, it is overtaken.
  EXPECT_FALSE(gate.begin("r", progress));
}

TEST(ReactionGate, AReactionNeverAnnouncedPassesUnlessOutranked) {
  reaction_gate gate;
  auto progress = rank_of(lifecycle_state::progress, 100);
  auto errored = rank_of(lifecycle_state::errored, 300);
  ASSERT_TRUE(gate.begin("r", errored)); // a run after a restart
  gate.end("r", errored, true);
  EXPECT_FALSE(gate.begin("r", progress));
  EXPECT_TRUE(gate.latest("r", errored));
  EXPECT_FALSE(gate.latest("r", progress));
  EXPECT_TRUE(gate.latest("unknown", progress));
}

TEST(ReactionGate, RemembersAtMostItsCapacity) {
  reaction_gate gate{{8, 100ms}};
  for (int i = 0; i < 100; ++i) {
    auto id = "r" + std::to_string(i);
    ASSERT_TRUE(gate.announce(id, 1));
    ASSERT_TRUE(gate.begin(id, 1));
    gate.end(id, 1, true);
    EXPECT_LE(gate.size(), 8u);
  }
  // Announced and never delivered: still bounded.
  for (int i = 0; i < 100; ++i)
    gate.announce("stuck" + std::to_string(i), 1);
  EXPECT_LE(gate.size(), 8u);
}

TEST(TypingTicker, RepeatsUntilStoppedAndCountsEachSend) {
  std::atomic<int> sends{0};
  std::atomic<int> counted{0};
  typing_ticker ticker{4, [&](const char* outcome) {
                         if (std::string{outcome} == "sent")
                           ++counted;
                       }};
  ASSERT_TRUE(ticker.start("r", 20ms, 10s, [&](const std::atomic<bool>&) {
    ++sends;
    return true;
  }));
  ASSERT_TRUE(test::eventually(
    [&] {
      return sends >= 3;
    },
    5s));
  ticker.stop("r");
  EXPECT_EQ(ticker.size(), 0u);
  auto after_stop = sends.load();
  // At most the send in flight at the stop follows it.
  ASSERT_TRUE(ticker.start("other", 20ms, 10s, [&](const std::atomic<bool>&) {
    return true;
  }));
  ASSERT_TRUE(test::eventually(
    [&] {
      return counted >= after_stop + 3;
    },
    5s));
  EXPECT_LE(sends.load(), after_stop + 1);
}

TEST(TypingTicker, EndsAfterItsLongestAndRefusesBeyondItsCapacity) {
  std::atomic<int> refused{0};
  typing_ticker ticker{1, [&](const char* outcome) {
                         if (std::string{outcome} == "refused")
                           ++refused;
                       }};
  auto ok = [](const std::atomic<bool>&) {
    return true;
  };
  ASSERT_TRUE(ticker.start("a", 10ms, 100ms, ok));
  EXPECT_FALSE(ticker.start("b", 10ms, 100ms, ok));
  EXPECT_EQ(refused.load(), 1);
  ASSERT_TRUE(test::eventually(
    [&] {
      return ticker.size() == 0;
    },
    5s));
  EXPECT_TRUE(ticker.start("b", 10ms, 100ms, ok));
}

} // namespace
} // namespace butlers
