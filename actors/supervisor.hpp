#pragma once

#include <cstdint>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"

namespace butlers {

struct supervisor_state {
  static inline const char* name = "supervisor";
  /// The node's settings, as validated at start.
  node_settings settings;
  node_context_ptr ctx;
  /// The group; all null while it waits for a restart.
  inbox_writer_actor writer;
  switchboard_actor switchboard;
  inbox_scanner_actor scanner;
  registry_actor registry;
  db_reader_actor reader;
  std::vector<butler_actor> butlers;
  thread_directory_actor threads;
  /// One per enabled `[[connector]]` (switchboard nodes only).
  std::vector<connector_actor> connectors;
  /// Connector heartbeats and rollups (switchboard nodes only).
  connector_stats_actor connector_stats;
  /// The retention of people's data (switchboard nodes with `[retention]
  /// enabled`).
  retention_actor retention;
  /// The tool server of this node's sessions.
  tool_server_actor tools;
  /// Consecutive restarts, for the backoff.
  uint32_t restarts = 0;
  /// A restart is scheduled (children of the old group may still report
  /// their exits).
  bool restarting = false;
};

/// Starts the inbox writer, switchboard, scanner, registry, the butlers
/// this node hosts and (with the switchboard) the connectors as one group (they
/// hold each other's handles) and restarts the group after any abnormal exit,
/// after 100 ms · 2^n (capped at 10 s) with ±50 % jitter. Publishes the current
/// switchboard and registry in the node context for the HTTP surface.
supervisor_actor::behavior_type supervisor(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  node_settings settings, node_context_ptr ctx);

} // namespace butlers
