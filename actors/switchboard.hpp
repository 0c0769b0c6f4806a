#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "actors/writer_client.hpp"
#include "runtime/admission.hpp"
#include "runtime/config.hpp"
#include "runtime/fanout.hpp"
#include "runtime/host_cache.hpp"
#include "runtime/hot_queue.hpp"
#include "runtime/request_tracker.hpp"
#include "runtime/switchboard_metrics.hpp"
#include "runtime/switchboard_trace.hpp"

namespace butlers {

/// How long the switchboard reuses the registry's answers: the entries the
/// router plans with, and this node's host of each butler. (Asking for them
/// was three calls per message; the registry changes when butlers start,
/// stop or a node comes or goes, and a call to a host that is gone fails
/// and is asked again.)
constexpr auto registry_ttl = std::chrono::milliseconds{100};

/// How requests become plans and what they may spend, and what the ingest
/// boundary lets in (`[rate_limits]`).
struct routing_settings {
  router_config router;
  std::vector<policy_config> policies;
  rate_limits_config rate_limits;
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
  /// The registry's recent answers (see `registry_ttl`) and the hosts
  /// whose transport failed.
  host_cache<butler_actor> hosts{registry_ttl};
  /// Ingest requests waiting for their commit (bounded by max_in_flight).
  std::optional<ingest_admission> admission;
  /// Token buckets per sender and per connector, asked before admission
  /// (`[rate_limits]`, bounded by `max_buckets`).
  std::optional<rate_limiter> limiter;
  /// The hot path: stored, not yet claimed (bounded by queue_capacity),
  /// and the requests its workers hold.
  std::optional<hot_queue> hot;
  /// The cold path, once it has introduced itself.
  inbox_scanner_actor scanner;
  /// Something stored found the queue full since the last refill: once the
  /// queue is empty, the scanner is asked to sweep at once.
  bool overflowed = false;
  routing_settings routing;
  /// Requests whose subrequests are out: their fanout, retries, waits,
  /// budgets and circuits (bounded by max_in_progress).
  std::optional<request_tracker> tracker;
  /// Seconds ticked (the tick leases are renewed on comes every
  /// `lease_s / 3` of them).
  uint64_t ticks = 0;
  switchboard_metrics metrics;
  /// The requests' spans (no-ops with tracing off).
  switchboard_tracing tracing;
  /// Clean shutdown: the inbox leases were handed back; none is renewed
  /// and the cold path offers no more rows.
  bool released = false;
};

using switchboard_ptr = switchboard_actor::stateful_pointer<switchboard_state>;

/// The ingest boundary, the hot path and routing (see `switchboard_actor`).
switchboard_actor::behavior_type switchboard(switchboard_ptr self,
                                             switchboard_config cfg,
                                             routing_settings routing,
                                             inbox_writer_actor writer,
                                             node_context_ptr ctx);

/// Rate limits (switchboard_rate_limit.cpp): refuses, in `b.out`, each
/// record of `recs` over its sender's or its connector's limit (admission
/// then skips it), counts it, and tells a limited sender once.
void rate_limit_records(switchboard_ptr self, ingest_batch& b,
                        const std::vector<inbox_record>& recs);

/// The error of a record's failed ingest for a single-record answer (a
/// rate-limit refusal keeps its Retry-After).
caf::error ingest_error(append_result& r);

/// Clean shutdown (`drain_atom`, defined in switchboard_drain.cpp): releases
/// the inbox leases of every request tracked, fenced by token; answers how
/// many rows were released.
caf::result<uint32_t> release_inbox_leases(switchboard_ptr self);

} // namespace butlers
