#pragma once

// Chat actions ("typing…") while a request is being worked on: Telegram
// shows a `sendChatAction` for about five seconds, so the ticker repeats it
// every `interval` for each request it was started for, until it is stopped
// (the request's 😴 or terminal reaction), or `max_for` passed. One thread
// of its own for every request (started on first use), sending in turn;
// each send is a short blocking HTTP call made by the function given to
// `start`. Bounded: at most `capacity` requests at once (a start beyond is
// refused and counted); a failed send is counted and the request is tried
// again at its next tick. Thread-safe; the destructor stops the thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace butlers {

class typing_ticker {
 public:
  /// Sends one chat action; true when the provider took it. `stop` is set
  /// when the ticker shuts down (end retries early).
  using send_fn = std::function<bool(const std::atomic<bool>& stop)>;

  /// Called for every outcome: "sent", "failed", "refused" (capacity).
  using count_fn = std::function<void(const char* outcome)>;

  explicit typing_ticker(size_t capacity = 256, count_fn count = {});
  ~typing_ticker();

  typing_ticker(const typing_ticker&) = delete;
  typing_ticker& operator=(const typing_ticker&) = delete;

  /// Shows the action for `key` (a request) now and every `interval` until
  /// `stop(key)` or `max_for` passed; a key already running gets the new
  /// settings. False when `capacity` keys run already.
  bool start(const std::string& key, std::chrono::milliseconds interval,
             std::chrono::milliseconds max_for, send_fn send);

  /// Stops `key` (nothing when it does not run).
  void stop(const std::string& key);

  /// Keys running now.
  size_t size() const;

 private:
  struct job {
    std::chrono::steady_clock::time_point next;
    std::chrono::steady_clock::time_point until;
    std::chrono::milliseconds interval;
    send_fn send;
  };

  void run();

  size_t capacity_;
  count_fn count_;
  mutable std::mutex mtx_;
  std::condition_variable changed_;
  std::map<std::string, job> jobs_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

} // namespace butlers
