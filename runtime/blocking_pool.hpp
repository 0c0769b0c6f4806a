#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace butlers {

/// A fixed set of threads for blocking work that must not run on CAF's
/// scheduler (file syncs, outbound HTTP), reused job after job: starting a
/// thread per job (a detached actor per delivery) cost the node a tenth of
/// its CPU at 2,000 deliveries a second. The queue is bounded; `post`
/// refuses a job when it is full, and the caller reports that.
///
/// Destroying the pool never blocks: its threads finish the jobs already
/// queued and exit on their own (they share the queue, not the pool). A
/// process waits for them with `await_all_threads` before it exits: a job
/// still running while static objects are destroyed would read them freed.
class blocking_pool {
 public:
  /// `threads` workers (at least one) and at most `capacity` queued jobs.
  blocking_pool(size_t threads, size_t capacity);

  ~blocking_pool();

  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Queues `job`; false when the queue is full (the job is dropped).
  bool post(std::function<void()> job);

  /// Waits until every pool thread of the process has ended (its pool
  /// destroyed, its queued jobs run) or `deadline` passes; false when some
  /// still run then.
  static bool await_all_threads(std::chrono::steady_clock::time_point deadline);

  /// Pool threads of the process that have not ended yet.
  static size_t live_threads();

 private:
  struct shared {
    std::mutex mtx;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    size_t capacity = 0;
    bool closed = false;
  };
  std::shared_ptr<shared> state_;
};

} // namespace butlers
