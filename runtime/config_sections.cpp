// The fields of `[[http.credential]]`, `[attachments]`, `[telemetry]`,
// `[rate_limits]` and `[retention]` (config/README.md). Apart from
// config_fields.cpp, which would outgrow the line cap.

#include "runtime/config_fields.hpp"

namespace butlers::config_detail {

// -- [[http.credential]] -----------------------------------------------------

const fields<http_credential_config>& credential_fields() {
  using c = http_credential_config;
  static const fields<c> list{
    text("name", &c::name, "names it in logs and refusals; unique",
         [](const std::string& x) -> std::string {
           bool plain = !x.empty() && x.size() <= 64 && x[0] >= 'a'
                        && x[0] <= 'z'
                        && x.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                               "0123456789_-")
                             == std::string::npos;
           if (plain)
             return {};
           return "must match ^[a-z][a-z0-9_-]{0,63}$, got '" + x + "'";
         })
      .required(),
    text_of("role", &c::role,
            {"ingest", "worker", "operator", "read", "thread"},
            "what it may do")
      .required(),
    text("token_sha256", &c::token_sha256,
         "SHA-256 of the token, 64 hex digits (butlers-node hash-token)",
         [](const std::string& x) -> std::string {
           bool hex = x.size() == 64
                      && x.find_first_not_of("0123456789abcdefABCDEF")
                           == std::string::npos;
           return hex ? "" : "must be 64 hex digits (a SHA-256)";
         })
      .required(),
    text("connector", &c::connector,
         "ingest: only the routes of this [[connector]]"),
    text("endpoint_identity", &c::endpoint_identity,
         "ingest: only POST /v1/ingest envelopes of this "
         "source.endpoint_identity"),
    text("butler", &c::butler,
         "worker: the butler whose work items it takes (required)"),
    text("thread_id", &c::thread_id, "thread: only this thread"),
    text("sender", &c::sender, "thread: only the threads this sender started"),
  };
  return list;
}

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

// -- [rate_limits] ------------------------------------------------------------

const fields<rate_limits_config>& rate_limit_fields() {
  using c = rate_limits_config;
  static const fields<c> list{
    integer("per_sender_per_minute", &c::per_sender_per_minute, 0, 100000,
            "messages a minute one sender (channel:identity) may send; "
            "0: no per-sender limit"),
    integer("sender_burst", &c::sender_burst, 1, 100000,
            "messages a sender may send at once after a quiet time"),
    integer("per_connector_per_second", &c::per_connector_per_second, 0,
            1000000,
            "messages a second one connector (channel:endpoint_identity) "
            "may bring; 0: no per-connector limit"),
    integer("connector_burst", &c::connector_burst, 1, 1000000,
            "messages a connector may bring at once after a quiet time"),
    integer("max_buckets", &c::max_buckets, 100, 10000000,
            "buckets kept; the least recently used is dropped (counted)"),
    flag("notify", &c::notify,
         "tell a limited sender once per limited period when it is taken "
         "again"),
  };
  return list;
}

const fields<rate_limit_tier>& rate_limit_tier_fields() {
  using c = rate_limit_tier;
  static const fields<c> list{
    text("name", &c::name, "the tier's name, in answers and logs").required(),
    text("channel", &c::channel,
         "every sender of this channel not listed in a tier (set this or "
         "senders)",
         [](const std::string& x) {
           return x.empty() ? std::string{}
                            : choice_of(
                              {"telegram", "slack", "email", "api", "mcp"})(x);
         }),
    texts("senders", &c::senders,
          "channel:identity of each sender of this tier (set this or "
          "channel)"),
    integer("per_sender_per_minute", &c::per_sender_per_minute, 0, 100000,
            "messages a minute each sender of the tier may send; 0: no limit")
      .required(),
    integer("sender_burst", &c::sender_burst, 1, 100000,
            "messages a sender of the tier may send at once"),
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
            "least pause between two retention batches"),
    integer("duty_pct", &c::duty_pct, 1, 100,
            "most of the wall time the retention spends in batches: after "
            "a batch of B ms it waits at least B x (100 - duty_pct) / "
            "duty_pct ms"),
  };
  return list;
}

} // namespace butlers::config_detail
