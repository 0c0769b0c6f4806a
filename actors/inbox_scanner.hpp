#pragma once

#include <memory>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/openssl_thread.hpp"

namespace butlers {

struct inbox_scanner_state {
  static inline const char* name = "inbox_scanner";
  /// First, so it is destroyed last: after the connection.
  openssl_thread_release openssl;
  /// Its own connection: reads only, never blocks the writer's batches.
  std::unique_ptr<inbox_store> store;
  switchboard_config cfg;
  switchboard_actor switchboard;
  node_context_ptr ctx;
  counter* sweeps = nullptr;
  counter* refills = nullptr;
  /// Where the next sweep continues (Unix µs of the last row handed out);
  /// 0 starts from the oldest row.
  int64_t cursor_us = 0;
  /// The token of the one timer that counts: scheduling anew (or a refill
  /// sweep) makes older timers no-ops, so there is never more than one
  /// chain of sweeps.
  uint64_t timer = 0;
  /// Grace period of the current chain of sweeps: `scanner_grace_s`, or 0
  /// from a refill until the chain ends (nothing found, or none taken).
  uint32_t grace_s = 0;
  /// A sweep's rows are with the switchboard, awaiting its answer.
  bool offering = false;
  /// A refill arrived while offering: sweep again without grace after it.
  bool refill_pending = false;
};

/// Spawn detached: sweeps block in libpqxx. While the switchboard takes
/// rows from a sweep, the next sweep follows almost at once, after the last
/// row taken (burst drain: the spec's 50 rows per 30 s would take hours for
/// a backlog); when it takes none, or nothing is found, the cursor resets
/// and the next sweep waits `scanner_interval_s` — unless the switchboard
/// asks for a refill first: once its queue has overflowed and drained, it
/// sends `refill`, and the scanner sweeps at once without the grace
/// period, so what overflowed waits for room, not for the next interval.
inbox_scanner_actor::behavior_type inbox_scanner(
  inbox_scanner_actor::stateful_pointer<inbox_scanner_state> self,
  database_config database, switchboard_config cfg,
  switchboard_actor switchboard, node_context_ptr ctx);

} // namespace butlers
