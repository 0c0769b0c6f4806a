#pragma once

// A Maildir (https://cr.yp.to/proto/maildir.html) as the maildir connector
// reads it: mail a delivery agent (fetchmail, getmail, offlineimap,
// postfix, ...) wrote to `new/` is submitted through the canonical ingest
// path, moved to `cur/` with the Seen flag only after its commit, and a
// file that is not a usable mail goes to `quarantine/`, kept for a person
// to look at. No actors and no threads here: the connector calls
// `maildir_poller::poll_once` from a thread that may block.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/attachments.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// The files of one Maildir. Every method is a few system calls; none
/// throws.
class maildir {
 public:
  /// Largest file read; a bigger one is quarantined unread.
  static constexpr size_t default_max_bytes = size_t{32} << 20;

  explicit maildir(std::string path, size_t max_bytes = default_max_bytes);

  const std::string& path() const {
    return path_;
  }

  /// Creates `new/`, `cur/`, `tmp/` and `quarantine/` where missing (a
  /// delivery agent creates the first three, but a fresh install may start
  /// the node first). "" on success, else why not (path + strerror).
  std::string prepare() const;

  /// Up to `max` names of regular files in `new/`, oldest first (Maildir
  /// names start with the delivery time; ties and odd names by name),
  /// without dot files and without names `skip` answers true for. Files in
  /// `tmp/` are still being written and never looked at. `error`, when
  /// given, gets "" or why `new/` could not be read.
  std::vector<std::string> list_new(
    size_t max, const std::function<bool(const std::string&)>& skip = {},
    std::string* error = nullptr) const;

  /// What `read` found.
  struct file {
    /// The bytes, when read.
    std::optional<std::string> bytes;
    /// The file is gone (another reader took it): nothing to do.
    bool vanished = false;
    /// Why it could not be read (too large, I/O error); quarantine it.
    std::string error;
  };

  /// Reads `new/<name>` whole, up to the size limit.
  file read(const std::string& name) const;

  /// Moves `new/<name>` to `cur/<name>:2,S` (the Seen flag added to any
  /// flags the name already carries) with one rename(2). "" on success.
  std::string mark_seen(const std::string& name) const;

  /// Moves `new/<name>` to `quarantine/<name>` with one rename(2) and
  /// writes `reason` beside it as `quarantine/<name>.reason` (best effort;
  /// the mail is kept either way). "" on success.
  std::string quarantine(const std::string& name,
                         const std::string& reason) const;

  /// The name `mark_seen` gives `name` in `cur/`.
  static std::string seen_name(const std::string& name);

 private:
  std::string path_;
  size_t max_bytes_;
};

/// What became of a submitted mail, as far as the poller cares (the
/// connector maps the ingest path's answer onto it).
enum class mail_submit {
  /// Stored, now or before (accepted or deduplicated): move it to `cur/`.
  stored,
  /// Refused for good (not a valid envelope): quarantine it.
  invalid,
  /// Not stored now (database down, node draining, in-flight limit): leave
  /// it in `new/` and try again on a later pass.
  later,
};

/// A submission's verdict and its detail (request id, or why not).
struct mail_submit_result {
  mail_submit verdict = mail_submit::later;
  std::string detail;
};

/// Submits `ingest.v1` envelopes together, in order, and blocks until the
/// ingest path answers each (after the commit when it is stored); one
/// result per envelope, in order.
using mail_submit_fn = std::function<std::vector<mail_submit_result>(
  const std::vector<std::string>& envelopes)>;

struct mail_message;
struct mail_ingest_options;

/// Looks at a parsed mail before it is submitted: nullopt submits it as
/// usual; a result settles it as a submission's would (`stored`: handled,
/// moved to `cur/`; `later`: left in `new/` for a later pass). What
/// answers an approval question by mail (runtime/approvals.md) instead of
/// becoming a request.
using mail_answer_fn = std::function<std::optional<mail_submit_result>(
  const mail_message& m)>;

struct mail_attachment;

/// Stores a mail's file (runtime/attachment_store.hpp): its reference, or
/// nullopt with `*error` set (the database failed: the mail waits in
/// `new/` for a later pass). Blocks.
using mail_store_fn = std::function<std::optional<
  attachment_ref>(const mail_attachment& file, std::string* error)>;

/// The poller's counters; each points at a counter that outlives it.
struct maildir_metrics {
  /// Files submitted (each try, a retry after `unavailable` included).
  counter* submitted = nullptr;
  /// Files moved to `cur/` after their commit (accepted or deduped).
  counter* seen = nullptr;
  /// Files moved to `quarantine/`.
  counter* quarantined = nullptr;
  /// Submissions answered `later`: the file stays in `new/`.
  counter* deferred = nullptr;
  /// Files that could be neither moved nor quarantined (permissions): left
  /// in `new/` and skipped until the node restarts.
  counter* stuck = nullptr;
};

/// Registers the counters of connector `connector` in `reg`:
/// `butlers_connector_maildir_files_total{connector,outcome}` with outcome
/// `submitted`, `seen`, `quarantined`, `deferred`, `stuck`.
maildir_metrics register_maildir_metrics(metrics_registry& reg,
                                         const std::string& connector);

/// What one `poll_once` did.
struct maildir_poll_report {
  size_t listed = 0;
  size_t seen = 0;
  size_t quarantined = 0;
  /// Of `quarantined`, the files never submitted (unreadable, not a mail).
  size_t unreadable = 0;
  size_t deferred = 0;
  size_t stuck = 0;
  /// Why `new/` could not be listed ("" when it could).
  std::string error;
};

/// The maildir connector's logic: one pass over `new/` per call.
class maildir_poller {
 public:
  /// `mailbox` is `source.endpoint_identity` of the envelopes; at most
  /// `in_flight` of them are submitted at once; `now_us` gives the time
  /// for mails without a usable Date.
  maildir_poller(maildir dir, std::string mailbox, size_t in_flight,
                 mail_submit_fn submit, maildir_metrics metrics,
                 std::function<int64_t()> now_us);

  /// Takes up to `batch` files from `new/`, oldest first, `in_flight` at a
  /// time: parses each (a file that is not a mail is quarantined with the
  /// reason), submits their envelopes together, and moves each `stored`
  /// one to `cur/`; `invalid` quarantines it; `later` leaves it in `new/`
  /// and ends the pass (the rest waits for the next one). Stops between
  /// groups when `stop` is set.
  maildir_poll_report poll_once(size_t batch,
                                const std::atomic<bool>* stop = nullptr);

  const maildir& dir() const {
    return dir_;
  }

  /// Every parsed mail goes to `f` first (see `mail_answer_fn`). Set it
  /// before the first `poll_once`.
  void on_answer(mail_answer_fn f) {
    answer_ = std::move(f);
  }

  /// A mail's files are stored through `store` under `caps` before its
  /// envelope is submitted, and named in `payload.attachments`; a file
  /// over a cap is left out and named in the text instead, with the cap.
  /// Without a store every file is left out that way. Set it before the
  /// first `poll_once`.
  void on_files(mail_store_fn store, attachment_limits caps) {
    store_ = std::move(store);
    caps_ = caps;
  }

 private:
  /// What became of one file.
  enum class step {
    seen,
    quarantined,
    /// Quarantined without a submission (unreadable, not a mail).
    unreadable,
    deferred,
    stuck,
    vanished,
  };

  /// `s`, as `unreadable` when it is `quarantined`.
  static step unreadable(step s);

  /// A file read and parsed, ready to submit.
  struct ready_mail {
    std::string name;
    std::string envelope;
  };

  /// Reads and parses `name`: its envelope, or what became of it (also
  /// when `answer_` settled it).
  std::variant<ready_mail, step> prepare(const std::string& name);
  /// Stores the files of `m` within the caps into `opts`; false with
  /// `*error` when a store failed (the mail waits for a later pass).
  bool take_files(const mail_message& m, mail_ingest_options& opts,
                  std::string* error);
  /// Carries out the verdict on a submitted file.
  step settle(const std::string& name, const mail_submit_result& out);
  /// Submits one group of files and settles each into `report`; false
  /// when the pass must end (a `later`).
  bool submit_group(const std::vector<std::string>& names,
                    maildir_poll_report& report);
  step move_to_quarantine(const std::string& name, const std::string& reason);
  step give_up(const std::string& name, const std::string& why);

  maildir dir_;
  std::string mailbox_;
  size_t in_flight_;
  mail_submit_fn submit_;
  mail_answer_fn answer_;
  mail_store_fn store_;
  attachment_limits caps_;
  maildir_metrics metrics_;
  std::function<int64_t()> now_us_;
  /// Files that could not be moved out of `new/`: never submitted again
  /// by this process (so a read-only directory cannot make a mail loop
  /// forever). At most `max_stuck` names; beyond it the set starts over.
  std::set<std::string> stuck_;
  static constexpr size_t max_stuck = 10000;
};

} // namespace butlers
