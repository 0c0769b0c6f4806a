// The ingest requests of one HTTP thread: batches, answers, deadlines, and
// an answer and a deadline racing for the same request.

#include <gtest/gtest.h>

#include "runtime/http_ingest_queue.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using queue = http_ingest_queue<std::string, int>;

struct HttpIngestQueue : ::testing::Test {
  queue q;
  queue::clock::time_point t0 = queue::clock::now();
};

TEST_F(HttpIngestQueue, OnlyTheFirstRecordOfABatchSchedulesItsTaking) {
  EXPECT_TRUE(q.track("a", t0, t0 + 5s, 1));
  EXPECT_FALSE(q.track("b", t0, t0 + 5s, 2));
  auto batch = q.take_batch();
  EXPECT_EQ(batch.records, (std::vector<int>{1, 2}));
  ASSERT_EQ(batch.tokens.size(), 2u);
  EXPECT_NE(batch.tokens[0], batch.tokens[1]);
  EXPECT_TRUE(q.track("c", t0, t0 + 5s, 3));
  EXPECT_EQ(q.take_batch().records, (std::vector<int>{3}));
  EXPECT_TRUE(q.take_batch().records.empty());
}

TEST_F(HttpIngestQueue, AnAnsweredRequestIsGoneForTheSecondAnswer) {
  q.track("a", t0, t0 + 5s, 1);
  auto token = q.take_batch().tokens.at(0);
  auto p = q.untrack(token);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->waiter, "a");
  EXPECT_EQ(p->started, t0);
  EXPECT_FALSE(q.untrack(token));
}

TEST_F(HttpIngestQueue, DeadlinesFallDueInArrivalOrder) {
  q.track("a", t0, t0 + 1s, 1);
  q.track("b", t0, t0 + 2s, 2);
  q.track("c", t0, t0 + 3s, 3);
  auto tokens = q.take_batch().tokens;
  EXPECT_TRUE(q.due(t0).empty());
  EXPECT_EQ(q.due(t0 + 2s), (std::vector<uint64_t>{tokens[0], tokens[1]}));
  EXPECT_TRUE(q.due(t0 + 2s).empty());
  EXPECT_EQ(q.due(t0 + 10s), (std::vector<uint64_t>{tokens[2]}));
}

TEST_F(HttpIngestQueue, ADueRequestAnsweredMeanwhileIsNotAnsweredAgain) {
  q.track("a", t0, t0 + 1s, 1);
  auto token = q.take_batch().tokens.at(0);
  ASSERT_TRUE(q.untrack(token));
  auto due = q.due(t0 + 1s);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_FALSE(q.untrack(due[0]));
}

} // namespace
} // namespace butlers
