#include "runtime/retention.hpp"

#include <algorithm>
#include <cmath>

namespace butlers {

const char* to_string(retention_class x) {
  switch (x) {
    case retention_class::content: return "content";
    case retention_class::audit: return "audit";
    case retention_class::usage: return "usage";
    case retention_class::ledger: return "ledger";
    case retention_class::attachments: return "attachments";
    case retention_class::state: return "state";
  }
  return "?";
}

uint32_t retention_days(const retention_config& cfg, retention_class x) {
  switch (x) {
    case retention_class::content: return cfg.content_days;
    case retention_class::audit: return cfg.audit_days;
    case retention_class::usage: return cfg.usage_days;
    case retention_class::ledger: return cfg.ledger_days;
    case retention_class::attachments: return cfg.attachment_days;
    case retention_class::state: return cfg.state_days;
  }
  return cfg.content_days;
}

std::chrono::milliseconds retention_pause(const retention_config& cfg,
                                          double batch_ms) {
  double duty = std::clamp<uint32_t>(cfg.duty_pct, 1, 100);
  double paced = std::max(0.0, batch_ms) * (100.0 - duty) / duty;
  double ms = std::min(std::max<double>(cfg.pause_ms, paced), 60000.0);
  return std::chrono::milliseconds{static_cast<int64_t>(std::ceil(ms))};
}

// -- the catalogue ------------------------------------------------------------

namespace {

/// The requests of one sender, for the tables keyed by request.
#define BUTLERS_SENDER_REQUESTS                                                \
  "t.request_id IN (SELECT m.request_id FROM message_inbox m "                 \
  "WHERE m.source_channel = $1 AND m.source_sender_identity = $2)"

/// A request no longer open in the inbox.
#define BUTLERS_REQUEST_CLOSED                                                 \
  "NOT EXISTS (SELECT 1 FROM message_inbox m WHERE m.request_id = "            \
  "t.request_id AND m.lifecycle_state IN ('accepted', 'progress'))"

} // namespace

const std::vector<people_table>& people_tables() {
  using rc = retention_class;
  static const std::vector<people_table> list{
    {"message_inbox",
     "raw_payload, normalized_text, decomposition, dispatch_outcomes, "
     "response_summary, error_message",
     rc::content, "redact",
     "t.source_channel = $1 AND t.source_sender_identity = $2",
     "t.lifecycle_state IN ('parsed', 'errored', 'cancelled')"},
    {"inbox_dedupe", "", rc::content, "drop", BUTLERS_SENDER_REQUESTS,
     "its inbox partition was dropped"},
    {"route_work", "envelope, response", rc::content, "redact",
     BUTLERS_SENDER_REQUESTS " OR t.envelope::jsonb #>> "
                             "'{source,sender_identity}' = $2",
     "t.state IN ('ok', 'error', 'cancelled') AND " BUTLERS_REQUEST_CLOSED},
    {"fanout_plans", "plan", rc::content, "redact", BUTLERS_SENDER_REQUESTS,
     BUTLERS_REQUEST_CLOSED},
    {"fanout_execution_log", "prompt, raw_response, error_message", rc::content,
     "redact", BUTLERS_SENDER_REQUESTS, BUTLERS_REQUEST_CLOSED},
    {"dead_letters", "error_message", rc::content, "redact",
     BUTLERS_SENDER_REQUESTS, BUTLERS_REQUEST_CLOSED},
    {"routing_log", "error_message", rc::content, "redact",
     BUTLERS_SENDER_REQUESTS, BUTLERS_REQUEST_CLOSED},
    {"tool_calls", "arguments", rc::content, "redact", BUTLERS_SENDER_REQUESTS,
     BUTLERS_REQUEST_CLOSED},
    {"outbound_ledger", "value, error_message", rc::content, "redact",
     BUTLERS_SENDER_REQUESTS,
     "t.state IN ('sent', 'skipped', 'dead') AND " BUTLERS_REQUEST_CLOSED},
    {"thread_transcript", "body, detail", rc::content, "delete",
     "t.run_id IN (SELECT r.run_id FROM thread_runs r WHERE r.sender = $2)",
     "NOT EXISTS (SELECT 1 FROM thread_runs r WHERE r.run_id = t.run_id "
     "AND r.state NOT IN ('ok', 'error', 'cancelled'))"},
    {"thread_runs", "error_message", rc::content, "redact", "t.sender = $2",
     "t.state IN ('ok', 'error', 'cancelled')"},
    {"butler_reminders", "payload", rc::content, "delete",
     "t.source_channel = $1 AND t.source_sender = $2",
     "t.state IN ('fired', 'cancelled')"},
    {"approvals", "summary", rc::content, "redact",
     "t.requester_channel = $1 AND t.requester_sender = $2",
     "t.status <> 'pending'"},
    {"inbox_transitions", "", rc::audit, "delete", BUTLERS_SENDER_REQUESTS,
     "always (append-only)"},
    {"operator_audit", "why, details", rc::audit, "delete",
     BUTLERS_SENDER_REQUESTS, "always (append-only)"},
    {"threads", "", rc::audit, "keep",
     "t.thread_id IN (SELECT r.thread_id "
     "FROM thread_runs r WHERE r.sender = "
     "$2)",
     "no run left"},
    {"usage_daily", "", rc::usage, "delete", "t.sender = $2",
     "the day is over"},
    {"butler_state", "value", rc::state, "delete",
     "t.scope = 'sender:' || $1 || ':' || $2", "not written since"},
    {"attachments", "data", rc::attachments, "delete",
     "t.sha256 named in the attachments of the sender's message_inbox "
     "raw_payload",
     "always (counted from the last store)"},
  };
  return list;
}

#undef BUTLERS_SENDER_REQUESTS
#undef BUTLERS_REQUEST_CLOSED

const std::vector<std::pair<const char*, const char*>>& system_tables() {
  static const std::vector<std::pair<const char*, const char*>> list{
    {"schema_migrations", "migrations applied"},
    {"connector_checkpoints", "where each connector's source stopped"},
    {"connector_registry", "connectors' health (connector_stats_prune)"},
    {"connector_heartbeat_log", "connectors' heartbeats (7 days)"},
    {"connector_stats_hourly", "connectors' counters (30 days)"},
    {"connector_stats_daily", "connectors' counters (one year)"},
    {"connector_fanout_daily", "requests per connector and butler"},
    {"forget_audit", "the record of erasures: who, why, a hash of the "
                     "sender, counts; never the text (runtime/forget.md)"},
  };
  return list;
}

// -- one pass -----------------------------------------------------------------

const std::vector<retention_step>& retention_steps() {
  using rc = retention_class;
  static const std::vector<retention_step> list{
    {"retention_requests", rc::content},
    {"retention_work", rc::content},
    {"retention_threads", rc::content},
    {"retention_tools", rc::content},
    {"retention_audit", rc::audit},
    {"retention_usage", rc::usage},
    {"retention_ledger", rc::ledger},
    {"retention_state", rc::state},
    {"retention_attachments", rc::attachments},
  };
  return list;
}

retention_pass::retention_pass(const retention_config& cfg) : cfg_(cfg) {
  // nop
}

std::optional<std::pair<retention_step, uint32_t>> retention_pass::next()
  const {
  auto& steps = retention_steps();
  if (step_ >= steps.size())
    return std::nullopt;
  auto& s = steps[step_];
  return std::make_pair(s, retention_days(cfg_, s.cls));
}

void retention_pass::record(const retention_counts& batch) {
  ++batches_;
  bool full = false;
  for (auto& [key, n] : batch) {
    totals_[key] += n;
    full = full || n >= std::max<uint32_t>(1, cfg_.batch_rows);
  }
  if (!full)
    ++step_;
}

void retention_pass::abandon() {
  step_ = retention_steps().size();
}

} // namespace butlers
