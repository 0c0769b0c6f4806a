// The collect window of a conversation thread (collect mode), on a clock
// the test moves: when it closes (quiet time after the last turn, the cap
// from the first, the turn cap, the byte cap) and what its run's input is.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/collect_window.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

collect_limits limits(uint32_t quiet_ms, uint32_t max_ms, uint32_t turns = 32) {
  threads_config cfg;
  cfg.collect_ms = quiet_ms;
  cfg.collect_max_ms = max_ms;
  cfg.collect_max_turns = turns;
  return collect_limits::of(cfg);
}

struct CollectWindow : ::testing::Test {
  collect_window::time_point t0 = collect_window::clock_type::now();
};

TEST_F(CollectWindow, ClosesTheQuietTimeAfterItsLastTurn) {
  collect_window w{"r1", "general", limits(500, 2000), "one", t0};
  EXPECT_EQ(w.deadline(), t0 + 500ms);
  EXPECT_FALSE(w.due(t0 + 499ms));
  w.add("two", t0 + 100ms);
  w.add("three", t0 + 200ms);
  EXPECT_EQ(w.deadline(), t0 + 700ms) << "each turn moves the deadline";
  EXPECT_FALSE(w.due(t0 + 699ms));
  EXPECT_TRUE(w.due(t0 + 700ms));
  EXPECT_EQ(w.turns(), 3u);
  EXPECT_EQ(w.run_id(), "r1");
  EXPECT_EQ(w.butler(), "general");
}

TEST_F(CollectWindow, ClosesAtTheCapFromItsFirstTurnHoweverManyTurnsCome) {
  collect_window w{"r1", "general", limits(500, 1200), "t0", t0};
  for (int i = 1; i <= 10; ++i) {
    auto now = t0 + i * 300ms;
    if (w.due(now))
      break;
    w.add("t" + std::to_string(i), now);
  }
  // Turns at 300, 600, 900 joined; at 1200 the window was due.
  EXPECT_EQ(w.turns(), 4u);
  EXPECT_EQ(w.deadline(), t0 + 1200ms);
  EXPECT_TRUE(w.due(t0 + 1200ms));
}

TEST_F(CollectWindow, ACapBelowTheQuietTimeIsRaisedToIt) {
  // Config validation refuses this; the limits still never close a window
  // before the quiet time.
  collect_window w{"r1", "general", limits(800, 100), "one", t0};
  EXPECT_EQ(w.deadline(), t0 + 800ms);
}

TEST_F(CollectWindow, IsDueAtOnceWhenFull) {
  collect_window w{"r1", "general", limits(500, 2000, 3), "one", t0};
  w.add("two", t0 + 10ms);
  EXPECT_FALSE(w.full());
  EXPECT_FALSE(w.due(t0 + 10ms));
  w.add("three", t0 + 20ms);
  EXPECT_TRUE(w.full());
  EXPECT_TRUE(w.due(t0 + 20ms));
}

TEST_F(CollectWindow, ATurnThatWouldPassTheByteCapDoesNotFit) {
  auto lim = limits(500, 2000);
  lim.max_bytes = 20;
  collect_window w{"r1", "general", lim, std::string(8, 'a'), t0};
  EXPECT_TRUE(w.fits(10)) << "8 + 2 (separator) + 10 = 20";
  EXPECT_FALSE(w.fits(11));
  w.add(std::string(10, 'b'), t0 + 1ms);
  EXPECT_FALSE(w.fits(0));
}

TEST_F(CollectWindow, TheInputIsEveryTurnInArrivalOrderSeparatedByABlankLine) {
  collect_window w{"r1", "general", limits(500, 2000), "book a table", t0};
  EXPECT_EQ(w.input(), "book a table") << "one turn is its text as it is";
  w.add("for four", t0 + 100ms);
  w.add("at eight\nplease", t0 + 200ms);
  EXPECT_EQ(w.input(), "book a table\n\nfor four\n\nat eight\nplease");
}

TEST(CollectedInput, FromTheStoredTextsAsAJsonArray) {
  EXPECT_EQ(collected_input_json(R"(["one","two","th\"ree"])"),
            std::string{"one\n\ntwo\n\nth\"ree"});
  EXPECT_EQ(collected_input_json(R"(["only"])"), std::string{"only"});
  EXPECT_EQ(collected_input_json("[]"), std::string{});
  EXPECT_EQ(collected_input_json("plain text"), std::nullopt);
  EXPECT_EQ(collected_input_json(R"(["a",1])"), std::nullopt);
  EXPECT_EQ(collected_input({"a", "", "b"}), "a\n\n\n\nb");
}

TEST(CollectLimits, OffUnlessCollectMsIsSet) {
  threads_config cfg;
  EXPECT_FALSE(collect_limits::of(cfg).on());
  cfg.collect_ms = 1;
  EXPECT_TRUE(collect_limits::of(cfg).on());
  EXPECT_EQ(collect_limits::of(cfg).max_open, 2000ms);
  EXPECT_EQ(collect_limits::of(cfg).max_turns, 32u);
}

} // namespace
} // namespace butlers
