#pragma once

// butlers-client: the command line on the client library
// (runtime/client/README.md). Exit codes are `cli_exit`.

namespace butlers::client {

/// The CLI's exit codes.
enum cli_exit : int {
  /// Everything submitted is durable on the node (inspect: found).
  exit_ok = 0,
  /// A runtime failure: a file or the spool could not be read or written,
  /// the node could not be reached for a direct read.
  exit_runtime = 1,
  /// Usage error.
  exit_usage = 2,
  /// One or more operations failed: the node rejected them (4xx) or kept
  /// answering 429/503/504 past the retries (inspect: not found).
  exit_failed = 3,
  /// The deadline passed with operations undelivered (with `--spool` they
  /// stay spooled and the next run sends them).
  exit_undelivered = 4,
};

/// Runs the CLI; returns its exit code.
int run_cli(int argc, char** argv);

} // namespace butlers::client
