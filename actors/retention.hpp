#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <pqxx/connection>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/openssl_thread.hpp"
#include "runtime/retention.hpp"

namespace butlers {

struct retention_state {
  static inline const char* name = "retention";
  /// First, so it is destroyed last: after the connection.
  openssl_thread_release openssl;
  retention_config cfg;
  std::string url;
  session_deadlines deadlines;
  node_context_ptr ctx;
  /// Its own connection: the pruning never takes a writer's connection,
  /// and a slow batch holds up nothing but the next batch.
  std::unique_ptr<pqxx::connection> conn;
  /// The pass under way, if any.
  std::optional<retention_pass> pass;
  std::chrono::steady_clock::time_point pass_started;
  /// The token of the one timer that counts (older timers are no-ops).
  uint64_t timer = 0;
  counter* passes_ok = nullptr;
  counter* passes_failed = nullptr;
  histogram* batch_ms = nullptr;
};

/// Spawn detached: every batch blocks in libpqxx. Runs a pass at start
/// (once the writer has connected and migrated) and then every
/// `interval_s` after the previous pass ended: each statement of
/// runtime/retention.hpp batch by batch (`batch_rows` rows per table per
/// batch, then a pause of at least `pause_ms` that grows with the batch's
/// time so that batches fill at most `duty_pct` of the wall time, see
/// `retention_pause`), each batch its own short
/// transaction that skips rows locked elsewhere, so the writers never wait
/// for it for long. Each batch's rows are counted in
/// `butlers_retention_rows_total{table,action}`; each pass is logged per
/// table with its counts.
retention_actor::behavior_type retention(
  retention_actor::stateful_pointer<retention_state> self, retention_config cfg,
  database_config database, node_context_ptr ctx);

} // namespace butlers
