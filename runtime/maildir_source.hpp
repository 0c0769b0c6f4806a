#pragma once

// The `maildir` connector's source (runtime/connector_source.hpp): polls
// `path/new/` every `poll_ms` and takes each mail through the canonical
// ingest path with `maildir_poller` (runtime/maildir.hpp).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "runtime/approvals.hpp"
#include "runtime/attachment_store.hpp"
#include "runtime/config.hpp"
#include "runtime/connector_source.hpp"
#include "runtime/mail.hpp"
#include "runtime/maildir.hpp"

namespace butlers {

/// What became of a submission, for the poller: accepted and deduped are
/// stored, invalid is for good, the rest (unavailable, refused) is for a
/// later pass.
mail_submit_result mail_verdict(const submit_outcome& out);

/// The approval answer a mail may be (runtime/approvals.md): a reply (it
/// has In-Reply-To or References) whose first non-empty line is `approve`
/// or `deny`; nullopt for anything else. `mailbox` is the connector's
/// endpoint identity (part of the mail's dedupe key).
std::optional<approval_mail> approval_mail_of(const mail_message& m,
                                              const std::string& mailbox);

/// How a maildir source settles what `connector_sink::answer_approval`
/// answered: nullopt (submit it as a message), stored, or later.
std::optional<mail_submit_result> approval_verdict(approval_reply r);

class maildir_source final : public connector_source {
 public:
  /// Files taken in one pass; a full pass is followed by the next one at
  /// once, a shorter one by `poll_ms` of sleep.
  static constexpr size_t batch = 64;

  /// `cfg` is a validated `maildir` connector; its counters go to
  /// `metrics`. Mails' files go to `store` under its caps (none: they are
  /// left out, and named in the text).
  maildir_source(connector_config cfg, maildir_metrics metrics,
                 std::shared_ptr<attachment_store> store = nullptr);

  /// Creates the Maildir's directories where missing (a failure throws,
  /// and the connector runs the source again after a backoff), then polls
  /// until the stop signal. Mails are submitted `max_in_flight` at a time
  /// (one trip to the switchboard, one group commit), each group waited
  /// for before the next.
  void run(connector_sink& sink) override;

 private:
  connector_config cfg_;
  maildir_metrics metrics_;
  std::shared_ptr<attachment_store> store_;
};

} // namespace butlers
