#pragma once

// What the messenger's channel adapters may ask of the node while they
// deliver (DESIGN.md invariant 9): the source message of the request they
// answer, and the outbound ledger, which records every send to a person
// (message chunk, reaction, mail) before and after it goes out, so that a
// re-run (crash, lease expiry) skips what was sent and re-sends only what
// was in flight — the counted window. One small interface: the messenger
// implements it with requests to the database reader and the inbox writer
// (actors/delivery_services.hpp), unit tests with an in-memory fake
// (test/support/fake_delivery_services.hpp). Every call blocks: adapters
// call it from the messenger's delivery threads, never from an actor.

#include <cstdint>
#include <string>
#include <string_view>

namespace butlers {

class reaction_gate;
class typing_ticker;

/// What an outbound send is.
enum class outbound_kind : uint8_t {
  /// A chat message (one chunk of a reply or send).
  message,
  /// A lifecycle reaction on the source message (spec 001 §8).
  reaction,
  /// An email.
  mail,
};

/// "message", "reaction", "mail".
const char* to_string(outbound_kind x);

/// Where a send stands in the ledger.
enum class ledger_state : uint8_t {
  /// Never recorded.
  none,
  /// Recorded before the send; no record after it. A run that finds its key
  /// here died (or lost its lease) between the two: the send may or may not
  /// have happened, so it goes out again (the counted window).
  sending,
  /// Sent; the provider's id is kept (e.g. Telegram's message_id).
  sent,
  /// Not sent and never to be: a reaction superseded by a later state.
  skipped,
  /// Failed for good; the delivery ended as a dead letter.
  dead,
};

/// "", "sending", "sent", "skipped", "dead".
const char* to_string(ledger_state x);

/// The state `text` names (`none` for anything else).
ledger_state ledger_state_of(std::string_view text);

/// The key of one send: the request answered, the delivery's segment (the
/// messenger work item's, "notify:<idempotency_key>"), and the part of it
/// ("chunk:0", "chunk:1", "reaction", "mail").
struct outbound_key {
  std::string request_id;
  std::string segment_id;
  std::string part;
};

/// A send as the ledger records it.
struct outbound_send {
  outbound_key key;
  /// The adapter kind that sends it ("telegram", "smtp").
  std::string adapter;
  outbound_kind kind = outbound_kind::message;
  /// Reactions: the order of lifecycle states (a later state ranks higher;
  /// terminal states outrank every non-terminal one). 0 for the rest.
  int64_t rank = 0;
  /// Reactions: the emoji. "" for the rest.
  std::string value;
};

/// What an adapter does with a send, decided from the ledger.
enum class send_decision : uint8_t {
  /// Never attempted: send it.
  send,
  /// An earlier run recorded it `sending` and not after: send it again (it
  /// may arrive twice; counted as redelivered).
  resend,
  /// Already sent (or skipped): do not send.
  skip,
  /// A reaction outranked by a later state of the same message: do not
  /// send; record it `skipped`.
  supersede,
};

/// "send", "resend", "skip", "supersede".
const char* to_string(send_decision x);

/// The decision for a send of `rank` whose key the ledger held in `prior`,
/// when the highest rank among the reactions of its request (its own
/// included) is `top_rank` (reactions only; ignored for other kinds).
send_decision decide_send(outbound_kind kind, ledger_state prior, int64_t rank,
                          int64_t top_rank);

/// The answer to `ledger_begin`.
struct ledger_claim {
  /// False when the ledger could not be written: nothing may be sent now
  /// (the delivery fails retryably and runs again later).
  bool ok = false;
  std::string error;
  /// What the key held before this call.
  ledger_state prior = ledger_state::none;
  /// prior == sent: the provider's id recorded then.
  std::string provider_id;
  send_decision decision = send_decision::send;
  /// Reactions: the highest-ranked reaction of the request that is not
  /// dead (this one included) and its emoji.
  int64_t top_rank = 0;
  std::string top_value;
};

/// The answer to `ledger_end`.
struct ledger_mark {
  bool ok = false;
  std::string error;
  /// Reactions: the highest-ranked reaction of the request that is not dead,
  /// read after this record. When it outranks the one just sent, a later
  /// state arrived meanwhile and its emoji must be set again after this
  /// send (see `decide_send`).
  int64_t top_rank = 0;
  std::string top_value;
};

/// The answer to `source_payload`.
struct source_lookup {
  /// False when the database could not be asked (retry later).
  bool ok = false;
  std::string error;
  /// Whether the request's inbox row exists.
  bool found = false;
  /// The inbox row's raw_payload: the ingest.v1 body as the connector
  /// submitted it (for Telegram, payload.raw is the Update object).
  std::string raw_payload;
};

/// See the file comment. Implementations are safe to call from several
/// delivery threads at once.
class delivery_services {
 public:
  virtual ~delivery_services();

  /// The raw_payload of request `request_id`'s inbox row.
  virtual source_lookup source_payload(const std::string& request_id) = 0;

  /// Records `s` as `sending` (a key already `sent` or `skipped` stays so)
  /// and answers what the key held before and what to do (`decide_send`).
  /// Counts the decision (sends skipped, redelivered).
  virtual ledger_claim ledger_begin(const outbound_send& s) = 0;

  /// Records the outcome of `s` after the send: `sent` with the provider's
  /// id, or `skipped` (superseded). Counts it.
  virtual ledger_mark ledger_end(const outbound_send& s, ledger_state outcome,
                                 const std::string& provider_id)
    = 0;

  /// Records that `s` failed for good with `error_class` (a class of the
  /// taxonomy) and `message`, and writes the delivery (request, segment) to
  /// the dead letters as the messenger's. Counts it. False when the record
  /// could not be written.
  virtual bool ledger_dead(const outbound_send& s,
                           const std::string& error_class,
                           const std::string& message)
    = 0;

  /// The messenger's order of lifecycle reactions
  /// (runtime/reaction_gate.hpp); null when there is none (each reaction
  /// then goes out as the ledger decides).
  virtual reaction_gate* reaction_order();

  /// The messenger's chat actions (runtime/typing_ticker.hpp); null when
  /// there are none.
  virtual typing_ticker* typing();

  /// Counts a reaction the gate dropped as overtaken: never sent, never
  /// recorded (`butlers_messenger_sends_total{...,outcome="overtaken"}`).
  virtual void count_overtaken(const std::string& adapter);
};

} // namespace butlers
