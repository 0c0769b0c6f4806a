#pragma once

// The worker API of external butlers (actors/README.md "Writing a butler in
// any language") as the node reads and writes it: the request bodies of recv,
// ack, nack and extend, the call that carries one of them to the butler,
// and the butler's answer. Pure logic, no actors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "runtime/threads.hpp"

namespace butlers {

/// What a worker asks of an external butler.
enum class worker_op : uint8_t { recv, ack, nack, extend };

/// One worker request, parsed and checked on the HTTP thread.
struct worker_call {
  /// A `worker_op`.
  uint8_t op = 0;
  /// ack, nack, extend: the item and the token of its delivery.
  std::string work_id;
  std::string lease_token;
  /// recv: at most this many items (1..100, default 1).
  uint32_t max = 1;
  /// recv, extend: visibility asked for; 0 = the butler's `visibility_ms`.
  uint32_t visibility_ms = 0;
  /// recv: how long to wait for an item (0..60000, default 0).
  uint32_t wait_ms = 0;
  /// ack: a route_response.v1 document (JSON text, validated), or "" when
  /// the body gave `reply` (text) instead.
  std::string response;
  std::string reply;
  /// nack: may another delivery help (default true); how long to hold the
  /// item back (0..3600000); what went wrong, and its class (a taxonomy
  /// class, default internal_error).
  bool retryable = true;
  uint32_t delay_ms = 0;
  std::string error;
  std::string error_class;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_call& x) {
  return f(caf::meta::type_name("worker_call"), x.op, x.work_id, x.lease_token,
           x.max, x.visibility_ms, x.wait_ms, x.response, x.reply, x.retryable,
           x.delay_ms, x.error, x.error_class);
}

/// The butler's answer: `code` 0 (none) and a JSON `body` for 200, else a
/// `butlers_errc` and a message (rendered as the usual error body).
struct worker_reply {
  uint8_t code = 0;
  std::string message;
  std::string body;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_reply& x) {
  return f(caf::meta::type_name("worker_reply"), x.code, x.message, x.body);
}

/// The largest `wait_ms` of a recv.
constexpr uint32_t max_worker_wait_ms = 60000;

/// Reads the body of `op` into `out` (op, work id and token from the path
/// are left alone). Returns "" when valid, else a message naming the field.
std::string parse_worker_body(worker_op op, std::string_view body,
                              worker_call& out);

/// The verb of `.../work/{work_id}/{verb}`: ack, nack or extend; false for
/// anything else.
bool parse_worker_verb(std::string_view verb, worker_op& out);

/// One item of a recv answer.
struct worker_delivery {
  std::string work_id;
  std::string lease_token;
  /// The route.v1 envelope (JSON text).
  std::string envelope;
  uint32_t attempt = 0;
  std::vector<steer_input> steer_inputs;
  /// When its visibility lapses, Unix ms.
  int64_t visible_until_ms = 0;
  /// The node's MCP endpoint and the item's capability token for the
  /// session's tools ("" when the butler gives its sessions none).
  std::string mcp_url;
  std::string mcp_token;
};

/// `{"items":[{work_id, lease_token, envelope, attempt, steer_inputs,
/// visible_until_ms, tools: {url, token}}]}` (`tools` only with a token).
std::string render_deliveries(const std::vector<worker_delivery>& xs);

} // namespace butlers
