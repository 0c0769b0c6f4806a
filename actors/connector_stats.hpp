#pragma once

// Connector heartbeats and statistics (actors/README.md "Connector health and
// statistics"): see `connector_stats_actor` in actors/interfaces.hpp.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/connector_stats.hpp"
#include "runtime/cron.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

struct connector_stats_state {
  static inline const char* name = "connector_stats";
  connectors_config cfg;
  /// Every heartbeat and rollup statement goes through it.
  inbox_writer_actor writer;
  /// Reads the heartbeat ages for the liveness gauge.
  db_reader_actor reader;
  node_context_ptr ctx;
  /// Heartbeats handed to the writer and not yet answered: the queue that
  /// `cfg.heartbeat_queue` bounds.
  uint32_t queued = 0;
  /// This month's and next month's heartbeat partitions exist.
  bool partitions_ensured = false;
  /// "5 * * * *" (hourly rollup) and "15 0 * * *" (daily, fanout,
  /// retention), UTC.
  std::optional<cron_schedule> hourly_cron;
  std::optional<cron_schedule> daily_cron;
  /// The current timer of each kind (hourly, daily, gauge); an older
  /// timer's token no longer matches and is ignored.
  uint64_t timers[3] = {0, 0, 0};
  counter* received = nullptr;
  counter* dropped = nullptr;
  counter* failed = nullptr;
  counter* registered = nullptr;
  gauge* queue_depth = nullptr;
  gauge* by_liveness[3] = {nullptr, nullptr, nullptr};
};

/// Spawn on a switchboard node, beside the writer it writes through.
connector_stats_actor::behavior_type connector_stats(
  connector_stats_actor::stateful_pointer<connector_stats_state> self,
  connectors_config cfg, inbox_writer_actor writer, db_reader_actor reader,
  node_context_ptr ctx);

/// RFC 3339 UTC text of `t` (what a rollup's `at` is).
std::string rollup_time(std::chrono::system_clock::time_point t);

} // namespace butlers
