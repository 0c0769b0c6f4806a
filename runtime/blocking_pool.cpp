#include "runtime/blocking_pool.hpp"

#include <algorithm>
#include <thread>

namespace butlers {

blocking_pool::blocking_pool(size_t threads, size_t capacity)
  : state_(std::make_shared<shared>()) {
  state_->capacity = std::max<size_t>(1, capacity);
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i)
    std::thread{[st = state_] {
      std::unique_lock<std::mutex> lock{st->mtx};
      for (;;) {
        st->cv.wait(lock, [&] {
          return st->closed || !st->jobs.empty();
        });
        if (st->jobs.empty())
          return; // closed and drained
        auto job = std::move(st->jobs.front());
        st->jobs.pop_front();
        lock.unlock();
        job();
        lock.lock();
      }
    }}.detach();
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
