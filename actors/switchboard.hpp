#pragma once

#include <cstdint>
#include <deque>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/node_status.hpp"

namespace butlers {

struct switchboard_state {
  static inline const char* name = "switchboard";
  switchboard_config cfg;
  node_context_ptr ctx;
  inbox_writer_actor writer;
  /// Ingest requests waiting for their commit (bounded by max_in_flight).
  uint32_t in_flight = 0;
  /// The hot path: stored, not yet claimed (bounded by queue_capacity).
  std::deque<inbox_ref> queue;
  /// Workers busy with a claimed message (bounded by workers).
  uint32_t active = 0;
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
};

/// The ingest boundary and the hot path (see `switchboard_actor`).
switchboard_actor::behavior_type switchboard(
  switchboard_actor::stateful_pointer<switchboard_state> self,
  switchboard_config cfg, inbox_writer_actor writer, node_context_ptr ctx);

} // namespace butlers
