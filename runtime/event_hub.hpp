#pragma once

// The event hub of the thread API (spec 003 §7): subscription scopes
// `thread(id)` (full fidelity) and `summary` (one coalesced entry per
// thread, last write wins). Publishers (thread actors) never wait for a
// subscriber: each subscriber has a bounded buffer and at most one write in
// flight; what does not fit is dropped and counted, and the client
// backfills from the transcript. Plain class with a mutex, no actors, so
// the HTTP threads and the actors share it.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/metrics.hpp"

namespace butlers {

class event_hub {
 public:
  /// Writes `chunk` to the subscriber's socket and calls `done(ok)` once it
  /// left (or failed to). Called with no hub lock held.
  using write_fn = std::function<void(std::string chunk,
                                      std::function<void(bool)> done)>;

  struct subscriber {
    /// "" for the summary scope.
    std::string thread_id;
    write_fn write;
    size_t capacity = 0;
    std::mutex mtx;
    /// thread scope: frames waiting for the socket.
    std::deque<std::string> frames;
    /// summary scope: the latest frame per thread, in first-arrival order.
    std::unordered_map<std::string, std::string> latest;
    std::deque<std::string> order;
    bool writing = false;
    bool closed = false;
    uint64_t dropped = 0;
    uint64_t sent = 0;
  };
  using subscriber_ptr = std::shared_ptr<subscriber>;

  /// `max_subscribers` bounds both scopes together; `capacity` is each
  /// subscriber's buffer.
  /// `dropped` (may be null) counts dropped frames for /metrics.
  event_hub(size_t max_subscribers, size_t capacity,
            counter* dropped = nullptr);

  /// A new subscriber of thread `thread_id` (or of the summary scope when
  /// `thread_id` is empty); null when `max_subscribers` are open.
  subscriber_ptr subscribe(const std::string& thread_id, write_fn write);

  /// Removes a subscriber (its socket closed); idempotent.
  void unsubscribe(const subscriber_ptr& sub);

  /// True when thread `thread_id` has subscribers (publishers skip
  /// rendering otherwise).
  bool wants_thread(const std::string& thread_id) const;

  /// True when the summary scope has subscribers.
  bool wants_summary() const {
    return summary_count_.load(std::memory_order_relaxed) > 0;
  }

  /// Queues `frame` for every subscriber of `thread_id`.
  void publish_thread(const std::string& thread_id, const std::string& frame);

  /// Replaces the pending summary of `thread_id` for every summary
  /// subscriber (last write wins).
  void publish_summary(const std::string& thread_id, const std::string& frame);

  /// Writes a keep-alive comment to every subscriber whose socket is idle;
  /// a failed write closes the subscriber.
  void heartbeat();

  /// Closes every subscriber (the server stops): their write functions
  /// are released and nothing more is written.
  void close_all();

  /// Frames dropped because a subscriber's buffer was full, since start.
  uint64_t dropped() const {
    return dropped_.load();
  }

  /// Open subscribers of both scopes.
  size_t size() const;

 private:
  void enqueue(const subscriber_ptr& sub, const std::string& key,
               const std::string& frame);
  void pump(const subscriber_ptr& sub);

  size_t max_subscribers_;
  size_t capacity_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, std::vector<subscriber_ptr>> threads_;
  std::vector<subscriber_ptr> summary_;
  std::atomic<size_t> summary_count_{0};
  size_t count_ = 0;
  std::atomic<uint64_t> dropped_{0};
  counter* dropped_metric_;
};

} // namespace butlers
