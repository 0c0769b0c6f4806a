#pragma once

// What a butler remembers about admission and the work it holds: items
// being stored, items waiting for a session slot, running sessions with
// their deadlines, and finished items whose result is still being written.
// The pool decides (admit or reject, store as started or not, which item
// starts next, which sessions ran out of time, which leases to renew); the
// butler actor carries the decisions out. No actor system needed.

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>

#include "runtime/messages.hpp"
#include "runtime/route.hpp"
#include "runtime/threads.hpp"

namespace butlers {

/// A run's steer channel: input that arrived before the session started
/// (it joined the work item's pending input), and who hears about applied
/// input (the thread that owns the run; null for routed work).
struct session_steer {
  std::vector<steer_input> pending;
  /// A `thread_actor` (untyped here: runtime/ does not know the actor
  /// interfaces).
  caf::actor observer;
};

/// A work item this butler holds the lease of.
struct held_item {
  work_item item;
  route_envelope env;
  /// When the butler accepted (or recovered) it.
  std::chrono::steady_clock::time_point since;
  /// A thread's run: steer input that arrived while the item waited for a
  /// slot, and the thread to tell when input is applied.
  session_steer steer;
  /// Stored `running` with its first attempt counted (a slot was free when
  /// it was accepted): its session needs no start write.
  bool started = false;
  /// The `queued` lifecycle reaction was shown for it (actors/lifecycle.hpp):
  /// `progress` is shown again when it starts.
  bool queued_shown = false;
};

/// A session slot in use.
struct running_session {
  held_item held;
  /// Its `session_actor` (untyped here, as `session_steer::observer`); null
  /// for a run without a session actor (the messenger's outbox deliveries).
  caf::actor session;
  std::chrono::steady_clock::time_point started;
  /// When its session timeout passes (the actor clock's time).
  std::chrono::steady_clock::time_point timeout_at;
};

/// Why admission refused a route.execute call for lack of room (the error
/// class is always `overload_rejected`).
struct pool_rejection {
  std::string message;
  bool retryable = false;
};

/// The next waiting item to take a slot, and whether to give it up instead.
struct pool_start {
  held_item held;
  /// Started `max_attempts` times without ever finishing: each attempt
  /// took its node down (or was lost with it), so it is not run again.
  bool abandon = false;
};

/// What a due session timer found.
struct pool_timeouts {
  /// Running items whose timeout has passed (each is still running: the
  /// butler stops it).
  std::vector<std::string> expired;
  /// When to look again (the earliest deadline left); nullopt: nothing is
  /// running, no timer needed.
  std::optional<std::chrono::steady_clock::duration> next;
};

/// A butler's session slots and the work waiting for them.
class session_pool {
 public:
  using clock = std::chrono::steady_clock;

  /// A session that crashed its node this many times is not started again.
  static constexpr int32_t max_attempts = 5;

  session_pool(std::string butler, uint32_t max_concurrent_sessions,
               uint32_t max_pending, std::chrono::milliseconds timeout);

  // -- admission
  // ---------------------------------------------------------------

  /// Room for a route.execute call from `trigger_source` (requested by the
  /// session of `origin_butler`): nullopt, or why not. A self-trigger while
  /// every slot is busy is refused for good (it would wait for itself);
  /// any call is refused, retryably, when slots and queue are full.
  std::optional<pool_rejection> admit(std::string_view trigger_source,
                                      std::string_view origin_butler) const;

  /// An admitted item is being stored: true when it should be stored as
  /// started (a slot is free for it now or within one round of sessions,
  /// since fewer than twice the slots are ahead of it), so no start write
  /// follows. Pair with `end_append`.
  bool begin_append();

  /// The store of an item begun with `begin_append` is over.
  void end_append();

  /// A stored (or recovered) item waits for a slot.
  void enqueue(held_item held);

  /// How many more items recovery may lease (room left in slots and
  /// queue together).
  uint32_t room() const;

  // -- starting and ending sessions ----------------------------------------

  /// The item that takes the next free slot, or nullopt when every slot is
  /// busy or nothing waits. Unless abandoned, follow with `start`.
  std::optional<pool_start> next();

  /// `held` runs now (its session is `session`; `now` is the actor clock's
  /// time). True when the timeout timer must be armed, for `timeout()`:
  /// one timer at a time serves all sessions, since every session of a
  /// butler has the same timeout and a later start never needs an earlier
  /// timer.
  bool start(held_item held, caf::actor session, clock::time_point now);

  /// The running item `work_id`, or null.
  running_session* running(const std::string& work_id);

  /// The waiting item `work_id`, or null.
  held_item* waiting(const std::string& work_id);

  /// Ends the run of `work_id` (nullopt when it is not running): its result
  /// is being written from now on, under `lease_token` (see `leases`).
  std::optional<running_session> finish(const std::string& work_id,
                                        int64_t lease_token);

  /// Removes waiting item `work_id` (nullopt when it is not waiting).
  std::optional<held_item> take_waiting(const std::string& work_id);

  /// The result of `work_id` is written (or could not be).
  void written(const std::string& work_id);

  /// The item is waiting or running here.
  bool holds(const std::string& work_id) const;

  /// Holds it, or its result is still being written.
  bool holds_lease(const std::string& work_id) const;

  // -- time ------------------------------------------------------------------

  /// The session timer fired at `now`: which sessions ran out of time, and
  /// whether (and when) to fire again.
  pool_timeouts on_timeout(clock::time_point now);

  /// Every lease this butler holds and must renew: waiting, running and
  /// finishing items (the last with work id and token only).
  std::vector<work_item> leases() const;

  // -- observers -------------------------------------------------------------

  /// Sessions running.
  uint32_t active() const {
    return static_cast<uint32_t>(running_.size());
  }

  /// Items waiting for a slot, counting those still being stored.
  uint32_t queued() const {
    return static_cast<uint32_t>(pending_.size()) + appending_;
  }

  /// Nothing waits and nothing runs.
  bool idle() const {
    return pending_.empty() && running_.empty();
  }

  std::chrono::milliseconds timeout() const {
    return timeout_;
  }

 private:
  /// Names the butler in rejections and leases.
  std::string butler_;
  uint32_t max_concurrent_sessions_;
  uint32_t max_pending_;
  std::chrono::milliseconds timeout_;
  /// Leased items waiting for a slot (bounded by max_pending together with
  /// `appending_`).
  std::deque<held_item> pending_;
  /// Accepted route.execute calls whose work item is being stored.
  uint32_t appending_ = 0;
  /// Running sessions by work id.
  std::unordered_map<std::string, running_session> running_;
  /// Items whose session ended and whose reply and result are on their way
  /// out, with their lease tokens: still renewed until the result is
  /// written.
  std::unordered_map<std::string, int64_t> finishing_;
  /// A timeout message is on its way (see `start`).
  bool timeout_armed_ = false;
};

} // namespace butlers
