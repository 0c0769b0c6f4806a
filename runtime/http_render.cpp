#include "runtime/http_render.hpp"

#include "runtime/json.hpp"
#include "runtime/messages.hpp"
#include "runtime/node_status.hpp"
#include "runtime/route.hpp"
#include "runtime/schema.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

const char* json_bool(bool x) {
  return x ? "true" : "false";
}

bool says_retry(int status) {
  return status == 429 || status == 503 || status == 504;
}

} // namespace

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Internal Server Error";
  }
}

// -- building blocks ----------------------------------------------------------

std::string error_body(butlers_errc code, const std::string& message,
                       const std::string& details) {
  return R"({"error":{"class":)" + json::quote(to_string(error_class(code)))
         + R"(,"code":)" + json::quote(to_string(code)) + R"(,"message":)"
         + json::quote(message) + R"(,"details":)" + details + "}}";
}

std::string violations_json(const std::vector<violation>& xs) {
  std::string out = "[";
  for (auto& x : xs) {
    if (out.size() > 1)
      out += ',';
    out += R"({"pointer":)" + json::quote(x.pointer) + R"(,"keyword":)"
           + json::quote(x.keyword) + R"(,"message":)" + json::quote(x.message)
           + "}";
  }
  return out + "]";
}

http_reply json_reply(int status, std::string body) {
  http_reply r;
  r.status = status;
  r.no_store = true;
  r.body = std::move(body);
  return r;
}

http_reply error_reply(butlers_errc code, const std::string& message,
                       const std::string& details) {
  http_reply r;
  r.status = http_status(code);
  r.retry_after = says_retry(r.status);
  r.bearer_challenge = r.status == 401;
  r.body = error_body(code, message, details);
  return r;
}

http_reply failure_reply(const caf::error& err) {
  auto msg = message_of(err);
  if (msg.empty())
    msg = to_string(code_of(err));
  if (is_rate_limited(code_of(err)))
    return rate_limited_reply(code_of(err), msg, retry_after_of(err));
  return error_reply(code_of(err), msg);
}

// -- refusals shared by several endpoints -------------------------------------

http_reply no_route_reply(std::string_view method, std::string_view path) {
  return error_reply(butlers_errc::not_found, "no route for "
                                                + std::string{method} + " "
                                                + std::string{path});
}

http_reply wrong_method_reply(std::string_view method_to_use,
                              std::string_view path) {
  return error_reply(butlers_errc::not_found, "use "
                                                + std::string{method_to_use}
                                                + " for " + std::string{path});
}

http_reply unauthorized_reply() {
  return error_reply(butlers_errc::unauthorized,
                     "missing or wrong bearer token");
}

http_reply draining_reply() {
  return error_reply(butlers_errc::draining, "the node is shutting down");
}

http_reply not_json_reply() {
  return error_reply(butlers_errc::unsupported_media_type,
                     "Content-Type must be application/json");
}

http_reply body_too_large_reply() {
  return error_reply(butlers_errc::payload_too_large,
                     "body exceeds http.max_body_bytes");
}

http_reply validation_reply(const std::string& message) {
  return error_reply(butlers_errc::validation_error, message);
}

// -- a service the request needs is missing -----------------------------------

http_reply no_ingest_switchboard_reply(bool database_configured,
                                       bool switchboard_node) {
  if (!database_configured)
    return error_reply(butlers_errc::target_unavailable,
                       "no database is configured on this node");
  return error_reply(butlers_errc::database_unavailable,
                     switchboard_node
                       ? "the switchboard is restarting"
                       : "this butler-only node has no switchboard node "
                         "connected");
}

http_reply no_switchboard_reply() {
  return error_reply(butlers_errc::database_unavailable,
                     "the switchboard is restarting");
}

http_reply no_registry_reply(bool database_configured) {
  return error_reply(butlers_errc::target_unavailable,
                     database_configured
                       ? "the butlers are restarting"
                       : "no database is configured on this node");
}

http_reply no_directory_reply(bool database_configured) {
  if (!database_configured)
    return error_reply(butlers_errc::target_unavailable,
                       "no database is configured on this node");
  return error_reply(butlers_errc::database_unavailable,
                     "the thread directory is restarting");
}

http_reply no_reader_reply() {
  return error_reply(butlers_errc::database_unavailable,
                     "no database reader on this node");
}

// -- endpoints ----------------------------------------------------------------

http_reply healthz_reply() {
  return json_reply(200, R"({"status":"ok"})");
}

http_reply readyz_reply(const node_status& st) {
  std::string body = R"({"ready":)";
  body += json_bool(st.ready());
  body += R"(,"draining":)";
  body += json_bool(st.draining);
  body += R"(,"database":)";
  if (!st.database_configured) {
    body += R"("not configured")";
  } else {
    body += st.database_ready ? R"("ready")" : R"("unavailable")";
    auto err = st.database_error();
    if (!err.empty())
      body += R"(,"database_error":)" + json::quote(err);
  }
  body += "}";
  return json_reply(st.ready() ? 200 : 503, std::move(body));
}

http_reply metrics_reply(std::string text) {
  auto r = json_reply(200, std::move(text));
  r.content_type = "text/plain; version=0.0.4";
  return r;
}

http_reply ingest_reply(const append_result& res) {
  return json_reply(202, R"({"request_id":)" + json::quote(res.request_id)
                           + R"(,"status":)"
                           + (res.duplicate ? R"("deduped")" : R"("accepted")")
                           + R"(,"duplicate":)" + json_bool(res.duplicate)
                           + "}");
}

http_reply ingest_result_reply(const append_result& res) {
  if (res.error_code == 0)
    return ingest_reply(res);
  auto code = static_cast<butlers_errc>(res.error_code);
  if (is_rate_limited(code))
    return rate_limited_reply(code, res.error_message, res.retry_after_s);
  return ingest_failure_reply(code, res.error_message);
}

http_reply rate_limited_reply(butlers_errc code, const std::string& message,
                              uint32_t retry_after_s) {
  auto scope = code == butlers_errc::sender_rate_limited ? "sender"
                                                         : "connector";
  auto r = error_reply(code, message,
                       R"([{"limit":"rate_limit","scope":")"
                         + std::string{scope} + R"(","retry_after_s":)"
                         + std::to_string(retry_after_s) + "}]");
  r.retry_after_s = retry_after_s;
  return r;
}

http_reply ingest_failure_reply(const caf::error& err) {
  auto code = code_of(err);
  if (is_rate_limited(code))
    return rate_limited_reply(code, message_of(err), retry_after_of(err));
  return ingest_failure_reply(code, message_of(err));
}

http_reply ingest_failure_reply(butlers_errc code, std::string message) {
  if (message.empty())
    message = to_string(code);
  return error_reply(code, message);
}

http_reply ingest_timeout_reply() {
  return error_reply(butlers_errc::timeout,
                     "no answer within http.request_timeout_ms; the request "
                     "may or may not be stored, retry with the same key");
}

http_reply ingest_not_json_reply(const std::string& parse_error) {
  return validation_reply("body is not valid JSON: " + parse_error);
}

http_reply ingest_violations_reply(const std::vector<violation>& xs) {
  return error_reply(butlers_errc::validation_error,
                     std::to_string(xs.size())
                       + " schema violation(s) against ingest.v1",
                     violations_json(xs));
}

http_reply ingest_too_large_reply(size_t size, size_t max_bytes) {
  return error_reply(butlers_errc::payload_too_large,
                     "body of " + std::to_string(size)
                       + " bytes exceeds http.max_body_bytes ("
                       + std::to_string(max_bytes) + ")");
}

http_reply body_over_limit_reply(std::optional<uint64_t> declared,
                                 size_t max_bytes) {
  auto size = declared ? "of " + std::to_string(*declared) + " bytes "
                       : std::string{"without a length "};
  auto r = error_reply(butlers_errc::payload_too_large,
                       "body " + size + "exceeds http.max_body_bytes ("
                         + std::to_string(max_bytes) + ")");
  r.close_connection = true;
  return r;
}

http_reply butlers_reply(const std::vector<registry_entry>& xs) {
  std::string out = R"({"butlers":[)";
  for (size_t i = 0; i < xs.size(); ++i) {
    auto& x = xs[i];
    out += i == 0 ? "{" : ",{";
    out += R"("name":)" + json::quote(x.name);
    out += R"(,"description":)" + json::quote(x.description);
    out += R"(,"node":)" + json::quote(x.node);
    out += R"(,"status":)" + json::quote(x.status);
    out += R"(,"max_concurrent_sessions":)"
           + std::to_string(x.max_concurrent_sessions) + "}";
  }
  out += "]}";
  return json_reply(200, std::move(out));
}

http_reply no_butler_reply(const std::string& name) {
  return error_reply(butlers_errc::not_found, "no butler named '" + name + "'");
}

http_reply route_reply(const route_response& r) {
  http_reply out;
  out.status = r.status == "error"
                 ? http_status(normalize_error_class(r.error_class))
                 : 202;
  out.retry_after = out.status == 429 || out.status == 503;
  out.body = to_json(r);
  return out;
}

http_reply work_cancel_reply(bool found) {
  return json_reply(found ? 200 : 404,
                    std::string{R"({"cancelled":)"} + json_bool(found) + "}");
}

http_reply turn_reply(const turn_result& r) {
  if (r.status == 200)
    return json_reply(200, R"({"run_id":)" + json::quote(r.run_id)
                             + R"(,"kind":)" + json::quote(r.kind)
                             + R"(,"cursor":)" + std::to_string(r.cursor)
                             + R"(,"duplicate":)" + json_bool(r.duplicate)
                             + "}");
  // A refused turn: the status it names, `error` the specific reason
  // (run_changed, run_active, overload_rejected, ...) under its class.
  http_reply out;
  out.status = static_cast<int>(r.status);
  std::string cls = "internal_error";
  if (out.status == 400 || out.status == 404 || out.status == 409)
    cls = "validation_error";
  else if (out.status == 429)
    cls = "overload_rejected";
  else if (out.status == 503)
    cls = "target_unavailable";
  else if (out.status == 504)
    cls = "timeout";
  std::string details = "[]";
  if (!r.active_run_id.empty())
    details = R"([{"active_run_id":)" + json::quote(r.active_run_id) + "}]";
  out.retry_after = says_retry(out.status);
  out.body = R"({"error":{"class":)" + json::quote(cls) + R"(,"code":)"
             + json::quote(r.error) + R"(,"message":)" + json::quote(r.message)
             + R"(,"details":)" + details + "}}";
  return out;
}

http_reply thread_cancel_reply(uint32_t n) {
  return json_reply(200, R"({"cancelled":)" + std::to_string(n) + "}");
}

http_reply run_cancel_reply(uint32_t n) {
  return json_reply(n > 0 ? 200 : 404,
                    R"({"cancelled":)" + std::to_string(n) + "}");
}

http_reply read_reply(const named_result& r, butlers_errc missing_code,
                      const std::string& missing) {
  if (!r.ok || r.rows.empty() || r.rows[0].empty())
    return error_reply(missing_code, missing);
  return json_reply(200, r.rows[0][0]);
}

// -- connectors
// -----------------------------------------------------------------

http_reply no_connector_reply(std::string_view what, std::string_view name) {
  return error_reply(butlers_errc::not_found,
                     "no enabled " + std::string{what} + " connector '"
                       + std::string{name} + "' runs on this node");
}

http_reply connector_down_reply(std::string_view name) {
  return error_reply(butlers_errc::target_unavailable,
                     "connector '" + std::string{name}
                       + "' is not running right now (restarting)");
}

http_reply webhook_secret_reply() {
  auto r = error_reply(butlers_errc::unauthorized,
                       "missing or wrong X-Telegram-Bot-Api-Secret-Token");
  r.bearer_challenge = false;
  return r;
}

http_reply webhook_ack_reply(std::string_view status,
                             std::string_view request_id,
                             std::string_view reason) {
  std::string body = R"({"ok":true,"status":)";
  body += json::quote(status);
  if (!request_id.empty()) {
    body += R"(,"request_id":)";
    body += json::quote(request_id);
  }
  if (!reason.empty()) {
    body += R"(,"reason":)";
    body += json::quote(reason);
  }
  body += '}';
  return json_reply(200, std::move(body));
}

// -- event streams ------------------------------------------------------------

std::string stream_greeting(std::string_view thread_id) {
  if (thread_id.empty())
    return ": summary stream\n\n";
  return ": thread stream " + std::string{thread_id} + "\n\n";
}

http_reply no_streams_reply() {
  return error_reply(butlers_errc::target_unavailable,
                     "this node serves no event streams");
}

http_reply too_many_streams_reply() {
  return error_reply(butlers_errc::overload_rejected,
                     "threads.max_subscribers event streams are open");
}

std::string stream_overload_frame() {
  return sse_frame("error", R"({"code":"overload_rejected"})");
}

} // namespace butlers
