#pragma once

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/node_status.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <cstdint>

namespace butlers {

struct supervisor_state {
  static inline const char* name = "supervisor";
  /// The node's settings, as validated at start.
  node_settings settings;
  node_context_ptr ctx;
  /// The current inbox writer; null while it waits for a restart.
  inbox_writer_actor writer;
  /// Restarts so far, for the backoff and the metric.
  uint32_t writer_restarts = 0;
};

/// Starts the node's long-lived actors and restarts the ones that die
/// abnormally, after 100 ms · 2^n (capped at 10 s) with ±50 % jitter.
supervisor_actor::behavior_type supervisor(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  node_settings settings, node_context_ptr ctx);

} // namespace butlers
