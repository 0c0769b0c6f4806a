#include "runtime/blocking_pool.hpp"

#include <algorithm>
#include <thread>

namespace butlers {

namespace {

/// The process's pool threads still running. Never destroyed: threads
/// count themselves out while the process exits.
struct thread_census {
  std::mutex mtx;
  std::condition_variable ended;
  size_t live = 0;
};

thread_census& census() {
  static auto* c = new thread_census{};
  return *c;
}

} // namespace

blocking_pool::blocking_pool(size_t threads, size_t capacity)
  : state_(std::make_shared<shared>()) {
  state_->capacity = std::max<size_t>(1, capacity);
  auto& c = census();
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) {
    {
      std::lock_guard<std::mutex> guard{c.mtx};
      ++c.live;
    }
    std::thread{[st = state_, &c] {
      {
        std::unique_lock<std::mutex> lock{st->mtx};
        for (;;) {
          st->cv.wait(lock, [&] {
            return st->closed || !st->jobs.empty();
          });
          if (st->jobs.empty())
            break; // closed and drained
          auto job = std::move(st->jobs.front());
          st->jobs.pop_front();
          lock.unlock();
          job();
          lock.lock();
        }
      }
      std::lock_guard<std::mutex> guard{c.mtx};
      --c.live;
      c.ended.notify_all();
    }}.detach();
  }
}

bool blocking_pool::await_all_threads(
  std::chrono::steady_clock::time_point deadline) {
  auto& c = census();
  std::unique_lock<std::mutex> lock{c.mtx};
  return c.ended.wait_until(lock, deadline, [&] {
    return c.live == 0;
  });
}

size_t blocking_pool::live_threads() {
  auto& c = census();
  std::lock_guard<std::mutex> guard{c.mtx};
  return c.live;
}

blocking_pool::~blocking_pool() {
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    state_->closed = true;
  }
  state_->cv.notify_all();
}

bool blocking_pool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    if (state_->closed || state_->jobs.size() >= state_->capacity)
      return false;
    state_->jobs.push_back(std::move(job));
  }
  state_->cv.notify_one();
  return true;
}

} // namespace butlers
