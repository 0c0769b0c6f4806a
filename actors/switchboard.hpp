#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/writer_client.hpp"
#include "runtime/config.hpp"
#include "runtime/fanout.hpp"
#include "runtime/node_status.hpp"
#include "runtime/resilience.hpp"

namespace butlers {

/// How long the switchboard reuses the registry's answers: the entries the
/// router plans with, and this node's host of each butler. (Asking for them
/// was three calls per message; the registry changes when butlers start,
/// stop or a node comes or goes, and a call to a host that is gone fails
/// and is asked again.)
constexpr auto registry_ttl = std::chrono::milliseconds{100};

/// How requests become plans and what they may spend.
struct routing_settings {
  router_config router;
  std::vector<policy_config> policies;
};

/// A request whose subrequests are out (the classification pool is free
/// again): where its fanout stands. Everything here is also in the
/// database; a request that outlives this actor is planned again from
/// there.
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
  bool finishing = false;
  /// Per segment id: the host whose transport failed on the last attempt;
  /// the retry asks the registry for another one (taken when read).
  std::map<std::string, caf::actor> failed_host;
  /// When the wall-clock budget runs out (steady clock, ns; 0: expired).
  int64_t deadline_ns = 0;
  /// Per attempt (segment id with its attempt suffix) accepted by its
  /// butler and awaiting its outcome: when its route timeout passes
  /// (steady clock, ns). Checked by the switchboard's one-second tick: a
  /// CAF delayed message per attempt would sit in CAF's clock until due,
  /// half an hour by default, long after the request ended.
  std::map<std::string, int64_t> attempt_deadlines;
};

/// A segment waiting for room at a full butler; stale once the segment has
/// moved on (its `waits` changed, or it waits no longer).
struct waiting_entry {
  std::string request_id;
  std::string segment_id;
  uint32_t wait = 0;
};

/// A stored request on the hot path. `record` is what this node stored at
/// ingest (context, text and tier, no raw payload); with it, the request is
/// planned before it is claimed and the plan commits with the claim. From
/// the cold path it is null: claimed first, then planned.
struct queued_request {
  inbox_ref ref;
  std::shared_ptr<const inbox_record> record;
};

struct switchboard_state {
  static inline const char* name = "switchboard";
  switchboard_config cfg;
  node_context_ptr ctx;
  inbox_writer_actor writer;
  /// `pump` is walking the queue; another walk was asked for meanwhile.
  bool pumping = false;
  bool pump_again = false;
  /// Routing writes and completions go out through this (few requests).
  writer_client writes;
  /// The registry's recent answers (see `registry_ttl`).
  struct {
    std::vector<registry_entry> entries;
    caf::actor_clock::time_point listed_at;
    bool listed = false;
    /// This node's host of each butler, and when the registry named it.
    std::unordered_map<std::string,
                       std::pair<caf::actor, caf::actor_clock::time_point>>
      local_hosts;
  } registry_cache;
  /// Ingest requests waiting for their commit (bounded by max_in_flight).
  uint32_t in_flight = 0;
  /// The hot path: stored, not yet claimed (bounded by queue_capacity).
  std::deque<queued_request> queue;
  /// The request ids in `queue`: the cold path may find a queued request
  /// (still `accepted`) and offer it again; it is taken as queued.
  std::unordered_set<std::string> queued_ids;
  /// The cold path, once it has introduced itself.
  caf::actor scanner;
  /// Something stored found the queue full since the last refill: once the
  /// queue is empty, the scanner is asked to sweep at once.
  bool overflowed = false;
  /// Workers busy with a claimed message (bounded by workers): claiming
  /// and classifying; free again once the subrequests are out, or, for a
  /// plan made before the claim, once plan and claim are sent.
  uint32_t active = 0;
  /// Requests whose worker was freed that way while their claim and plan
  /// commit (bounded, with `active` and `requests`, by max_in_progress);
  /// their source-thread hold stays until they are dispatched.
  std::unordered_set<std::string> committing;
  /// Causal order (spec 001 §10.9): the source-thread key of each queued
  /// request that has one, and the keys of requests a worker holds; a
  /// queued request waits while its key is held, later ones of other keys
  /// go ahead. Both bounded by the queue and the workers.
  std::unordered_map<std::string, std::string> order_keys;
  std::unordered_map<std::string, std::string> classifying;
  std::unordered_map<std::string, uint32_t> held_keys;
  routing_settings routing;
  /// Requests whose subrequests are out (bounded by max_in_progress).
  std::unordered_map<std::string, tracked_request> requests;
  /// Segments waiting for room, per butler, oldest first: the next one goes
  /// out when that butler reports an outcome (a slot freed). Stale entries
  /// are skipped when reached and swept when they outnumber the live ones.
  std::map<std::string, std::deque<waiting_entry>> waiting;
  /// Segments with `waiting` set; workers claim no new rows while it is at
  /// `cfg.max_waiting`.
  uint32_t waiting_count = 0;
  /// Seconds ticked (the tick leases are renewed on comes every
  /// `lease_s / 3` of them).
  uint64_t ticks = 0;
  /// A circuit per target butler.
  std::map<std::string, circuit_breaker> circuits;
  std::mt19937_64 rng{std::random_device{}()};
  // -- metrics (spec 001 §12.2, spec 000 §4.1; dots as underscores) -----------
  counter* received = nullptr;
  counter* deduplicated = nullptr;
  counter* overload_rejected = nullptr;
  counter* enqueued_hot = nullptr;
  counter* enqueued_cold = nullptr;
  counter* backpressure = nullptr;
  counter* recovered = nullptr;
  counter* lease_lost = nullptr;
  counter* lifecycle_parsed = nullptr;
  counter* notify_handed = nullptr;
  counter* notify_rejected = nullptr;
  gauge* queue_depth = nullptr;
  gauge* inflight_requests = nullptr;
  histogram* process_latency = nullptr;
  counter* lifecycle_errored = nullptr;
  counter* lifecycle_cancelled = nullptr;
  counter* fallback_to_general = nullptr;
  counter* router_parse_failure = nullptr;
  counter* retries = nullptr;
  counter* dead_letters = nullptr;
  counter* budget_exhausted = nullptr;
  counter* route_timeouts = nullptr;
  counter* overload_waits = nullptr;
  gauge* segments_waiting = nullptr;
  counter* policy_reroutes = nullptr;
  gauge* in_progress = nullptr;
  metrics_registry* metrics = nullptr;
};

using switchboard_ptr = switchboard_actor::stateful_pointer<switchboard_state>;

/// The ingest boundary, the hot path and routing (see `switchboard_actor`).
switchboard_actor::behavior_type switchboard(switchboard_ptr self,
                                             switchboard_config cfg,
                                             routing_settings routing,
                                             inbox_writer_actor writer,
                                             node_context_ptr ctx);

// -- routing (actors/routing.cpp) ---------------------------------------------

/// Plans a claimed request and sends its subrequests out; frees the worker
/// once they are (calls `done_classifying`).
void route_claimed(switchboard_ptr self, inbox_ref ref, claim_result claim);

/// Plans a request from the record stored at ingest and sends its claim and
/// its plan to the writer together (one commit when they share a batch; the
/// plan is stored only for a request in progress); then as `route_claimed`.
void plan_and_claim(switchboard_ptr self, inbox_ref ref,
                    std::shared_ptr<const inbox_record> record);

/// A butler's final route_response (or an immediate error response).
void on_outcome(switchboard_ptr self, route_response r);

/// A segment's backoff passed.
void on_retry(switchboard_ptr self, const std::string& request_id,
              const std::string& segment_id);

/// Expires what is past its deadline: attempts past their route timeout,
/// requests past their wall-clock budget (the switchboard's tick).
void expire_due(switchboard_ptr self);

/// Renews the inbox leases of tracked requests.
void renew_leases(switchboard_ptr self);

/// The cluster says butler `name` has (true) or has no (false) live host:
/// holds its circuit open, or releases it.
void on_host_change(switchboard_ptr self, const std::string& name,
                    bool available);

/// Operator actions (replay, cancel, force_complete, reroute).
caf::result<std::string> operate(switchboard_ptr self,
                                 const std::string& action,
                                 const std::string& request_id,
                                 const std::string& who, const std::string& why,
                                 const std::string& arg);

/// This node's host of `butler` as the registry named it less than
/// `registry_ttl` ago, or null.
caf::actor known_host(switchboard_ptr self, const std::string& butler);

/// Keeps a host the registry named, if it is on this node: the registry
/// names this node's host first, so the answer stays the same until the
/// butler restarts (a remote answer rotates, and is not kept).
void remember_host(switchboard_ptr self, const std::string& butler,
                   const caf::actor& hdl);

/// Drops the kept host of `butler` (a call to it failed).
void forget_host(switchboard_ptr self, const std::string& butler);

/// Hands a notify.v1 to the messenger; `done` gets its response.
void hand_to_messenger(switchboard_ptr self, std::string notify,
                       std::function<void(route_response)> done);

/// Frees the classification worker of `request_id` (and the hold on its
/// source thread) and pumps the hot path.
void done_classifying(switchboard_ptr self, const std::string& request_id);

/// Frees the worker of `request_id` while its claim and plan commit (the
/// rules router's plan is made: nothing is left for a worker to do); the
/// request counts as committing until `done_classifying`.
void free_worker(switchboard_ptr self, const std::string& request_id);

/// Offers a stored message to the hot path; false when the queue is full.
/// `order_key` names its source thread ("" = none): messages with the same
/// key are classified and dispatched one at a time, in the order offered
/// (spec 001 §10.9), while other keys proceed in parallel.
bool offer(switchboard_ptr self, inbox_ref ref, std::string order_key = {},
           std::shared_ptr<const inbox_record> record = nullptr);

/// The causal-order key of a request: channel, endpoint and source thread,
/// or "" when the channel names no thread.
std::string order_key_of(const request_context& ctx);

/// Starts workers while there is queued work and room.
void pump(switchboard_ptr self);

/// The ingest boundary for one record or a batch (both `ingest_atom`
/// handlers): admission per record, one writer request for the admitted
/// ones, then `done` with every record's result in order.
void ingest_records(switchboard_ptr self, std::vector<inbox_record> recs,
                    std::function<void(std::vector<append_result>&)> done);

} // namespace butlers
