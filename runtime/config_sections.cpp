// The fields of `[attachments]` and `[telemetry]` (config/README.md). Apart
// from config_fields.cpp, which would outgrow the line cap.

#include "runtime/config_fields.hpp"

namespace butlers::config_detail {

// -- [attachments] ------------------------------------------------------------

const fields<attachment_limits>& attachment_fields() {
  using c = attachment_limits;
  static const fields<c> list{
    integer("max_bytes", &c::max_bytes, 1, int64_t{1} << 30,
            "largest attachment in bytes; a larger one is refused with a "
            "message to the sender"),
    integer("max_message_bytes", &c::max_message_bytes, 1, int64_t{1} << 30,
            "largest sum of one message's attachments in bytes"),
    integer("max_count", &c::max_count, 1, 32, "most attachments per message"),
    integer("retention_days", &c::retention_days, 1, 3650,
            "days an attachment is kept after it was last stored"),
  };
  return list;
}

// -- [telemetry] --------------------------------------------------------------

const fields<telemetry_config>& telemetry_fields() {
  using c = telemetry_config;
  static const fields<c> list{
    text("otlp_endpoint", &c::otlp_endpoint,
         "base URL of an OTLP/HTTP receiver; spans go to {url}/v1/traces; "
         "empty: tracing off"),
    choice("encoding", &c::encoding, "OTLP/HTTP body encoding"),
    number("sample_ratio", &c::sample_ratio, 0.0, 1.0,
           "fraction of new traces sampled"),
    integer("queue_capacity", &c::queue_capacity, 1, 1000000,
            "spans waiting for export; more are dropped and counted"),
    integer("batch_max_spans", &c::batch_max_spans, 1, 10000,
            "spans per export request at most"),
    integer("batch_interval_ms", &c::batch_interval_ms, 10, 60000,
            "longest a span waits before its batch is sent"),
    integer("export_timeout_ms", &c::export_timeout_ms, 100, 60000,
            "bound on one export request"),
    text("headers_env", &c::headers_env,
         "environment variable with extra export headers "
         "(Name=value, comma separated), e.g. an API key"),
  };
  return list;
}

// -- [retention] --------------------------------------------------------------

const fields<retention_config>& retention_fields() {
  using c = retention_config;
  static const fields<c> list{
    flag("enabled", &c::enabled,
         "prune people's data at start and then every interval_s"),
    integer("interval_s", &c::interval_s, 1, 86400,
            "seconds from the end of one retention pass to the next"),
    integer("content_days", &c::content_days, 0, 3650,
            "days the text of a finished request is kept (envelopes, "
            "prompts, responses, transcripts, ledger texts); 0: redacted "
            "at the next pass"),
    integer("audit_days", &c::audit_days, 0, 3650,
            "days audit rows are kept (transitions, routing attempts, "
            "operator actions, tool calls, dead letters, approvals, ended "
            "runs, plans)"),
    integer("usage_days", &c::usage_days, 0, 3650,
            "days per-day usage and finished work items are kept"),
    integer("ledger_days", &c::ledger_days, 0, 3650,
            "days settled outbound sends are kept in the ledger"),
    integer("attachment_days", &c::attachment_days, 1, 3650,
            "days an attachment is kept after it was last stored; the same "
            "setting as attachments.retention_days"),
    integer("state_days", &c::state_days, 1, 3650,
            "days a key of a butler's tool state is kept after its last "
            "write"),
    integer("batch_rows", &c::batch_rows, 1, 100000,
            "most rows one retention statement touches per table"),
    integer("pause_ms", &c::pause_ms, 0, 60000,
            "pause between two retention batches"),
  };
  return list;
}

} // namespace butlers::config_detail
