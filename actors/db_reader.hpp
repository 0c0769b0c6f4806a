#pragma once

#include <memory>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <pqxx/connection>

#include "actors/interfaces.hpp"
#include "runtime/openssl_thread.hpp"

namespace butlers {

struct db_reader_state {
  static inline const char* name = "db_reader";
  /// First, so it is destroyed last: after the connection.
  openssl_thread_release openssl;
  std::string url;
  std::unique_ptr<pqxx::connection> conn;
  ~db_reader_state();
};

/// Read-only named statements on a connection of its own (see
/// `db_reader_actor`). Spawn detached: every call blocks on libpqxx.
db_reader_actor::behavior_type db_reader(
  db_reader_actor::stateful_pointer<db_reader_state> self, std::string url);

} // namespace butlers
