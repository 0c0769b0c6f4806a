#pragma once

#include <string>

#include "runtime/metrics.hpp"

namespace butlers {

/// The metrics of one connector, labelled `connector="<name>"`
/// (runtime/README.md "Metrics"). Every member is created in the registry
/// once and shared by
/// whoever counts for the connector: its actor, its source's thread, the
/// HTTP threads of its routes. Safe from any thread.
struct connector_metrics {
  /// Envelopes (updates, lines, mails) the connector got, whatever became
  /// of them.
  counter* received = nullptr;
  /// Stored: committed in the inbox.
  counter* accepted = nullptr;
  /// Duplicates of something stored (acknowledged too).
  counter* deduped = nullptr;
  /// Input that is not a valid envelope: answered or skipped, never stored
  /// and never retried.
  counter* invalid = nullptr;
  /// Events of kinds the connector does not take, acknowledged unstored.
  counter* ignored = nullptr;
  /// Messages refused because an attachment was over a cap
  /// (runtime/attachments.md); the sender was told.
  counter* attachments_refused = nullptr;
  /// Refused because `max_in_flight` envelopes waited for their commit.
  counter* refused = nullptr;
  /// Submissions that failed for want of the database, the switchboard or
  /// the upstream service (each retried later by whoever sent them).
  counter* errors = nullptr;
  /// Envelopes submitted and not yet acknowledged.
  gauge* in_flight = nullptr;
  /// 1 while the connector runs; 0 once its source gave up (e.g. Telegram
  /// refused the token).
  gauge* up = nullptr;

  /// The metrics of connector `name` in `reg` (created on first use).
  static connector_metrics of(metrics_registry& reg, const std::string& name);
};

} // namespace butlers
