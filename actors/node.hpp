#pragma once

#include <string>

#include "runtime/config.hpp"

namespace butlers {

/// Process exit codes of `butlers-node` (documented in actors/README.md,
/// "Shutdown and exit codes").
enum exit_code : int {
  /// Clean run and shutdown.
  exit_ok = 0,
  /// A runtime failure: cannot bind, cannot migrate, ...
  exit_failure = 1,
  /// Bad usage or an invalid configuration.
  exit_config = 2,
  /// Shutdown exceeded `node.drain_deadline_s`; the process was ended.
  exit_drain_timeout = 3,
};

/// Runs a node until SIGINT or SIGTERM: starts the actor system with the
/// configured scheduler, the supervisor and the HTTP surface; on a signal
/// stops intake, drains within `node.drain_deadline_s` and returns.
/// SIGHUP reloads the HTTP credentials. The caller must have blocked
/// SIGINT, SIGTERM and SIGHUP in every thread (see
/// `block_shutdown_signals`) before calling.
int run_node(const node_settings& settings);

/// Applies every embedded migration to the configured database and returns.
int migrate_database(const node_settings& settings);

/// Operator replay from the command line (spec 001 §15.6): puts an errored
/// request back to 'accepted' with its request_id, resets its failed
/// subrequests, marks its dead letters replayed and audits who, when, why
/// and the result. Returns exit_ok when replayed, exit_failure when refused
/// or the database is unreachable.
int replay_request(const node_settings& settings, const std::string& request_id,
                   const std::string& who, const std::string& why);

/// Forgets one sender from the command line (runtime/forget.md): erases
/// every row that holds what they wrote, audited in forget_audit, and
/// prints the report (JSON) on stdout. Returns exit_ok when done,
/// exit_config for a bad sender, who or why, exit_failure when the
/// database failed midway (run it again: it is idempotent).
int forget_sender(const node_settings& settings, const std::string& sender,
                  const std::string& who, const std::string& why, int batch);

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, so that every
/// thread
/// spawned afterwards inherits the mask and `run_node` receives them
/// synchronously with sigwait().
void block_shutdown_signals();

} // namespace butlers
