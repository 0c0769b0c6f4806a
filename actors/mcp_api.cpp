#include "actors/mcp_api.hpp"

#include <algorithm>

#include <caf/actor_system.hpp>

#include "actors/http_bridge.hpp"
#include "runtime/json.hpp"
#include "runtime/mcp.hpp"

namespace butlers {

namespace {

http_reply rpc_reply(int status, std::string body) {
  http_reply r;
  r.status = status;
  r.no_store = true;
  r.body = std::move(body);
  return r;
}

/// A JSON-RPC error answer with HTTP `status`.
http_reply rpc_error(int status, std::string_view id, int code,
                     std::string_view message) {
  return rpc_reply(status, mcp::error_message(id, code, message));
}

http_reply accepted() {
  http_reply r;
  r.status = 202;
  r.content_type = "application/json";
  return r;
}

std::string bearer_of(const http_call& call) {
  auto auth = call.header_value("Authorization");
  if (!auth)
    return {};
  std::string_view v = *auth;
  constexpr std::string_view prefix = "Bearer ";
  if (v.size() <= prefix.size())
    return {};
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(v[i]))
        != std::tolower(static_cast<unsigned char>(prefix[i])))
      return {};
  return std::string{v.substr(prefix.size())};
}

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return out;
}

/// A progress token of `params._meta` as JSON text; "" when none.
std::string progress_token(const rapidjson::Value& params) {
  auto meta = params.FindMember("_meta");
  if (meta == params.MemberEnd() || !meta->value.IsObject())
    return {};
  auto tok = meta->value.FindMember("progressToken");
  if (tok == meta->value.MemberEnd()
      || !(tok->value.IsString() || tok->value.IsInt64()))
    return {};
  return json::to_string(tok->value);
}

} // namespace

mcp_api::mcp_api(caf::actor_system& sys, const node_settings& settings,
                 node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)) {
  // nop
}

std::string mcp_api::admit(const http_call& call, http_responder& out) {
  // DNS rebinding: a browser page may not reach the tool server unless
  // its origin is allowed.
  if (auto origin = call.header_value("Origin")) {
    auto o = std::string{*origin};
    auto& allowed = settings_.tools.allowed_origins;
    auto port = std::to_string(settings_.http.port);
    bool own = o == "http://127.0.0.1:" + port
               || o == "http://localhost:" + port
               || o == "http://[::1]:" + port;
    if (!own && std::find(allowed.begin(), allowed.end(), o) == allowed.end()) {
      out.now(rpc_error(403, "null", mcp::invalid_request,
                        "Origin '" + o
                          + "' is not allowed ([tools] allowed_origins)"));
      return {};
    }
  }
  auto token = bearer_of(call);
  if (token.empty() || !ctx_->tools->find(token)) {
    ctx_->metrics
      .get_counter("butlers_tool_unauthorized_total",
                   "Tool calls refused for a missing, ended or foreign "
                   "token, or out of their scope")
      .inc();
    auto r = rpc_error(401, "null", mcp::invalid_request,
                       token.empty()
                         ? "a session's capability token is required "
                           "(Authorization: Bearer)"
                         : "the token has ended or is unknown");
    r.bearer_challenge = true;
    out.now(std::move(r));
    return {};
  }
  return token;
}

// Every message but initialize names the session it belongs to (400
// without, 404 for one unknown, ended or another token's) and may name the
// protocol version (400 when not served).
bool mcp_api::session_ok(const http_call& call, const std::string& token,
                         std::string_view id, http_responder& out) {
  auto sid = call.header_value("Mcp-Session-Id");
  if (!sid || sid->empty()) {
    out.now(rpc_error(400, id, mcp::invalid_request,
                      "Bad Request: the Mcp-Session-Id header is required "
                      "after initialize"));
    return false;
  }
  auto session = ctx_->mcp_sessions->find(*sid);
  if (!session || session->token != token) {
    out.now(rpc_error(404, id, mcp::invalid_request,
                      "Session not found: initialize a new one"));
    return false;
  }
  if (auto pv = call.header_value("MCP-Protocol-Version");
      pv && !mcp::supported(*pv)) {
    out.now(rpc_error(400, id, mcp::invalid_request,
                      "Bad Request: unsupported MCP-Protocol-Version '"
                        + std::string{*pv}
                        + "' (served: 2025-11-25, "
                          "2025-06-18)"));
    return false;
  }
  return true;
}

void mcp_api::call_tool(const std::string& token, const std::string& id,
                        const rapidjson::Value& params, http_responder& out) {
  auto name = params.FindMember("name");
  if (name == params.MemberEnd() || !name->value.IsString()) {
    out.now(rpc_error(200, id, mcp::invalid_params,
                      "Invalid params: \"name\" (the tool) is required"));
    return;
  }
  std::string arguments = "{}";
  if (auto a = params.FindMember("arguments"); a != params.MemberEnd()) {
    if (!a->value.IsObject()) {
      out.now(rpc_error(200, id, mcp::invalid_params,
                        "Invalid params: \"arguments\" must be an object"));
      return;
    }
    arguments = json::to_string(a->value);
  }
  auto tools = ctx_->tool_server();
  if (!tools) {
    auto r = rpc_error(503, id, mcp::internal_error,
                       "the tool server is restarting; try again shortly");
    r.retry_after = true;
    out.now(std::move(r));
    return;
  }
  auto progress = progress_token(params);
  auto tool = std::string{name->value.GetString()};
  auto answer = out.later();
  auto timeout = std::chrono::milliseconds{settings_.tools.notify_wait_ms
                                           + settings_.http.request_timeout_ms};
  bridge<tool_result>(
    sys_, tools, timeout,
    [answer, id, progress](tool_result& r) {
      if (r.status == tool_status::unauthorized) {
        auto reply = rpc_error(401, id, mcp::invalid_request, r.text);
        reply.bearer_challenge = true;
        answer(std::move(reply));
        return;
      }
      if (r.status == tool_status::unknown_tool) {
        answer(rpc_error(200, id, mcp::invalid_params, r.text));
        return;
      }
      auto body = mcp::result_message(id, mcp::call_tool_result(r));
      if (progress.empty()) {
        answer(rpc_reply(200, std::move(body)));
        return;
      }
      // The caller asked for progress: the answer is an event stream with
      // the progress reached, then the result.
      http_reply sse;
      sse.status = 200;
      sse.content_type = "text/event-stream";
      sse.no_store = true;
      sse.body = "event: message\ndata: "
                 + mcp::progress_notification(progress, 1, 1, "done")
                 + "\n\nevent: message\ndata: " + body + "\n\n";
      answer(std::move(sse));
    },
    [answer, id](const caf::error&) {
      auto r = rpc_error(503, id, mcp::internal_error,
                         "the tool server did not answer; try again");
      r.retry_after = true;
      answer(std::move(r));
    },
    tool_atom_v, tool_call{token, tool, std::move(arguments)});
}

void mcp_api::initialize(const std::string& token, const std::string& id,
                         const rapidjson::Value& params, http_responder& out) {
  auto v = params.FindMember("protocolVersion");
  if (v == params.MemberEnd() || !v->value.IsString()) {
    out.now(rpc_error(200, id, mcp::invalid_params,
                      "Invalid params: protocolVersion is required"));
    return;
  }
  auto version = mcp::negotiate(v->value.GetString());
  auto sid = ctx_->mcp_sessions->open(token, version, *ctx_->tools);
  if (sid.empty()) {
    auto r = rpc_error(503, id, mcp::internal_error,
                       "too many MCP sessions open; try again shortly");
    r.retry_after = true;
    out.now(std::move(r));
    return;
  }
  auto r = rpc_reply(200,
                     mcp::result_message(id, mcp::initialize_result(version)));
  r.headers.emplace_back("Mcp-Session-Id", sid);
  out.now(std::move(r));
}

void mcp_api::post(const http_call& call, http_responder& out,
                   const path_params&) {
  auto token = admit(call, out);
  if (token.empty())
    return;
  auto type = call.content_type ? lower(*call.content_type) : std::string{};
  if (type.rfind("application/json", 0) != 0) {
    out.now(rpc_error(415, "null", mcp::invalid_request,
                      "Content-Type must be application/json"));
    return;
  }
  rapidjson::Document doc;
  if (auto err = json::parse(call.body, doc)) {
    out.now(
      rpc_error(400, "null", mcp::parse_error, "Parse error: " + err->message));
    return;
  }
  if (doc.IsArray()) {
    out.now(rpc_error(400, "null", mcp::invalid_request,
                      "JSON-RPC batches are not supported (protocol "
                      "2025-06-18 and later)"));
    return;
  }
  if (!doc.IsObject() || !doc.HasMember("jsonrpc") || !doc["jsonrpc"].IsString()
      || std::string_view{doc["jsonrpc"].GetString()} != "2.0") {
    out.now(rpc_error(400, "null", mcp::invalid_request,
                      "Invalid Request: not a JSON-RPC 2.0 message "
                      "(\"jsonrpc\": \"2.0\" is missing)"));
    return;
  }
  auto method_it = doc.FindMember("method");
  auto id_it = doc.FindMember("id");
  bool has_id = id_it != doc.MemberEnd();
  if (method_it == doc.MemberEnd()) {
    // A response to a request of ours (we send none) or garbage.
    if (has_id && (doc.HasMember("result") || doc.HasMember("error"))) {
      if (session_ok(call, token, "null", out))
        out.now(accepted());
    } else
      out.now(rpc_error(400, "null", mcp::invalid_request,
                        "Invalid Request: no \"method\""));
    return;
  }
  if (!method_it->value.IsString()) {
    out.now(rpc_error(400, "null", mcp::invalid_request,
                      "Invalid Request: \"method\" must be a string"));
    return;
  }
  std::string method = method_it->value.GetString();
  if (!has_id) {
    // A notification (notifications/initialized, .../cancelled, ...).
    if (session_ok(call, token, "null", out))
      out.now(accepted());
    return;
  }
  auto& idv = id_it->value;
  if (!idv.IsString() && !idv.IsInt64()) {
    out.now(rpc_error(400, "null", mcp::invalid_request,
                      "Invalid Request: \"id\" must be a string or an "
                      "integer"));
    return;
  }
  auto id = json::to_string(idv);
  static const rapidjson::Value empty_object{rapidjson::kObjectType};
  auto params_it = doc.FindMember("params");
  if (params_it != doc.MemberEnd() && !params_it->value.IsObject()) {
    out.now(rpc_error(200, id, mcp::invalid_params,
                      "Invalid params: \"params\" must be an object"));
    return;
  }
  const rapidjson::Value& params = params_it != doc.MemberEnd()
                                     ? params_it->value
                                     : empty_object;
  if (method == "initialize") {
    initialize(token, id, params, out);
    return;
  }
  if (!session_ok(call, token, id, out))
    return;
  if (method == "ping") {
    out.now(rpc_reply(200, mcp::result_message(id, "{}")));
    return;
  }
  if (method == "tools/list") {
    out.now(rpc_reply(200, mcp::result_message(id, mcp::tools_list_result())));
    return;
  }
  if (method != "tools/call") {
    out.now(
      rpc_error(200, id, mcp::method_not_found, "Method not found: " + method));
    return;
  }
  call_tool(token, id, params, out);
}

void mcp_api::get(const http_call& call, http_responder& out,
                  const path_params&) {
  if (admit(call, out).empty())
    return;
  auto r = rpc_error(405, "null", mcp::invalid_request,
                     "Method Not Allowed: this server opens no event stream "
                     "of its own; POST requests to /mcp");
  r.headers.emplace_back("Allow", "POST, DELETE");
  out.now(std::move(r));
}

void mcp_api::remove(const http_call& call, http_responder& out,
                     const path_params&) {
  auto token = admit(call, out);
  if (token.empty())
    return;
  auto sid = call.header_value("Mcp-Session-Id");
  if (!sid || sid->empty()) {
    out.now(rpc_error(400, "null", mcp::invalid_request,
                      "Bad Request: the Mcp-Session-Id header is required"));
    return;
  }
  auto session = ctx_->mcp_sessions->find(*sid);
  if (!session || session->token != token) {
    out.now(rpc_error(404, "null", mcp::invalid_request, "Session not found"));
    return;
  }
  ctx_->mcp_sessions->close(*sid);
  http_reply r;
  r.status = 204;
  out.now(std::move(r));
}

void mcp_api::other(const http_call& call, http_responder& out,
                    const path_params& p) {
  if (call.method == "DELETE") {
    remove(call, out, p);
    return;
  }
  if (admit(call, out).empty())
    return;
  auto r = rpc_error(405, "null", mcp::invalid_request,
                     "Method Not Allowed: " + std::string{call.method}
                       + " (POST, DELETE)");
  r.headers.emplace_back("Allow", "POST, DELETE");
  out.now(std::move(r));
}

} // namespace butlers
