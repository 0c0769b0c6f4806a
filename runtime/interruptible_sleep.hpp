#pragma once

// A blocking wait that a flag can cut short: backoff between retries on the
// threads that may block (deliveries, connector sources).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace butlers {

/// Sleeps `d` in slices of at most 50 ms; false as soon as `stop` (when not
/// null) is set, true when the whole time passed.
inline bool sleep_unless_stopped(std::chrono::milliseconds d,
                                 const std::atomic<bool>* stop) {
  using clock = std::chrono::steady_clock;
  auto end = clock::now() + d;
  for (;;) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed))
      return false;
    auto now = clock::now();
    if (now >= end)
      return true;
    std::this_thread::sleep_for(
      std::min<clock::duration>(end - now, std::chrono::milliseconds{50}));
  }
}

} // namespace butlers
