#pragma once

// The ingest requests of one HTTP thread between parsing and their answer:
// the batch being gathered for the switchboard, the requests waiting for
// their commit, and their deadlines. No restinio and no actors here.

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace butlers {

/// Tracks ingest requests by token. The HTTP thread adds requests and takes
/// batches; the answer of a commit or a passed deadline, whichever comes
/// first, takes a request out (`untrack`), and the other finds it gone.
/// Deadlines are kept in arrival order, so a sweep only looks at the front.
/// Safe to use from several threads.
template<class Waiter, class Record>
class http_ingest_queue {
 public:
  using clock = std::chrono::steady_clock;

  /// A request waiting for its answer.
  struct waiting {
    /// What to answer through.
    Waiter waiter;
    /// When the request arrived (for the accept latency).
    clock::time_point started;
  };

  /// A batch for one request to the switchboard.
  struct batch {
    std::vector<Record> records;
    /// The token of each record, in the same order.
    std::vector<uint64_t> tokens;
  };

  /// Tracks a request until `deadline` and adds its record to the next
  /// batch. Returns true when the caller must schedule a `take_batch`: the
  /// first record of a batch does, so one batch carries every request that
  /// arrives before it is taken.
  bool track(Waiter waiter, clock::time_point started,
             clock::time_point deadline, Record rec) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto token = ++next_token_;
    pending_.emplace(token, waiting{std::move(waiter), started});
    deadlines_.emplace_back(deadline, token);
    next_.records.push_back(std::move(rec));
    next_.tokens.push_back(token);
    if (take_scheduled_)
      return false;
    take_scheduled_ = true;
    return true;
  }

  /// Takes the gathered batch (possibly empty); the next `track` schedules
  /// another.
  batch take_batch() {
    batch out;
    std::lock_guard<std::mutex> guard{mtx_};
    std::swap(out, next_);
    take_scheduled_ = false;
    return out;
  }

  /// Stops tracking `token`: its request, or nullopt when it was answered
  /// already.
  std::optional<waiting> untrack(uint64_t token) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = pending_.find(token);
    if (i == pending_.end())
      return std::nullopt;
    auto result = std::move(i->second);
    pending_.erase(i);
    return result;
  }

  /// The tokens whose deadline is `now` or earlier, oldest first, no longer
  /// watched. Some may have been answered meanwhile (`untrack` tells).
  std::vector<uint64_t> due(clock::time_point now) {
    std::vector<uint64_t> out;
    std::lock_guard<std::mutex> guard{mtx_};
    while (!deadlines_.empty() && deadlines_.front().first <= now) {
      out.push_back(deadlines_.front().second);
      deadlines_.pop_front();
    }
    return out;
  }

 private:
  std::mutex mtx_;
  /// The last token handed out.
  uint64_t next_token_ = 0;
  /// Requests not answered yet.
  std::unordered_map<uint64_t, waiting> pending_;
  /// Deadlines in arrival order (the timeout is the same for all).
  std::deque<std::pair<clock::time_point, uint64_t>> deadlines_;
  /// The batch being gathered.
  batch next_;
  /// A `take_batch` is scheduled for the batch being gathered.
  bool take_scheduled_ = false;
};

} // namespace butlers
