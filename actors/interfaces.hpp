#pragma once

// The protocol map: every typed actor interface of Butlers in one header, one
// short comment per handler, self-messages marked INTERNAL. Clients and tests
// include this without the implementations.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/type_ids.hpp"

namespace butlers {

// -- persistence
// ---------------------------------------------------------------

/// One database connection of the inbox writer. Runs detached (blocking
/// libpqxx): connects (applying migrations; connection 0 also maintains
/// partitions), reports up/down to its writer, reconnects with backoff, and
/// writes each batch it is given in one transaction.
using inbox_connection_actor = caf::typed_actor<
  /// Writes the batch in one transaction; `database_unavailable` when the
  /// connection broke (nothing of the batch was acknowledged).
  caf::replies_to<write_atom, write_batch>::with<write_result>,
  /// INTERNAL: (re)connects; re-armed with backoff on failure.
  caf::reacts_to<connect_atom>,
  /// INTERNAL: periodic health probe and partition maintenance.
  caf::reacts_to<caf::tick_atom>>;

/// The persistence actor: the only writer of inbox and lifecycle rows.
/// Cooperative and non-blocking itself, it owns `database.writer_connections`
/// connection actors and group-commits: requests accumulate while every
/// connection is busy, and the moment one is free it takes everything
/// pending (up to `database.max_batch`) as one transaction. Each caller is
/// answered only after the commit. With no connection up it answers
/// `database_unavailable` at once.
using inbox_writer_actor = caf::typed_actor<
  /// Reports connection and migration health.
  caf::replies_to<status_atom>::with<db_status>,
  /// Stores a validated request (or finds its duplicate); durable on reply.
  caf::replies_to<append_atom, inbox_record>::with<append_result>,
  /// Claims a row: `accepted` (or `progress` with an expired lease) →
  /// `progress` with a lease and a new fencing token.
  caf::replies_to<claim_atom, inbox_ref>::with<claim_result>,
  /// Moves a claimed row to a terminal state if its token still matches;
  /// replies false when the lease was lost.
  caf::replies_to<complete_atom, completion>::with<bool>,
  /// INTERNAL: dispatches pending work (queued behind current messages).
  caf::reacts_to<flush_atom>,
  /// INTERNAL: connection `index` went up (true) or down (false, reason).
  caf::reacts_to<link_atom, uint32_t, bool, std::string>>;

// -- switchboard
// ---------------------------------------------------------------

/// The ingest boundary: admission (`switchboard.max_in_flight`), durable
/// append through the writer, then the hot path: a bounded queue of
/// `switchboard.queue_capacity` drained by `switchboard.workers` concurrent
/// workers, each of which claims its row before any work.
using switchboard_actor = caf::typed_actor<
  /// Accepts a validated request; replies once it is durable.
  caf::replies_to<ingest_atom, inbox_record>::with<append_result>,
  /// Cold path: offers rows found by the scanner; replies how many fit the
  /// queue (the rest stay in the database for the next sweep).
  caf::replies_to<enqueue_atom, std::vector<inbox_ref>>::with<uint32_t>>;

/// The cold path: every `scanner_interval_s` (and once at start) finds
/// `accepted` rows older than `scanner_grace_s` and `progress` rows whose
/// lease expired, and offers them to the switchboard. Reads only, detached,
/// with its own connection.
using inbox_scanner_actor = caf::typed_actor<
  /// INTERNAL: runs one sweep and schedules the next.
  caf::reacts_to<scan_atom>>;

// -- lifecycle
// -----------------------------------------------------------------

/// Starts the node's long-lived actors as one group (writer, switchboard,
/// scanner), and restarts the group after any abnormal exit with jittered
/// exponential backoff. Children are linked: an exit sent to the supervisor
/// takes them down with it (the node's shutdown path).
using supervisor_actor = caf::typed_actor<
  /// INTERNAL: restarts the group after its backoff.
  caf::reacts_to<restart_atom>>;

} // namespace butlers
