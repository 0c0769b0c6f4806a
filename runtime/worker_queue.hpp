#pragma once

// The work items an external butler (`[butler.runtime] kind = "external"`)
// holds for workers outside the node: which wait, which a worker holds under
// which token until when, and what happens when a delivery fails or its
// visibility lapses (back to the queue with a new token, or dead-lettered
// after `max_deliveries`). Pure logic with the time passed in; the butler's
// external runner (actors/external_runner.cpp) carries the decisions out.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace butlers {

/// How an external butler hands out items.
struct worker_limits {
  /// Deliveries of one item; a failed last one dead-letters it.
  uint32_t max_deliveries = 5;
  /// Visibility of a delivery unless the worker asks for another.
  std::chrono::milliseconds default_visibility{30000};
  /// Visibilities asked for are clamped into this range.
  std::chrono::milliseconds min_visibility{250};
  std::chrono::milliseconds max_visibility{std::chrono::hours{12}};
};

/// One item handed to a worker.
struct worker_handout {
  std::string work_id;
  /// Fences the worker's ack, nack and extend (new at every delivery).
  std::string lease_token;
  /// Which delivery this is, from 1.
  uint32_t attempt = 0;
};

/// What a token check found.
enum class worker_check {
  /// The token is the item's current one.
  ok,
  /// No such item here.
  unknown,
  /// The item is here, but under another token (or none: it waits).
  stale,
};

/// An item whose last delivery failed: it ends dead-lettered.
struct worker_dead {
  std::string work_id;
  /// The class of the last failure (`timeout` for a lapsed visibility).
  std::string error_class;
  std::string message;
  uint32_t deliveries = 0;
};

/// What a nack did.
struct worker_nack_result {
  worker_check check = worker_check::unknown;
  /// Retryable, deliveries left: the item waits again (after the delay).
  bool requeued = false;
  /// Retryable, no deliveries left: dead-lettered (removed from the queue).
  std::optional<worker_dead> dead;
  /// Not retryable: the item fails for good (removed from the queue).
  bool failed = false;
};

/// What a visibility sweep did.
struct worker_expiry {
  /// Items whose visibility lapsed and that wait again.
  std::vector<std::string> requeued;
  /// Items whose visibility lapsed on their last delivery (removed).
  std::vector<worker_dead> dead;
};

/// The items of one external butler.
class worker_queue {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  /// `make_token` makes each delivery's lease token (unique).
  worker_queue(worker_limits limits, std::function<std::string()> make_token);

  /// A new item waits for a worker.
  void add(const std::string& work_id);

  /// Forgets `work_id` (it ended elsewhere: cancelled, timed out, lost).
  void remove(const std::string& work_id);

  bool contains(const std::string& work_id) const;

  /// Hands out up to `max` waiting items, oldest first, each under a new
  /// token, visible again at `now + visibility` (clamped; zero means the
  /// default) unless acked, nacked or extended.
  std::vector<worker_handout> take(uint32_t max,
                                   std::chrono::milliseconds visibility,
                                   time_point now);

  /// Checks `token` for an ack; `ok` removes the item.
  worker_check ack(const std::string& work_id, const std::string& token);

  /// A worker gave the item back: retryable → waits again after `delay`
  /// (or dead-lettered on its last delivery); else it fails for good.
  worker_nack_result nack(const std::string& work_id, const std::string& token,
                          bool retryable, std::chrono::milliseconds delay,
                          std::string error_class, std::string message,
                          time_point now);

  /// Moves the visibility deadline to `now + visibility` (clamped).
  worker_check extend(const std::string& work_id, const std::string& token,
                      std::chrono::milliseconds visibility, time_point now);

  /// Items whose visibility passed at `now` wait again without a token, or
  /// are dead-lettered on their last delivery.
  worker_expiry expire(time_point now);

  /// The next time something changes by itself (a visibility deadline, or
  /// a nacked item becoming ready after `now`); nullopt when nothing is
  /// timed.
  std::optional<time_point> next_deadline(time_point now) const;

  /// Items a worker could take at `now`.
  size_t ready(time_point now) const;

  /// Items held by workers.
  size_t in_flight() const;

  /// Every item here.
  size_t size() const {
    return items_.size();
  }

  /// Whether `token` is the current token of `work_id` (changes nothing).
  worker_check check(const std::string& work_id,
                     const std::string& token) const;

  /// `visibility` clamped into the limits; zero means the default.
  std::chrono::milliseconds clamp(std::chrono::milliseconds visibility) const;

 private:
  struct entry {
    /// Empty while the item waits.
    std::string token;
    uint32_t deliveries = 0;
    /// Held: when its visibility lapses; waiting: when it may be taken.
    time_point until{};
    bool held = false;
  };

  /// The item counts as a failed delivery: waits again after `delay`, or
  /// is dead (removed) when that was its last delivery.
  std::optional<worker_dead> fail(const std::string& work_id, entry& e,
                                  std::chrono::milliseconds delay,
                                  std::string error_class, std::string message,
                                  time_point now);

  worker_limits limits_;
  std::function<std::string()> make_token_;
  std::unordered_map<std::string, entry> items_;
  /// Waiting items in the order they became ready (may name removed or
  /// held items: skipped).
  std::deque<std::string> waiting_;
};

} // namespace butlers
