#pragma once

// The framework a connector's source is written against (DESIGN.md
// "connector"): a source reads or receives one channel and turns what it
// gets into `ingest.v1` envelopes; a sink takes each envelope through the
// canonical ingest path (the same validation, dedupe, admission and "answer
// only after the commit" as POST /v1/ingest) and tells the source what
// became of it. Sources run on a thread of their own (a detached actor) and
// may block; nothing here knows CAF, so sources are unit-tested against an
// in-memory sink.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace butlers {

// -- what became of a submitted envelope --------------------------------------

/// The outcome of one submitted envelope.
enum class submit_status : uint8_t {
  /// Stored: the inbox row is committed.
  accepted,
  /// A duplicate of something stored; acknowledged like `accepted`.
  deduped,
  /// Not a valid `ingest.v1` envelope (or not this connector's identity):
  /// retrying cannot help. Counted `invalid`; the source skips it.
  invalid,
  /// Nothing stored: the database is down, the node drains, or the
  /// switchboard restarts. Retry later (counted `errors`).
  unavailable,
  /// Nothing stored: `max_in_flight` envelopes of this connector wait for
  /// their commit already, or the connector is over its rate limit
  /// (counted `refused`). Retry when one finished.
  refused,
  /// Nothing stored: the sender is over its rate limit
  /// (runtime/rate_limit.md). Settled: the source forgets the envelope (a
  /// Maildir quarantines the mail), and the sender was told once, through
  /// the messenger, when it is taken again.
  rate_limited,
};

/// "accepted", "deduped", ...
const char* to_string(submit_status x);

/// What a sink answers for one envelope.
struct submit_outcome {
  submit_status status = submit_status::unavailable;
  /// accepted, deduped: the canonical request id.
  std::string request_id;
  /// invalid, unavailable, refused: why (never the envelope's content).
  std::string message;

  /// The source may forget the envelope: it is stored, or can never be.
  bool settled() const {
    return status == submit_status::accepted || status == submit_status::deduped
           || status == submit_status::invalid
           || status == submit_status::rate_limited;
  }
};

// -- stopping -----------------------------------------------------------------

/// The stop signal of one running source: raised once when its connector
/// stops (node shutdown, group restart). Sleeps end early when it is
/// raised; `flag()` is what a blocking HTTP call polls to cancel itself.
class connector_stop {
 public:
  void raise() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      flag_ = true;
    }
    cv_.notify_all();
  }

  bool raised() const {
    return flag_.load();
  }

  const std::atomic<bool>* flag() const {
    return &flag_;
  }

  /// Sleeps up to `d`; false (at once) when the signal is or gets raised.
  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> guard{mtx_};
    return !cv_.wait_for(guard, d, [this] {
      return flag_.load();
    });
  }

 private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::atomic<bool> flag_{false};
};

// -- the sink -----------------------------------------------------------------

struct approval_mail;

/// What became of a mail offered as the answer to an approval question
/// (`connector_sink::answer_approval`).
enum class approval_reply : uint8_t {
  /// It names no question: an ordinary message, submit it.
  not_an_answer,
  /// It was the answer (stored), a refused one (not the starter), or came
  /// after the question was decided: nothing to submit, the source may
  /// forget it.
  settled,
  /// Nothing decided now (the database or the tool server is away): keep
  /// it and offer it again later.
  later,
};

/// What a source counts by itself, without submitting anything.
enum class source_event : uint8_t {
  /// An event of a kind the connector does not take (a Telegram
  /// `callback_query`, a message without text): acknowledged at the source
  /// (counted received and ignored).
  ignored,
  /// Input the source cannot read (a malformed Update, a line too long):
  /// skipped, logged with where it was, never retried (counted received and
  /// invalid).
  invalid,
  /// The source's upstream failed (a getUpdates error, an unreadable
  /// directory); it retries later (counted errors).
  failed,
  /// A message whose attachment is over a cap (runtime/attachments.md):
  /// refused with a message to its sender, nothing of it stored (counted
  /// received and attachments_refused).
  attachment_refused,
};

/// Reading a checkpoint: its value, none stored yet, or the database did
/// not answer.
struct checkpoint_read {
  /// False when the database did not answer (retry later).
  bool ok = false;
  /// The stored value; empty optional when none is stored.
  std::optional<std::string> value;
};

/// One envelope for `connector_sink::submit_all`.
struct submission {
  /// `ingest.v1` JSON text.
  std::string envelope;
  /// When not empty, the identity of an envelope that has none of its own
  /// (no Telegram or email event id, no `control.idempotency_key`): it
  /// replaces the time-bucketed content hash as the dedupe key, so a replay
  /// after a restart finds the first copy however much later it comes.
  std::string dedupe_hint;
};

/// How a source reaches the node. Every call may block (a source runs on a
/// thread of its own); all are safe from any thread.
class connector_sink {
 public:
  virtual ~connector_sink() = default;

  /// Validates each envelope as POST /v1/ingest does and submits the valid
  /// ones together, in order (one trip to the switchboard, so one source's
  /// envelopes keep their order); returns once every one is committed or
  /// refused, one outcome per submission, in order. Counts each as
  /// received. At most the connector's `max_in_flight` are taken at once:
  /// the ones beyond come back `refused` (submit them again later).
  virtual std::vector<submit_outcome>
  submit_all(std::vector<submission> batch) = 0;

  /// One envelope; see `submit_all`.
  submit_outcome submit(std::string envelope, std::string dedupe_hint = {}) {
    std::vector<submission> one;
    one.push_back(submission{std::move(envelope), std::move(dedupe_hint)});
    return submit_all(std::move(one)).at(0);
  }

  /// Counts what the source handled by itself (see `source_event`).
  virtual void count(source_event what, uint64_t n = 1) = 0;

  /// The checkpoint stored under `key` for this connector
  /// (`connector_checkpoints`).
  virtual checkpoint_read load_checkpoint(const std::string& key) = 0;

  /// Stores `value` as the checkpoint under `key` for this connector; true
  /// once committed.
  virtual bool store_checkpoint(const std::string& key,
                                const std::string& value)
    = 0;

  /// The connector's stop signal.
  virtual connector_stop& stop() = 0;

  /// Offers a mail that replies to a question's mail with `approve` or
  /// `deny` to the node's approvals (runtime/approvals.md): answered,
  /// refused or told it was decided already, or not an answer at all.
  virtual approval_reply answer_approval(const approval_mail& m) {
    (void)m;
    return approval_reply::not_an_answer;
  }

  /// Hands a notify.v1 (JSON text) to the messenger through the
  /// switchboard, as a butler's reply goes: true once the messenger has
  /// it durably (it then delivers it, retrying, like any reply). How a
  /// source tells a person what it refused.
  virtual bool deliver(std::string notify) {
    (void)notify;
    return false;
  }
};

// -- the source ---------------------------------------------------------------

/// One connector's source of envelopes: a Telegram long poll, a JSONL
/// file, a Maildir. `run` is called on a dedicated thread.
class connector_source {
 public:
  virtual ~connector_source() = default;

  /// Reads and submits until `sink.stop()` is raised, then returns
  /// promptly (poll the stop flag, sleep with `stop().sleep_for`, pass
  /// `stop().flag()` to blocking HTTP calls). Returning earlier means the
  /// source gave up for good (e.g. Telegram refused the token): log why
  /// first. An exception is logged and the source is run again after a
  /// backoff.
  virtual void run(connector_sink& sink) = 0;
};

} // namespace butlers
