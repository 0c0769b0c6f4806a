// Fanout modes, skips and verdicts (spec 001 §15.4, §15.5).

#include <gtest/gtest.h>

#include "runtime/fanout.hpp"

namespace butlers {
namespace {

fanout make(const std::string& mode, int n) {
  fanout f;
  f.mode = mode;
  for (int i = 0; i < n; ++i) {
    fanout_segment s;
    s.segment_id = "seg-" + std::to_string(i + 1);
    s.butler = "b" + std::to_string(i + 1);
    s.ordinal = i;
    f.segments.push_back(s);
  }
  return f;
}

void finish(fanout& f, size_t i, const std::string& state,
            const std::string& cls = {}) {
  f.segments[i].state = state;
  f.segments[i].error_class = cls;
  f.segments[i].error_message = state == "error" ? "boom" : "";
  f.settle(i);
}

TEST(Fanout, ParallelDispatchesEverythingAtOnce) {
  auto f = make("parallel", 3);
  EXPECT_EQ(f.ready(), (std::vector<size_t>{0, 1, 2}));
  for (auto& s : f.segments)
    s.state = "dispatched";
  EXPECT_TRUE(f.ready().empty());
  finish(f, 1, "error", "timeout");
  finish(f, 0, "ok");
  EXPECT_FALSE(f.done());
  finish(f, 2, "ok");
  EXPECT_TRUE(f.done());
  auto v = f.verdict();
  EXPECT_EQ(v.state, "errored");
  EXPECT_EQ(v.error_class, "timeout");
  EXPECT_NE(v.error_message.find("b2"), std::string::npos);
  EXPECT_STREQ(f.abort_policy(), "continue");
}

TEST(Fanout, OrderedRunsEachAfterThePreviousCompletes) {
  auto f = make("ordered", 3);
  EXPECT_EQ(f.ready(), (std::vector<size_t>{0}));
  f.segments[0].state = "dispatched";
  EXPECT_TRUE(f.ready().empty()) << "the first is still running";
  finish(f, 0, "error", "target_unavailable");
  EXPECT_EQ(f.ready(), (std::vector<size_t>{1})) << "ordered continues";
  finish(f, 1, "ok");
  finish(f, 2, "ok");
  EXPECT_EQ(f.verdict().state, "errored");
}

TEST(Fanout, ConditionalSkipsEverythingAfterAFailure) {
  auto f = make("conditional", 3);
  finish(f, 0, "ok");
  EXPECT_EQ(f.ready(), (std::vector<size_t>{1}));
  f.segments[1].state = "error";
  f.segments[1].error_class = "validation_error";
  auto skipped = f.settle(1);
  EXPECT_EQ(skipped, (std::vector<size_t>{2}));
  EXPECT_EQ(f.segments[2].state, "skipped");
  EXPECT_NE(f.segments[2].error_message.find("seg-2"), std::string::npos);
  EXPECT_TRUE(f.done());
  EXPECT_EQ(f.verdict().error_class, "validation_error");
  EXPECT_STREQ(f.abort_policy(), "skip_dependents");
}

TEST(Fanout, AllSuccessfulIsParsed) {
  auto f = make("conditional", 2);
  finish(f, 0, "ok");
  finish(f, 1, "ok");
  EXPECT_EQ(f.verdict().state, "parsed");
}

TEST(Fanout, FirstDispatchesAreWhatStartsEachMode) {
  EXPECT_EQ(make("parallel", 3).first_dispatches(),
            (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(make("ordered", 3).first_dispatches(), (std::vector<size_t>{0}));
  EXPECT_EQ(make("conditional", 3).first_dispatches(),
            (std::vector<size_t>{0}));
  // Asking changes nothing.
  auto f = make("parallel", 2);
  f.first_dispatches();
  EXPECT_EQ(f.ready(), (std::vector<size_t>{0, 1}));
}

TEST(Fanout, AttemptSuffixesRoundTrip) {
  EXPECT_EQ(attempt_segment_id("seg-1", 1), "seg-1");
  EXPECT_EQ(attempt_segment_id("seg-1", 3), "seg-1:a3");
  EXPECT_EQ(split_attempt("seg-1:a3"),
            (std::pair<std::string, uint32_t>{"seg-1", 3}));
  EXPECT_EQ(split_attempt("seg-1"),
            (std::pair<std::string, uint32_t>{"seg-1", 1}));
  EXPECT_EQ(split_attempt("seg:abc"),
            (std::pair<std::string, uint32_t>{"seg:abc", 1}));
}

} // namespace
} // namespace butlers
