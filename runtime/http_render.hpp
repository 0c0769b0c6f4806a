#pragma once

// Every answer of the HTTP API as a value: status, the headers that vary,
// and the body. The server writes one out as it is; the texts, statuses
// and headers live here, once, and are unit-tested without a socket.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "runtime/error.hpp"

namespace butlers {

struct append_result;
struct named_result;
struct node_status;
struct registry_entry;
struct route_response;
struct turn_result;
struct violation;

/// One HTTP answer, before it is written.
struct http_reply {
  int status = 200;
  std::string content_type = "application/json";
  /// `Cache-Control: no-store`, on the answers that report current state.
  bool no_store = false;
  /// `Retry-After`, on answers that say "try again soon": 1 second, or
  /// `retry_after_s` when set (a rate limit's bucket).
  bool retry_after = false;
  uint32_t retry_after_s = 0;
  /// `WWW-Authenticate: Bearer realm="butlers"`, on 401.
  bool bearer_challenge = false;
  /// Further headers, name and value (the dashboard's ETag, CSP, ...).
  std::vector<std::pair<std::string, std::string>> headers;

  /// `Connection: close`: the request was not read to its end.
  bool close_connection = false;
  std::string body;
};

/// The reason phrase of a status line for any status we answer with.
const char* reason_phrase(int status);

// -- building blocks ----------------------------------------------------------

/// The body every failing endpoint answers with; `details` is a JSON array.
std::string error_body(butlers_errc code, const std::string& message,
                       const std::string& details = "[]");

/// Schema violations as `details`: `[{"pointer","keyword","message"}]`.
std::string violations_json(const std::vector<violation>& xs);

/// A JSON answer of the current state (`no_store`).
http_reply json_reply(int status, std::string body);

/// A failure with our error body: the status of the code's class,
/// `Retry-After` on 429, 503 and 504, the bearer challenge on 401.
http_reply error_reply(butlers_errc code, const std::string& message,
                       const std::string& details = "[]");

/// A failed actor round trip: its code, and its message or else the code's
/// name.
http_reply failure_reply(const caf::error& err);

// -- refusals shared by several endpoints -------------------------------------

/// 404 for a method and path no route takes.
http_reply no_route_reply(std::string_view method, std::string_view path);

/// 404 for a path that takes one method only, naming it.
http_reply wrong_method_reply(std::string_view method_to_use,
                              std::string_view path);

/// 401 for a missing or wrong bearer token.
http_reply unauthorized_reply();

/// 503 while the node drains for shutdown.
http_reply draining_reply();

/// 415 for a body not declared `application/json`.
http_reply not_json_reply();

/// 413 for a body over `http.max_body_bytes`.
http_reply body_too_large_reply();

/// 400 for a bad JSON body (`message` says what is wrong).
http_reply validation_reply(const std::string& message);

// -- a service the request needs is missing -----------------------------------

/// No switchboard to ingest into: none yet (restarting), none at all (no
/// database), or none on a butler-only node of the cluster.
http_reply no_ingest_switchboard_reply(bool database_configured,
                                       bool switchboard_node);

/// No switchboard for an operator action (it is restarting).
http_reply no_switchboard_reply();

/// No butler registry: restarting, or no database.
http_reply no_registry_reply(bool database_configured);

/// No thread directory: restarting, or no database.
http_reply no_directory_reply(bool database_configured);

/// No database reader on this node.
http_reply no_reader_reply();

// -- endpoints ----------------------------------------------------------------

/// GET /healthz.
http_reply healthz_reply();

/// GET /readyz: 200 when ready, else 503, with the facts behind it.
http_reply readyz_reply(const node_status& st);

/// GET /metrics: Prometheus text format 0.0.4.
http_reply metrics_reply(std::string text);

/// POST /v1/ingest, committed: 202 with the canonical request id.
http_reply ingest_reply(const append_result& res);

/// POST /v1/ingest: one record's result in a batch, stored (or deduped)
/// or refused with its code and message.
http_reply ingest_result_reply(const append_result& res);

/// POST /v1/ingest, refused by the switchboard or the commit: `message`,
/// or the code's name when empty.
http_reply ingest_failure_reply(butlers_errc code, std::string message);

/// 429 for a record over a rate limit: `Retry-After: retry_after_s`, and
/// the limit's scope and wait in the body's `details`.
http_reply rate_limited_reply(butlers_errc code, const std::string& message,
                              uint32_t retry_after_s);

/// An ingest failure from an actor round trip (a connector's): its code
/// and message, and a rate limit's Retry-After.
http_reply ingest_failure_reply(const caf::error& err);

/// POST /v1/ingest with no answer within `http.request_timeout_ms`.
http_reply ingest_timeout_reply();

/// POST /v1/ingest with a body that is not JSON (`parse_error` says why).
http_reply ingest_not_json_reply(const std::string& parse_error);

/// POST /v1/ingest with a body that breaks `ingest.v1`.
http_reply ingest_violations_reply(const std::vector<violation>& xs);

/// 413 for an ingest body over the limit, with both sizes.
http_reply ingest_too_large_reply(size_t size, size_t max_bytes);

/// 413 for a body over `max_bytes` that was not read to its end: of
/// `declared` bytes (its Content-Length) or, without one, larger than the
/// limit. Closes the connection.
http_reply body_over_limit_reply(std::optional<uint64_t> declared,
                                 size_t max_bytes);

/// GET /v1/butlers: one entry per (butler, hosting node).
http_reply butlers_reply(const std::vector<registry_entry>& xs);

/// 404 for a butler the registry does not know.
http_reply no_butler_reply(const std::string& name);

/// POST /v1/butlers/{name}/route: 202 with the `route_response.v1`, or the
/// status of its error class (`Retry-After` on 429 and 503).
http_reply route_reply(const route_response& r);

/// POST /v1/butlers/{name}/work/{work_id}/cancel: 404 when not held.
http_reply work_cancel_reply(bool found);

/// POST /v1/threads/{id}/turns: the run it went to, or why it was refused.
http_reply turn_reply(const turn_result& r);

/// POST /v1/threads/{id}/cancel: how many runs were cancelled.
http_reply thread_cancel_reply(uint32_t n);

/// POST /v1/runs/{id}/cancel: 404 when no live thread had the run.
http_reply run_cancel_reply(uint32_t n);

/// A JSON document read in SQL: the first column of the first row, or
/// `missing_code` with `missing` when there is none (or the read failed).
http_reply read_reply(const named_result& r, butlers_errc missing_code,
                      const std::string& missing);

// -- connectors (actors/README.md "Connectors") -------------------------------

/// 404 for a connector route naming no enabled connector of that kind on
/// this node (`what`: "telegram webhook", "http").
http_reply no_connector_reply(std::string_view what, std::string_view name);

/// 503 while the connector's group restarts (or before it started).
http_reply connector_down_reply(std::string_view name);

/// 401 for a Telegram webhook request without the connector's secret
/// token in `X-Telegram-Bot-Api-Secret-Token` (no bearer challenge).
http_reply webhook_secret_reply();

/// 200 to Telegram: the Update is stored (`status` "accepted" or
/// "deduped", with its `request_id`), or acknowledged without being stored
/// ("ignored", "invalid", with the `reason`): retrying could not change
/// that, and Telegram retries anything but a 2xx.
http_reply webhook_ack_reply(std::string_view status,
                             std::string_view request_id,
                             std::string_view reason = {});

// -- event streams ------------------------------------------------------------

/// The comment that opens an event stream (summary, or one thread's).
std::string stream_greeting(std::string_view thread_id);

/// 503 on a node without event streams.
http_reply no_streams_reply();

/// 429 when `threads.max_subscribers` streams are open.
http_reply too_many_streams_reply();

/// The last frame of a stream that lost the race for the last place.
std::string stream_overload_frame();

} // namespace butlers
