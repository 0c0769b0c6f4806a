#pragma once

// The protocol map: every typed actor interface of Butlers in one header, one
// short comment per handler, self-messages marked INTERNAL. Clients and tests
// include this without the implementations.

#include "actors/type_ids.hpp"

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace butlers {

// -- persistence
// ---------------------------------------------------------------

/// The only writer of inbox and lifecycle rows. Runs detached (blocking
/// libpqxx), owns its connection, applies migrations on connect, reconnects
/// with backoff, and answers "unavailable" at once while disconnected.
using inbox_writer_actor = caf::typed_actor<
  /// Reports connection and migration health.
  caf::replies_to<status_atom>::with<db_status>,
  /// INTERNAL: (re)connects and migrates; re-armed with backoff on failure.
  caf::reacts_to<connect_atom>,
  /// INTERNAL: periodic health probe and partition maintenance.
  caf::reacts_to<caf::tick_atom>>;

// -- lifecycle
// -----------------------------------------------------------------

/// Starts, monitors and restarts the node's long-lived actors with jittered
/// exponential backoff. Children are linked: an exit sent to the supervisor
/// takes them down with it (the node's shutdown path).
using supervisor_actor = caf::typed_actor<
  /// Returns the current inbox writer (it changes after a restart).
  caf::replies_to<status_atom>::with<inbox_writer_actor>,
  /// INTERNAL: restarts the child named by the string after its backoff.
  caf::reacts_to<restart_atom, std::string>>;

} // namespace butlers
