// The messenger's delivery threads: jobs run off the caller's thread, the
// queue is bounded and says so, destroying the pool never blocks, and the
// process can wait for the threads of destroyed pools before it exits.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>

#include <gtest/gtest.h>

#include "runtime/blocking_pool.hpp"

namespace butlers {
namespace {

TEST(BlockingPool, RunsEveryJobItAccepts) {
  auto done = std::make_shared<std::atomic<int>>(0);
  std::promise<void> all;
  auto finished = all.get_future();
  auto all_ptr = std::make_shared<std::promise<void>>(std::move(all));
  {
    blocking_pool pool{2, 100};
    for (int i = 0; i < 100; ++i)
      ASSERT_TRUE(pool.post([done, all_ptr] {
        if (++*done == 100)
          all_ptr->set_value();
      }));
  }
  // The pool is gone; its threads finish what was queued.
  finished.wait();
  EXPECT_EQ(*done, 100);
}

TEST(BlockingPool, RefusesAJobWhenItsQueueIsFull) {
  blocking_pool pool{1, 1};
  std::promise<void> started, release;
  auto is_started = started.get_future();
  auto go = release.get_future().share();
  // The one thread takes the first job and blocks in it...
  ASSERT_TRUE(pool.post([&started, go] {
    started.set_value();
    go.wait();
  }));
  is_started.wait();
  // ...one more fits the queue, the next does not.
  std::promise<void> second_ran;
  auto second = second_ran.get_future();
  EXPECT_TRUE(pool.post([&second_ran] {
    second_ran.set_value();
  }));
  EXPECT_FALSE(pool.post([] {}));
  release.set_value();
  second.wait();
}

TEST(BlockingPool, AProcessWaitsForTheThreadsOfItsDestroyedPools) {
  using namespace std::chrono_literals;
  std::promise<void> started, release;
  auto is_started = started.get_future();
  auto go = release.get_future().share();
  {
    blocking_pool pool{2, 4};
    ASSERT_TRUE(pool.post([&started, go] {
      started.set_value();
      go.wait();
    }));
    is_started.wait();
  }
  // The pool is gone; one of its threads is still in its job.
  EXPECT_GE(blocking_pool::live_threads(), 1u);
  EXPECT_FALSE(
    blocking_pool::await_all_threads(std::chrono::steady_clock::now() + 50ms));
  release.set_value();
  EXPECT_TRUE(
    blocking_pool::await_all_threads(std::chrono::steady_clock::now() + 30s));
  EXPECT_EQ(blocking_pool::live_threads(), 0u);
}

} // namespace
} // namespace butlers
