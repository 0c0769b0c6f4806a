#pragma once

// Steer input on its way from a session actor to an adapter that runs on a
// thread of its own (a CLI's stdio loop, an HTTP model call loop). The
// session pushes what it receives; the adapter takes everything waiting at
// its next safe boundary (spec 003 §8: persist first, inject at a
// boundary), or waits for input when it has nothing else to do.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/threads.hpp"

namespace butlers {

class steer_box {
 public:
  /// Session actor: input arrived. Wakes a `wait` and calls the listener
  /// set with `on_push` (outside the lock).
  void push(steer_input in) {
    std::function<void()> listener;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (closed_)
        return;
      inputs_.push_back(std::move(in));
      listener = listener_;
    }
    cv_.notify_all();
    if (listener)
      listener();
  }

  /// Adapter thread: everything waiting, in arrival order.
  std::vector<steer_input> take() {
    std::lock_guard<std::mutex> guard{mtx_};
    return std::exchange(inputs_, {});
  }

  /// True when input is waiting.
  bool pending() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return !inputs_.empty();
  }

  /// Adapter thread: blocks until input waits, the box closes or `max`
  /// passes; true when input waits.
  bool wait(std::chrono::milliseconds max) {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, max, [this] {
      return closed_ || !inputs_.empty();
    });
    return !inputs_.empty();
  }

  /// Ends every wait; later pushes are dropped (the session is ending).
  void close() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      closed_ = true;
    }
    cv_.notify_all();
  }

  bool closed() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return closed_;
  }

  /// Called on the pushing thread after each push (e.g. to wake a poll
  /// loop). Set it before the session can push.
  void on_push(std::function<void()> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    listener_ = std::move(f);
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<steer_input> inputs_;
  std::function<void()> listener_;
  bool closed_ = false;
};

} // namespace butlers
