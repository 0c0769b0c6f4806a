#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <pqxx/connection>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/openssl_thread.hpp"

namespace butlers {

// -- one reader connection ----------------------------------------------------

struct db_reader_state {
  static inline const char* name = "db_reader";
  /// First, so it is destroyed last: after the connection.
  openssl_thread_release openssl;
  std::string url;
  session_deadlines deadlines;
  std::unique_ptr<pqxx::connection> conn;
  ~db_reader_state();
};

/// Read-only named statements on a connection of its own, whose session
/// runs with `deadlines`: a statement they cancel is answered `timeout`.
/// Spawn detached: every call blocks on libpqxx.
db_reader_actor::behavior_type db_reader(
  db_reader_actor::stateful_pointer<db_reader_state> self, std::string url,
  session_deadlines deadlines);

// -- the node's readers
// ---------------------------------------------------------

struct db_reader_pool_state {
  static inline const char* name = "db_reader_pool";
  struct waiting {
    named_statement statement;
    caf::typed_response_promise<named_result> promise;
  };
  /// The idle connections; a read goes to one of them, or waits.
  std::vector<db_reader_actor> idle;
  /// Reads that found no idle connection, oldest first; bounded by
  /// `capacity`.
  std::deque<waiting> queue;
  size_t capacity = 0;
  counter* rejected = nullptr;
  counter* timeouts = nullptr;
  gauge* queued = nullptr;
};

/// The `[database] pool_size` reader connections behind one handle. A read
/// goes to an idle connection, so a slow one holds up only its own; with
/// none idle it waits in a FIFO of `reader_queue` entries, beyond which it
/// is refused `overload_rejected` (counted). Event-based: the connections
/// are detached actors of their own, linked to it.
db_reader_actor::behavior_type db_reader_pool(
  db_reader_actor::stateful_pointer<db_reader_pool_state> self,
  database_config cfg, node_context_ptr ctx);

} // namespace butlers
