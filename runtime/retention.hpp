#pragma once

// Retention of what people wrote (runtime/retention.md; spec 001 §2, §5:
// ingress content is "durable but bounded"; DESIGN.md invariant 11): the
// `[retention]` settings, the catalogue of every table that holds people's
// text or metadata, and the plan of one retention pass (which named
// statement runs next, with how many days), without actors or a database.
// actors/retention.cpp carries it out on a connection of its own.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace butlers {

// -- settings -----------------------------------------------------------------

/// `[retention]` (config/README.md): how long each class of data is kept,
/// and how the pruning paces itself.
struct retention_config {
  /// Prune at all (at start, then every `interval_s`).
  bool enabled = true;
  /// Seconds between the end of one pass and the start of the next.
  uint32_t interval_s = 3600;
  /// Days the text of a finished request (envelopes, prompts, responses,
  /// transcripts, ledger texts, tool arguments, reminders) is kept after it
  /// finished; 0 redacts it at the next pass.
  uint32_t content_days = 30;
  /// Days audit trails (transitions, routing attempts, operator actions,
  /// tool calls, dead letters, approvals, ended runs, plans) are kept.
  uint32_t audit_days = 90;
  /// Days per-day usage and finished work items (their usage) are kept.
  uint32_t usage_days = 400;
  /// Days settled outbound sends are kept in the ledger.
  uint32_t ledger_days = 90;
  /// Days an attachment is kept after it was last stored; the same setting
  /// as `[attachments] retention_days` (either key may set it).
  uint32_t attachment_days = 30;
  /// Days a butler's tool state (a key of its store) is kept after it was
  /// last written.
  uint32_t state_days = 365;
  /// Most rows one statement touches per table (one batch): small, so
  /// each batch's transaction, and the WAL its commit flushes, stay short.
  uint32_t batch_rows = 25;
  /// Least pause between two batches.
  uint32_t pause_ms = 20;
  /// Most of the wall time the pruning spends in batches, in percent: after
  /// a batch that took B ms the next waits at least B x (100 - duty_pct) /
  /// duty_pct ms, so a database slowed by other work slows the pruning
  /// with it (`retention_pause`).
  uint32_t duty_pct = 20;
};

/// The pause after a batch that took `batch_ms`: `pause_ms`, or longer when
/// the batch was slow enough that `duty_pct` needs more (at most a minute).
std::chrono::milliseconds retention_pause(const retention_config& cfg,
                                          double batch_ms);

/// The classes of data, each with its own retention.
enum class retention_class : uint8_t {
  content,
  audit,
  usage,
  ledger,
  attachments,
  state,
};

/// "content", "audit", "usage", "ledger", "attachments", "state".
const char* to_string(retention_class x);

/// The days `cfg` keeps data of class `x`.
uint32_t retention_days(const retention_config& cfg, retention_class x);

// -- the catalogue ------------------------------------------------------------

/// One table that holds people's text or metadata, as retention (and the
/// erasure of one sender) must know it. Plain text, read by people and by
/// the code that builds statements from it; runtime/retention.md prints
/// the same list.
struct people_table {
  /// The table.
  const char* table;
  /// Its columns holding people's text ("" when only metadata).
  const char* text_columns;
  /// The class whose retention applies.
  retention_class cls;
  /// What retention does: "redact" (text emptied, row kept), "delete", or
  /// "drop" (whole partitions, `[database] retention_months`).
  const char* action;
  /// How to find the rows of one sender: an SQL condition on the table
  /// (alias `t`) with `$1` the channel and `$2` the sender identity.
  const char* sender;
  /// When its rows are finished (nothing live still needs them): an SQL
  /// condition on alias `t`.
  const char* finished;
};

/// Every table that holds people's text or metadata. A table with text
/// columns that is in neither this list nor `system_tables()` fails the
/// retention test (test/integration/retention_pgtest.cpp).
const std::vector<people_table>& people_tables();

/// Tables with text columns that hold no people's text (configuration,
/// connector health, migrations), each with why.
const std::vector<std::pair<const char*, const char*>>& system_tables();

// -- one pass -----------------------------------------------------------------

/// One named statement of a pass (sql/queries/retention_<name>.sql):
/// parameters ($1 days, $2 batch rows); answers rows (relation, action,
/// rows affected).
struct retention_step {
  const char* query;
  retention_class cls;
};

/// The statements of a pass, in order.
const std::vector<retention_step>& retention_steps();

/// What one batch did: (relation, action) → rows.
using retention_counts = std::map<std::pair<std::string, std::string>,
                                  uint64_t>;

/// One pass through every step: each step runs batch after batch until a
/// batch touches fewer than `batch_rows` rows of every table, then the next
/// step. A failed batch ends the pass (the next pass starts over).
class retention_pass {
 public:
  explicit retention_pass(const retention_config& cfg);

  /// The statement to run next and its days; nullopt when the pass is done.
  std::optional<std::pair<retention_step, uint32_t>> next() const;

  /// Records what the current statement's batch did and moves on: the same
  /// step again when any table had a full batch, else the next step.
  void record(const retention_counts& batch);

  /// Ends the pass early (a failed batch).
  void abandon();

  /// Rows per (relation, action) so far.
  const retention_counts& totals() const {
    return totals_;
  }

  /// Batches run so far.
  size_t batches() const {
    return batches_;
  }

 private:
  retention_config cfg_;
  size_t step_ = 0;
  size_t batches_ = 0;
  retention_counts totals_;
};

} // namespace butlers
