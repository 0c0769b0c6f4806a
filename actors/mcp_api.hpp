#pragma once

#include <chrono>

#include <caf/fwd.hpp>
#include <rapidjson/document.h>

#include "actors/http_api.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"

namespace butlers {

/// `/mcp`: the tool server over MCP's Streamable HTTP transport (protocol
/// versions 2025-06-18 and 2025-11-25; runtime/mcp.hpp). Every request
/// carries a session's capability token as `Authorization: Bearer`; no
/// token, or one that ended, is 401. A request with an `Origin` header
/// not in `[tools] allowed_origins` (nor this node's own loopback origin)
/// is 403.
///
/// - `POST /mcp` takes one JSON-RPC message: `initialize` opens an MCP
///   session (`Mcp-Session-Id` in the answer), which every later request
///   names; `ping`, `tools/list`, `tools/call` (answered as JSON, or as an
///   event stream with progress notifications when the call asked for
///   progress); notifications and responses are accepted with 202.
/// - `GET /mcp` is 405: the server opens no stream of its own.
/// - `DELETE /mcp` ends the session named.
///
/// Bad JSON, a batch, a message that is not JSON-RPC 2.0, an unknown
/// method, an unknown tool or bad parameters are JSON-RPC errors naming
/// the problem; a tool that refuses (bad arguments, a conflict, a
/// recipient not allowed) answers `isError` with the reason.
class mcp_api {
 public:
  /// `settings` and `ctx` outlive this.
  mcp_api(caf::actor_system& sys, const node_settings& settings,
          node_context_ptr ctx);

  /// POST /mcp.
  void post(const http_call& call, http_responder& out, const path_params& p);

  /// GET /mcp.
  void get(const http_call& call, http_responder& out, const path_params& p);

  /// DELETE /mcp.
  void remove(const http_call& call, http_responder& out, const path_params& p);

  /// Any other method on /mcp.
  void other(const http_call& call, http_responder& out, const path_params& p);

 private:
  /// The capability token of `call`, after the Origin check; answers 401
  /// or 403 itself and returns "" when the request may not go on.
  std::string admit(const http_call& call, http_responder& out);

  /// Checks the Mcp-Session-Id and MCP-Protocol-Version of a message other
  /// than initialize; answers 400 or 404 itself and returns false.
  bool session_ok(const http_call& call, const std::string& token,
                  std::string_view id, http_responder& out);

  /// initialize: opens an MCP session (`Mcp-Session-Id`) for `token`.
  void initialize(const std::string& token, const std::string& id,
                  const rapidjson::Value& params, http_responder& out);

  /// tools/call `params` of JSON-RPC request `id`, through the tool server.
  void call_tool(const std::string& token, const std::string& id,
                 const rapidjson::Value& params, http_responder& out);

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
};

} // namespace butlers
