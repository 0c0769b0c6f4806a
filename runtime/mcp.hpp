#pragma once

// The Model Context Protocol as the node serves it (actors/mcp_api.hpp):
// JSON-RPC 2.0 messages over the Streamable HTTP transport, protocol
// versions 2025-06-18 and 2025-11-25. This part has no I/O: version
// negotiation, the messages it answers with, and the sessions
// (`Mcp-Session-Id`), each bound to the capability token that opened it.

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tools.hpp"

namespace butlers::mcp {

/// The protocol versions served, newest first.
const std::vector<std::string>& versions();

/// The version answered to a client that asks for `requested`: the same
/// when served, else the newest (the client then decides whether to go on).
std::string negotiate(std::string_view requested);

/// True when `v` is a served version.
bool supported(std::string_view v);

/// JSON-RPC 2.0 error codes.
enum error_code : int {
  parse_error = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  internal_error = -32603,
};

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`; `id` and `result` are JSON
/// text.
std::string result_message(std::string_view id, std::string_view result);

/// `{"jsonrpc":"2.0","id":ID,"error":{"code","message"}}`; `id` is JSON text
/// ("null" when the request's id could not be read).
std::string error_message(std::string_view id, int code,
                          std::string_view message);

/// The InitializeResult for `version`.
std::string initialize_result(std::string_view version);

/// The ListToolsResult of the whole catalogue (one page).
const std::string& tools_list_result();

/// The CallToolResult of `r` (ok or isError; the other statuses are
/// protocol errors and never come here).
std::string call_tool_result(const tool_result& r);

/// `notifications/progress` for `token` (JSON text of the progress token).
std::string progress_notification(std::string_view token, double progress,
                                  double total, std::string_view message);

/// One MCP session: the token that opened it and the version agreed.
struct session {
  std::string token;
  std::string version;
};

/// The node's MCP sessions by `Mcp-Session-Id`. Thread-safe (every HTTP
/// thread reads it) and bounded: past `capacity`, opening one first drops
/// those whose token has ended, then refuses.
class sessions {
 public:
  explicit sessions(size_t capacity = 10000) : capacity_(capacity) {
    // nop
  }

  /// Opens a session for `token`; its id, or "" when full.
  std::string open(std::string token, std::string version,
                   const tool_tokens& live);

  /// The session `id`, if open.
  std::optional<session> find(std::string_view id) const;

  /// Ends session `id`; false when it was not open.
  bool close(std::string_view id);

  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, session> open_;
};

} // namespace butlers::mcp
