#pragma once

// The tools a butler's sessions call (DESIGN.md "tool server"): who a
// session is (its scope, behind a capability token), what each tool takes
// and answers (JSON Schemas), and the pure steps between a call's
// arguments and the statements or envelopes that carry it out. The tool
// server actor (actors/tool_server.hpp) does the I/O; the MCP endpoint
// (actors/mcp_api.hpp), the HTTP model runtimes and the scripted runtime
// all reach it with a token.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "runtime/approvals.hpp"
#include "runtime/json.hpp"
#include "runtime/messages.hpp"

namespace butlers {

/// What a session's tools may touch: the session's butler, work item and
/// request, and the person who asked (channel, endpoint, sender, thread).
struct tool_scope {
  std::string node;
  std::string butler;
  std::string work_id;
  std::string request_id;
  std::string received_at;
  /// The asker: where the request came from.
  std::string channel;
  std::string endpoint;
  std::string sender;
  /// source_thread_identity ("" when none).
  std::string thread;
  /// How the work was triggered: route, thread, schedule, reminder,
  /// trigger (a route_to), switchboard.
  std::string trigger_source;
  /// The request's text as the session got it (for `recall`).
  std::string prompt;
  /// The work item's lease token and the dispatch's traceparent: where
  /// the `execute_tool` spans of the session's run go.
  int64_t lease_token = 0;
  std::string traceparent;
  /// route_to hops behind this session (0 for work the switchboard routed).
  uint32_t depth = 0;
  /// `[[butler]] recipients`: "channel:recipient" the butler may notify
  /// besides the asker.
  std::vector<std::string> recipients;
  /// `[[butler]] max_tool_calls`: calls the session may make.
  uint32_t max_calls = 64;
  /// The butler's approval policy (`approval_prompt`).
  approval_policy approvals;
};

/// One live token: its scope and what the session has used of it.
struct tool_grant {
  explicit tool_grant(tool_scope s) : scope(std::move(s)) {
    // nop
  }
  const tool_scope scope;
  /// Calls made so far (checked against `scope.max_calls`).
  std::atomic<uint32_t> calls{0};
  /// The next `notify` and `remind` sequence numbers: with the work id
  /// they are the idempotency keys that make a retried session's calls
  /// land once.
  std::atomic<uint32_t> notify_seq{0};
  std::atomic<uint32_t> remind_seq{0};
  std::atomic<uint32_t> route_seq{0};
};

using tool_grant_ptr = std::shared_ptr<tool_grant>;

/// The node's capability tokens: minted when a session starts, revoked
/// when it ends (finish, timeout, cancel). Thread-safe; the HTTP threads
/// look tokens up on every MCP request. A token is 32 random bytes
/// (OpenSSL's RAND_bytes) in hex behind "bt_": unguessable, and never
/// logged.
class tool_tokens {
 public:
  /// At most this many live tokens (one per running session; far above
  /// any pool); minting past it fails.
  static constexpr size_t capacity = 100000;

  /// A new token for `scope`; "" when `capacity` tokens are live.
  std::string mint(tool_scope scope);

  /// The grant of a live token; null for an ended, unknown or empty one.
  tool_grant_ptr find(std::string_view token) const;

  /// Ends a token (idempotent).
  void revoke(const std::string& token);

  /// Live tokens.
  size_t size() const;

 private:
  mutable std::mutex mtx_;
  std::unordered_map<std::string, tool_grant_ptr> live_;
};

using tool_tokens_ptr = std::shared_ptr<tool_tokens>;

/// How a tool call ended.
enum class tool_status : uint8_t {
  /// The tool did what was asked.
  ok,
  /// The tool ran and refused or failed (MCP `isError`): bad arguments,
  /// a conflict, a refused recipient, a limit.
  tool_error,
  /// No such tool (JSON-RPC -32602 over MCP).
  unknown_tool,
  /// The token is missing, ended or foreign (401 over MCP).
  unauthorized,
};

/// A call to a tool: the caller's token, the tool and its arguments (a
/// JSON object as text).
struct tool_call {
  std::string token;
  std::string name;
  std::string arguments;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("tool_call"), x.token, x.name, x.arguments);
}

/// What a tool call answered: its status, the structured result (a JSON
/// object as text, `structuredContent` over MCP) and a text for the model
/// (what went wrong, for errors).
struct tool_result {
  tool_status status = tool_status::ok;
  std::string structured;
  std::string text;
  /// A short machine-readable reason for errors ("conflict",
  /// "invalid_arguments", "recipient_refused", ...), the metrics' outcome.
  std::string reason;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_result& x) {
  return f(caf::meta::type_name("tool_result"), x.status, x.structured, x.text,
           x.reason);
}

/// `bytes` random bytes (OpenSSL's RAND_bytes) as lower-case hex; "" when
/// the generator fails.
std::string random_hex(size_t bytes);

/// The string member `name` of object `v`, or `fallback` when it is absent
/// or not a string.
std::string string_arg(const rapidjson::Value& v, const char* name,
                       std::string fallback = {});

/// An `ok` result with `structured` (a JSON object) and its text.
tool_result tool_ok(std::string structured);

/// A `tool_error` result naming the problem.
tool_result tool_failed(std::string reason, std::string message,
                        std::string structured = {});

/// The outcome label of a result, for metrics and logs: ok, or the reason.
std::string outcome_label(const tool_result& r);

/// One tool of the catalogue.
struct tool_spec {
  std::string name;
  std::string title;
  std::string description;
  /// JSON Schema (draft-04 subset of runtime/schema.hpp, also valid
  /// draft 2020-12 as MCP asks) of the arguments and of the result.
  std::string input_schema;
  std::string output_schema;
  /// The tool only reads.
  bool read_only = false;
};

/// Every tool, in the order `tools/list` shows them.
const std::vector<tool_spec>& tool_catalogue();

/// The tool called `name`; null when there is none.
const tool_spec* find_tool(std::string_view name);

/// Checks `arguments` (JSON text) against the tool's input schema: "" when
/// they fit, else a message naming every violation.
std::string check_arguments(const tool_spec& tool, std::string_view arguments,
                            rapidjson::Document& parsed);

// -- the steps of each tool, without I/O --------------------------------------

/// Limits the tools enforce (from `[tools]`).
struct tool_limits {
  /// Largest state value (its JSON text) and reminder payload.
  size_t max_value_bytes = 64 * 1024;
  /// Most keys one state_list answers.
  uint32_t max_list = 100;
  /// Most route_to hops behind a session.
  uint32_t max_route_depth = 3;
  /// Longest delay of a reminder.
  std::chrono::seconds max_remind_delay{366 * 24 * 3600};
};

/// The state namespace of a call: "" (the butler's) or the asker's
/// ("sender:<channel>:<sender>") when `scope` is "sender".
std::string state_scope(const tool_scope& s, std::string_view scope_arg);

/// Where `notify` sends: the channel, recipient and intent, or a refusal.
struct notify_target {
  std::string channel;
  std::string recipient;
  /// "reply" (to the asker's message) or "send".
  std::string intent;
};

/// Decides `notify`'s target from its arguments (`channel`, `recipient`,
/// `intent`): the asker by default (a reply; for a schedule with
/// `notify_to`, that is its target), or a recipient of `[[butler]]
/// recipients`. Anyone else is refused: the
/// message names who may be reached.
std::variant<notify_target, tool_result> decide_notify_target(
  const tool_scope& s, const rapidjson::Value& args);

/// The notify.v1 document of a `notify` call number `seq` of the session
/// (its idempotency key is "<work_id>:<seq>").
std::string make_tool_notify(const tool_scope& s, const notify_target& t,
                             const rapidjson::Value& args, uint32_t seq);

/// A deterministic id shaped as a UUIDv7 (so it passes route.v1's request
/// id pattern) from `key`: a retried session's reminder gets the same id.
std::string derived_uuid(std::string_view key, int64_t unix_ms);

/// Parses a reminder's time: `at` (RFC 3339) or `after_s`, against `now`
/// (Unix ms); the due time in Unix ms, or the problem.
std::variant<int64_t, std::string> remind_due(const rapidjson::Value& args,
                                              int64_t now_ms,
                                              const tool_limits& limits);

} // namespace butlers
