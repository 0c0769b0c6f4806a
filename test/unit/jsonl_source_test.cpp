// The jsonl connector's source against an in-memory sink: replay, the
// checkpoint after each commit, resuming, invalid and too-long lines,
// retries, appended lines, truncation and a missing file.

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/jsonl_source.hpp"
#include "test/support/fake_connector_sink.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using test::fake_connector_sink;

/// A line of the file (the sink does not parse envelopes; a real one
/// would).
std::string line(int i) {
  return R"({"n":)" + std::to_string(i) + "}";
}

class JsonlSource : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmpl = (std::filesystem::temp_directory_path() / "jsonl-XXXXXX")
                  .string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/in.jsonl";
  }

  void TearDown() override {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void append(const std::string& text) {
    std::ofstream out{path_, std::ios::app | std::ios::binary};
    out << text;
  }

  /// Appends lines first..last, each with its newline.
  void append_lines(int first, int last) {
    std::string text;
    for (int i = first; i <= last; ++i)
      text += line(i) + "\n";
    append(text);
  }

  uint64_t size() const {
    return std::filesystem::file_size(path_);
  }

  jsonl_source::options opts(size_t batch = 8) const {
    jsonl_source::options o;
    o.name = "replay";
    o.path = path_;
    o.poll = 10ms;
    o.batch = batch;
    o.backoff = 5ms;
    o.max_backoff = 20ms;
    return o;
  }

  void start(jsonl_source::options o) {
    source_ = std::make_unique<jsonl_source>(std::move(o));
    thread_ = std::thread{[this] {
      source_->run(sink_);
    }};
  }

  void stop() {
    sink_.stop().raise();
    if (thread_.joinable())
      thread_.join();
  }

  bool submitted(size_t n) {
    return sink_.wait(
      [&] {
        return sink_.submitted().size() >= n;
      },
      10s);
  }

  bool checkpoint_is(uint64_t line_no, uint64_t offset) {
    auto want = jsonl_position{line_no, offset}.to_json();
    return sink_.wait(
      [&] {
        return sink_.checkpoint(path_) == want;
      },
      10s);
  }

  std::string dir_;
  std::string path_;
  fake_connector_sink sink_;
  std::unique_ptr<jsonl_source> source_;
  std::thread thread_;
};

TEST_F(JsonlSource, ReplaysEveryLineInOrderAndCheckpointsAfterTheCommits) {
  append_lines(1, 5);
  start(opts());
  ASSERT_TRUE(submitted(5));
  ASSERT_TRUE(checkpoint_is(5, size()));
  std::vector<std::string> want;
  for (int i = 1; i <= 5; ++i)
    want.push_back(line(i));
  EXPECT_EQ(sink_.envelopes(), want);
}

TEST_F(JsonlSource, SubmitsAtMostMaxInFlightLinesAtOnce) {
  append_lines(1, 7);
  start(opts(3));
  ASSERT_TRUE(checkpoint_is(7, size()));
  EXPECT_EQ(sink_.batch_sizes(), (std::vector<size_t>{3, 3, 1}));
  EXPECT_EQ(sink_.stores().size(), 3u) << "one checkpoint per commit";
}

TEST_F(JsonlSource, ResumesAfterTheStoredCheckpoint) {
  append_lines(1, 2);
  auto after_two = size();
  append_lines(3, 4);
  sink_.set_checkpoint(path_, jsonl_position{2, after_two}.to_json());
  start(opts());
  ASSERT_TRUE(checkpoint_is(4, size()));
  EXPECT_EQ(sink_.envelopes(), (std::vector<std::string>{line(3), line(4)}));
}

TEST_F(JsonlSource, GivesEachLineAnIdentityOfItsOffsetAndContent) {
  append_lines(1, 2);
  start(opts());
  ASSERT_TRUE(submitted(2));
  auto s = sink_.submitted();
  EXPECT_EQ(s[0].dedupe_hint.rfind("L0:", 0), 0u) << s[0].dedupe_hint;
  auto second = "L" + std::to_string(line(1).size() + 1) + ":";
  EXPECT_EQ(s[1].dedupe_hint.rfind(second, 0), 0u) << s[1].dedupe_hint;
  EXPECT_NE(s[0].dedupe_hint, s[1].dedupe_hint);
}

TEST_F(JsonlSource, AnInvalidLineIsSkippedOnceAndNeverRetried) {
  append(line(1) + "\nnot an envelope\n" + line(3) + "\n");
  sink_.decide([](const submission& s, size_t) {
    std::optional<submit_outcome> o;
    if (s.envelope == "not an envelope")
      o = submit_outcome{submit_status::invalid, {}, "not JSON"};
    return o;
  });
  start(opts(1));
  ASSERT_TRUE(checkpoint_is(3, size()));
  EXPECT_EQ(sink_.envelopes(),
            (std::vector<std::string>{line(1), "not an envelope", line(3)}));
}

TEST_F(JsonlSource, ALineOverTheLimitIsDroppedAsInvalidUnread) {
  append(line(1) + "\n" + std::string(100, 'x') + "\n" + line(3) + "\n");
  auto o = opts();
  o.max_line_bytes = 50;
  start(o);
  ASSERT_TRUE(checkpoint_is(3, size()));
  EXPECT_EQ(sink_.envelopes(), (std::vector<std::string>{line(1), line(3)}));
  EXPECT_EQ(sink_.invalid_drops(), 1u);
}

TEST_F(JsonlSource, BlankLinesAndCarriageReturnsAreNotEnvelopes) {
  append(line(1) + "\r\n\n  \r\n" + line(2) + "\n");
  start(opts());
  ASSERT_TRUE(checkpoint_is(4, size()));
  EXPECT_EQ(sink_.envelopes(), (std::vector<std::string>{line(1), line(2)}));
}

TEST_F(JsonlSource, AnUnstoredLineIsRetriedAndTheCheckpointWaitsForIt) {
  append_lines(1, 3);
  auto after_one = line(1).size() + 1;
  sink_.decide([](const submission& s, size_t attempt) {
    std::optional<submit_outcome> o;
    if (s.envelope == line(2) && attempt <= 2)
      o = submit_outcome{submit_status::unavailable, {}, "database down"};
    return o;
  });
  start(opts());
  ASSERT_TRUE(checkpoint_is(3, size()));
  auto stores = sink_.stores();
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(stores[0], (jsonl_position{1, after_one}.to_json()))
    << "line 1 committed, line 2 not: the checkpoint stops before it";
  // Line 2 three times, line 3 once with it the first time and then on
  // each retry from line 2.
  EXPECT_EQ(sink_.envelopes(),
            (std::vector<std::string>{line(1), line(2), line(3), line(2),
                                      line(3), line(2), line(3)}));
}

TEST_F(JsonlSource, ARefusedLineIsSubmittedAgain) {
  append_lines(1, 2);
  sink_.decide([](const submission& s, size_t attempt) {
    std::optional<submit_outcome> o;
    if (s.envelope == line(2) && attempt == 1)
      o = submit_outcome{submit_status::refused, {}, "max_in_flight"};
    return o;
  });
  start(opts());
  ASSERT_TRUE(checkpoint_is(2, size()));
  EXPECT_EQ(sink_.envelopes(),
            (std::vector<std::string>{line(1), line(2), line(2)}));
}

TEST_F(JsonlSource, WatchesForAppendedLinesAndWaitsForTheirNewline) {
  append_lines(1, 1);
  start(opts());
  ASSERT_TRUE(checkpoint_is(1, size()));
  append(line(2) + "\n" + R"({"n":3)");
  auto with_partial = size();
  ASSERT_TRUE(checkpoint_is(2, with_partial - 6));
  append("}\n");
  ASSERT_TRUE(checkpoint_is(3, size()));
  EXPECT_EQ(sink_.envelopes(),
            (std::vector<std::string>{line(1), line(2), line(3)}));
}

TEST_F(JsonlSource, AFileShorterThanItsCheckpointIsReadFromTheStart) {
  append_lines(1, 2);
  sink_.set_checkpoint(path_, jsonl_position{40, 4000}.to_json());
  start(opts());
  ASSERT_TRUE(checkpoint_is(2, size()));
  EXPECT_EQ(sink_.envelopes(), (std::vector<std::string>{line(1), line(2)}));
}

TEST_F(JsonlSource, AMissingFileIsWaitedFor) {
  start(opts());
  ASSERT_TRUE(sink_.wait(
    [&] {
      return sink_.loads() == 1;
    },
    10s));
  append_lines(1, 1);
  ASSERT_TRUE(checkpoint_is(1, size()));
}

TEST_F(JsonlSource, AnUnreadableCheckpointIsRetriedUntilTheDatabaseAnswers) {
  append_lines(1, 1);
  sink_.fail_loads(2);
  start(opts());
  ASSERT_TRUE(checkpoint_is(1, size()));
  EXPECT_EQ(sink_.loads(), 3u);
}

TEST_F(JsonlSource, StopsPromptlyWhileWaitingForInput) {
  start(opts());
  ASSERT_TRUE(sink_.wait(
    [&] {
      return sink_.loads() == 1;
    },
    10s));
  auto before = std::chrono::steady_clock::now();
  stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
}

TEST(JsonlPosition, RoundTripsAndRefusesAnythingElse) {
  jsonl_position p{12, 3456};
  EXPECT_EQ(p.to_json(), R"({"line":12,"offset":3456})");
  EXPECT_EQ(jsonl_position::from_json(p.to_json()), p);
  for (auto bad : {"", "{}", "[]", R"({"line":1})", R"({"line":-1,"offset":2})",
                   R"({"line":"1","offset":2})", "garbage"})
    EXPECT_FALSE(jsonl_position::from_json(bad)) << bad;
}

} // namespace
} // namespace butlers
