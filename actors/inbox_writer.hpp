#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/node_status.hpp"

namespace butlers {

struct inbox_writer_state {
  static inline const char* name = "inbox_writer";
  /// The database; disconnected while the database is unreachable.
  std::unique_ptr<inbox_store> store;
  /// What status_atom reports.
  db_status status;
  /// The batch being collected, and who waits for each of its elements.
  inbox_store::batch batch;
  std::vector<caf::typed_response_promise<append_result>> append_waiters;
  std::vector<caf::typed_response_promise<claim_result>> claim_waiters;
  std::vector<caf::typed_response_promise<bool>> complete_waiters;
  /// A flush_atom is in the mailbox.
  bool flush_scheduled = false;
  /// Delay before the next connection attempt.
  caf::timespan backoff{std::chrono::milliseconds{100}};
  /// A connect_atom is pending (avoids stacking timers).
  bool connect_scheduled = false;
  /// When partitions were last maintained.
  std::chrono::steady_clock::time_point last_maintenance;
  database_config cfg;
  node_context_ptr ctx;
  // -- metrics
  // -----------------------------------------------------------------
  counter* commits = nullptr;
  counter* appended = nullptr;
  counter* claimed = nullptr;
  counter* completed = nullptr;
  counter* unavailable = nullptr;
  histogram* batch_sizes = nullptr;
  histogram* flush_ms = nullptr;
};

/// Spawn detached: every handler may block in libpqxx. `owner` names this
/// node in leases; claims hold their lease for `lease_s` seconds.
inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, std::string owner, uint32_t lease_s,
  node_context_ptr ctx);

} // namespace butlers
