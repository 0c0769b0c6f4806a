// The fields of `[[http.credential]]`, `[attachments]` and `[telemetry]`
// (config/README.md). Apart from config_fields.cpp, which would outgrow the
// line cap.

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

} // namespace butlers::config_detail
