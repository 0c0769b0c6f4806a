#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/openssl_thread.hpp"

namespace butlers {

struct inbox_connection_state {
  static inline const char* name = "inbox_connection";
  /// First, so it is destroyed last: after the connection.
  openssl_thread_release openssl;
  /// Which of the writer's connections this is; 0 also maintains
  /// partitions.
  uint32_t index = 0;
  std::unique_ptr<inbox_store> store;
  database_config cfg;
  /// Whom to tell about going up or down.
  inbox_writer_actor writer;
  /// Delay before the next connection attempt.
  caf::timespan backoff{std::chrono::milliseconds{100}};
  /// A connect_atom is pending (avoids stacking timers).
  bool connect_scheduled = false;
  /// When partitions were last maintained.
  std::chrono::steady_clock::time_point last_maintenance;
};

/// Spawn detached: every handler may block in libpqxx. `owner` names this
/// node in leases; claims hold their lease for `lease_s` seconds.
inbox_connection_actor::behavior_type inbox_connection(
  inbox_connection_actor::stateful_pointer<inbox_connection_state> self,
  uint32_t index, database_config cfg, std::string owner, uint32_t lease_s,
  inbox_writer_actor writer);

} // namespace butlers
