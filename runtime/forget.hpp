#pragma once

// Forgetting one person (runtime/forget.md): every row that holds what a
// sender wrote, or derives from it, is erased, table by table in small
// transactions, audited in `forget_audit` without any of the text. Run by
// `butlers-node forget` and by POST /v1/operator/forget; both block (a
// connection of their own), so the node calls it off the scheduler.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace butlers {

/// What a forget is asked: whose data, by whom, why.
struct forget_order {
  /// The sender's channel (`telegram`, `slack`, `email`, `api`, `mcp`).
  std::string channel;
  /// The sender's identity on that channel (Telegram: the user id).
  std::string identity;
  /// The operator, for the audit.
  std::string who;
  /// The reason, for the audit.
  std::string why;
  /// Most ids per transaction (requests of a batch; rows of a per-sender
  /// table): a transaction holds its locks briefly, so the node keeps
  /// serving while a forget runs.
  int batch = 500;
};

/// Splits "CHANNEL:IDENTITY" into `out` (at the first colon). Empty when it
/// is fine; else what is wrong, naming the field `sender`.
std::string parse_forget_sender(std::string_view text, forget_order& out);

/// Checks `who` and `why` (required, at most 200 and 2000 bytes) and the
/// batch size (1..10000). Empty when fine; else what is wrong, naming the
/// field.
std::string check_forget_order(const forget_order& x);

/// Parses the JSON body of POST /v1/operator/forget:
/// `{"sender","who","why","batch"?}`, refusing unknown fields. Empty when
/// fine; else what is wrong, naming the field.
std::string parse_forget_body(std::string_view body, forget_order& out);

/// The SHA-256 (hex) of "channel:identity": what the audit keeps of the
/// sender.
std::string forget_sender_hash(const forget_order& x);

/// The outcome of one forget.
struct forget_report {
  /// False when it failed midway (what it erased so far stays erased; run
  /// it again).
  bool ok = false;
  std::string error;
  /// The audit row's id (0 when not even that could be written).
  int64_t audit_id = 0;
  /// Rows erased per table (tables that lost none are absent).
  std::map<std::string, int64_t> counts;
  int64_t total = 0;
  /// Requests (inbox requests, thread runs, reminders, routed work) found.
  int64_t requests = 0;
  /// Work items that were still open (queued or running) when it began:
  /// runs in flight, whose sessions may store a little more as they end
  /// (runtime/forget.md); a second forget after they ended erases it.
  int64_t in_flight = 0;
  /// Transactions committed.
  int64_t transactions = 0;
};

/// The report as JSON: {"audit_id","sender_sha256","requests","in_flight",
/// "total","counts":{...}}.
std::string forget_report_json(const forget_report& r,
                               const std::string& sender_sha256);

/// The tables a forget erases from, in the order it does: one entry per
/// statement (sql/queries/forget_*.sql). `forget_catalogue` in forget.cpp
/// is the one place that names them; its tables are exactly those of
/// `people_tables()` (runtime/retention.hpp), which a unit test checks.
struct forget_step {
  /// The table the statement erases from.
  const char* table;
  /// The statement's name (sql/queries/<query>.sql).
  const char* query;
  /// What the statement takes: request ids, request and work ids, thread
  /// ids, attachment hashes, or (channel, identity, limit) repeated until
  /// it erases nothing.
  enum keys : uint8_t { requests, requests_and_works, threads, hashes, sender };
  keys by;
};

/// Every step, in order.
const std::vector<forget_step>& forget_catalogue();

/// Runs a forget against the database at `url` (blocking). `on_log`
/// receives progress lines without any text of the person.
forget_report run_forget(
  const std::string& url, const forget_order& order,
  const std::function<void(const std::string&)>& on_log = {});

} // namespace butlers
