#pragma once

// The `maildir` connector's source (runtime/connector_source.hpp): polls
// `path/new/` every `poll_ms` and takes each mail through the canonical
// ingest path with `maildir_poller` (runtime/maildir.hpp).

#include <cstddef>
#include <memory>

#include "runtime/config.hpp"
#include "runtime/connector_source.hpp"
#include "runtime/maildir.hpp"

namespace butlers {

/// What became of a submission, for the poller: accepted and deduped are
/// stored, invalid is for good, the rest (unavailable, refused) is for a
/// later pass.
mail_submit_result mail_verdict(const submit_outcome& out);

class maildir_source final : public connector_source {
 public:
  /// Files taken in one pass; a full pass is followed by the next one at
  /// once, a shorter one by `poll_ms` of sleep.
  static constexpr size_t batch = 64;

  /// `cfg` is a validated `maildir` connector; its counters go to
  /// `metrics`.
  maildir_source(connector_config cfg, maildir_metrics metrics);

  /// Creates the Maildir's directories where missing (a failure throws,
  /// and the connector runs the source again after a backoff), then polls
  /// until the stop signal. Mails are submitted `max_in_flight` at a time
  /// (one trip to the switchboard, one group commit), each group waited
  /// for before the next.
  void run(connector_sink& sink) override;

 private:
  connector_config cfg_;
  maildir_metrics metrics_;
};

} // namespace butlers
