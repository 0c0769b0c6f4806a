#pragma once

// What a request's routing remembers once its plan is stored (spec 001 §6,
// §8, §10.3, §15): its fanout, retries with backoff, waits for room at a full
// butler, the invocation and wall-clock budgets, a circuit per target butler
// and the route timeout of each attempt. A plain class: each event (an
// outcome, a timer, a refusal) goes in with the current time, and what the
// switchboard must do comes out as `tracker_actions`, which the actor carries
// out in order (writes, then dispatches, timers, cancellations, completions).

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/fanout.hpp"
#include "runtime/messages.hpp"
#include "runtime/metrics.hpp"
#include "runtime/resilience.hpp"
#include "runtime/route.hpp"

namespace butlers {

/// A request whose subrequests are out: where its fanout stands. Everything
/// here is also in the database; a request that outlives its switchboard is
/// planned again from there.
struct tracked_request {
  inbox_ref ref;
  /// The inbox lease token (fencing of the final transition).
  int64_t token = 0;
  inbox_record record;
  fanout fo;
  uint32_t invocations = 0;
  uint32_t max_invocations = 16;
  uint32_t retry_max_attempts = 3;
  uint32_t wall_clock_s = 3600;
  /// The terminal transition is being written: no more events apply.
  bool finishing = false;
  /// When the wall-clock budget runs out (steady clock; epoch: expired).
  std::chrono::steady_clock::time_point deadline;
  /// Per attempt (segment id with its attempt suffix) accepted by its butler
  /// and awaiting its outcome: when its route timeout passes. Checked by the
  /// switchboard's one-second tick: a CAF delayed message per attempt would
  /// sit in CAF's clock until due, half an hour by default.
  std::map<std::string, std::chrono::steady_clock::time_point>
    attempt_deadlines;
};

/// A subrequest to send: the envelope is complete (fresh subrequest id, the
/// attempt's segment id); the switchboard finds a host of `butler` and
/// reports what became of it (`on_accepted`, `on_refused_full`,
/// `on_outcome`).
struct dispatch_order {
  std::string request_id;
  /// The plan's segment id (without the attempt suffix).
  std::string segment_id;
  std::string butler;
  route_envelope envelope;
};

/// A segment's backoff: `on_retry(request_id, segment_id)` once `delay`
/// has passed.
struct retry_timer {
  std::string request_id;
  std::string segment_id;
  std::chrono::milliseconds delay;
};

/// A request whose fanout is done: the switchboard writes `done` (fenced by
/// the lease token), calls `forget`, and, when it errored, sends `reply` to
/// the sender.
struct finished_request {
  completion done;
  /// The user-visible error reply (§8); empty when the request parsed.
  std::string reply;
  request_context context;
  /// The error reply as a notify.v1 for the messenger (empty when the
  /// request parsed), keyed by the dispatches of all rounds, so a replayed
  /// request that fails again tells the user again.
  std::string notify;
};

/// A work item a butler should stop (best effort): an attempt we gave up on.
struct work_cancel {
  std::string butler;
  std::string work_id;
};

/// What the switchboard must do after an event, in this order.
struct tracker_actions {
  /// Segment updates and dead letters, to the writer (fire and forget).
  std::vector<named_statement> writes;
  std::vector<dispatch_order> dispatches;
  std::vector<retry_timer> retries;
  std::vector<work_cancel> cancels;
  std::vector<finished_request> finished;
  /// A wait for room ended: the hot path may claim again.
  bool room_freed = false;

  bool empty() const {
    return writes.empty() && dispatches.empty() && retries.empty()
           && cancels.empty() && finished.empty() && !room_freed;
  }
};

/// The switchboard's requests in progress (see the file comment).
class request_tracker {
 public:
  using clock = std::chrono::steady_clock;

  /// `metrics` must outlive the tracker (its counters are registered here).
  request_tracker(const switchboard_config& cfg,
                  std::vector<policy_config> policies,
                  metrics_registry& metrics,
                  uint64_t seed = std::random_device{}());

  // -- the requests ---------------------------------------------------------

  /// Tracks a request whose plan is stored (`rows`: the stored segments, as
  /// `fanout_plan_store` returns them) and sends out what is ready. False
  /// (and nothing tracked) when the stored plan has no segments. A request
  /// tracked already (its lease lapsed, the cold path gave it back) is
  /// replaced. `wall_now_us`: Unix microseconds, for the wall-clock budget.
  bool start(inbox_ref ref, int64_t token, inbox_record record,
             const named_result& rows, int64_t wall_now_us,
             clock::time_point now, tracker_actions& out);

  size_t size() const {
    return requests_.size();
  }

  bool contains(const std::string& request_id) const {
    return requests_.count(request_id) > 0;
  }

  /// The request, or null.
  const tracked_request* find(const std::string& request_id) const;

  /// Stops tracking a request (its terminal transition was written, or it
  /// is no longer ours).
  void forget(const std::string& request_id);

  /// Stops tracking a request that is not finishing (its lease is gone);
  /// false when there was none.
  bool drop_unless_finishing(const std::string& request_id);

  /// An operator cancelled or completed it: what runs for it stops, waits
  /// end, and it is forgotten.
  void cancel(const std::string& request_id, tracker_actions& out);

  /// An operator retargeted a segment that has not gone out yet.
  void reroute(const std::string& request_id, const std::string& segment_id,
               const std::string& butler);

  /// Lease renewals for every request tracked: (ref, token).
  std::vector<std::pair<inbox_ref, int64_t>> leases() const;

  // -- events -----------------------------------------------------------------

  /// Butler accepted attempt `attempt_id`: it owns work item `work_id`, and
  /// the attempt's route timeout starts.
  void on_accepted(const std::string& request_id, const std::string& attempt_id,
                   const std::string& work_id, clock::time_point now);

  /// The butler's answer at its door to attempt `attempt_id`: `accepted`
  /// (see `on_accepted`), refused because it is full (`on_refused_full`),
  /// or refused otherwise (validation: the attempt's outcome, after
  /// `duration_ms`).
  void on_door_answer(const std::string& request_id,
                      const std::string& attempt_id, route_response r,
                      double duration_ms, clock::time_point now,
                      tracker_actions& out);

  /// A full butler refused attempt `attempt_id` at its door
  /// (`overload_rejected`): flow control, not a failure. The segment waits
  /// for room and goes out again as the same attempt (using up neither
  /// retries nor invocations) when that butler next reports an outcome, or
  /// when a full-jitter timer fires in case none comes. The wall-clock
  /// budget still bounds the wait.
  void on_refused_full(const std::string& request_id,
                       const std::string& attempt_id, std::string message,
                       clock::time_point now, tracker_actions& out);

  /// A final route_response (or the error the switchboard made for a
  /// transport failure), `r.segment_id` naming the attempt.
  void on_outcome(const route_response& r, clock::time_point now,
                  tracker_actions& out);

  /// A segment's backoff timer fired.
  void on_retry(const std::string& request_id, const std::string& segment_id,
                clock::time_point now, tracker_actions& out);

  /// Expires attempts past their route timeout and requests past their
  /// wall-clock budget (the switchboard's tick).
  void expire_due(clock::time_point now, tracker_actions& out);

  /// Butler `name` has (true) or has no (false) live host in the cluster:
  /// releases or holds its circuit.
  void on_host_change(const std::string& name, bool available,
                      clock::time_point now);

  // -- gating the hot path
  // ------------------------------------------------------

  /// Segments waiting for room at a full butler.
  uint32_t waiting_count() const {
    return waiting_count_;
  }

 private:
  /// A segment waiting for room at a full butler; stale once the segment
  /// has moved on (its `waits` changed, or it waits no longer).
  struct waiting_entry {
    std::string request_id;
    std::string segment_id;
    uint32_t wait = 0;
  };

  const policy_config& policy_for(const std::string& tier) const;
  circuit_breaker& circuit(const std::string& butler);
  void observe_circuit(const std::string& butler);
  void persist(const std::string& request_id, const fanout_segment& seg,
               const std::string& raw, bool log, tracker_actions& out) const;
  void settle(const std::string& id, size_t i, const std::string& raw,
              tracker_actions& out);
  void set_waiting(fanout_segment& seg, bool on, tracker_actions& out);
  fanout_segment* live_wait(const waiting_entry& e, const std::string& butler);
  void wake_one(const std::string& butler, clock::time_point now,
                tracker_actions& out);
  void fail_attempt(const std::string& id, size_t i, std::string cls,
                    std::string message, bool retryable, const std::string& raw,
                    clock::time_point now, tracker_actions& out);
  void dispatch(const std::string& id, size_t i, clock::time_point now,
                tracker_actions& out);
  void advance(const std::string& id, clock::time_point now,
               tracker_actions& out);
  void finish(const std::string& id, tracker_actions& out);
  void expire_budget(tracked_request& rq, tracker_actions& out);
  void expire_attempt(const std::string& id, const std::string& attempt_id,
                      clock::time_point now, tracker_actions& out);
  void count_in_progress();

  switchboard_config cfg_;
  std::vector<policy_config> policies_;
  std::unordered_map<std::string, tracked_request> requests_;
  /// Segments waiting for room, per butler, oldest first: the next one goes
  /// out when that butler reports an outcome (a slot freed). Stale entries
  /// are skipped when reached and swept when they outnumber the live ones.
  std::map<std::string, std::deque<waiting_entry>> waiting_;
  uint32_t waiting_count_ = 0;
  /// A circuit per target butler.
  std::map<std::string, circuit_breaker> circuits_;
  std::mt19937_64 rng_;
  metrics_registry& metrics_;
  counter& retries_;
  counter& dead_letters_;
  counter& budget_exhausted_;
  counter& route_timeouts_;
  counter& overload_waits_;
  gauge& segments_waiting_;
  gauge& in_progress_;
};

/// The user-visible error reply of a request that errored (§8): what
/// failed, what to do, what was done, and its reference.
std::string error_reply(const tracked_request& rq, const fanout::verdict_t& v);

/// A route.v1 envelope with the context of the request `ctx` describes (the
/// rest left empty).
route_envelope envelope_for(const request_context& ctx);

} // namespace butlers
