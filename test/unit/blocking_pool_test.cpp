// The messenger's delivery threads: jobs run off the caller's thread, the
// queue is bounded and says so, and destroying the pool never blocks.

#include <atomic>
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

} // namespace
} // namespace butlers
