#pragma once

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/node_status.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <memory>
#include <pqxx/connection>
#include <string>

namespace butlers {

struct inbox_writer_state {
  static inline const char* name = "inbox_writer";
  ~inbox_writer_state();
  /// The connection; null while disconnected.
  std::unique_ptr<pqxx::connection> conn;
  /// What /readyz and the status handler report.
  db_status status;
  /// Delay before the next connection attempt.
  caf::timespan backoff{std::chrono::milliseconds{100}};
  /// A connect_atom is pending (avoids stacking timers).
  bool connect_scheduled = false;
  node_context_ptr ctx;
  database_config cfg;
};

/// Spawn detached: every handler may block in libpqxx.
inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, node_context_ptr ctx);

} // namespace butlers
