#pragma once

// The checks the HTTP API runs on a request before anything reaches an
// actor: the bearer token, the body's media type and size, ids in the path,
// query parameters and the operator actions' bodies. No restinio here.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/http_render.hpp"
#include "runtime/operator_action.hpp"

namespace butlers {

/// True when `authorization` is `expected` (`Bearer <token>`), compared in
/// constant time since the token is a secret; always true when `expected`
/// is empty (no token configured).
bool bearer_matches(std::string_view expected,
                    std::optional<std::string_view> authorization);

/// True when `given` is `expected`, compared in constant time (a webhook's
/// shared secret); false when either is missing or `expected` is empty.
bool secret_matches(std::string_view expected,
                    std::optional<std::string_view> given);

/// True for `application/json`, in any case, with or without parameters.
bool is_json_media_type(std::string_view value);

/// True for 8-4-4-4-12 hex digits.
bool is_uuid(std::string_view x);

/// 400 for an id in the path that is no UUID; `what` names it ("run").
http_reply bad_uuid_reply(std::string_view what);

/// 400 for a thread id in the path that breaks the rule of
/// `valid_thread_id`.
http_reply bad_thread_id_reply();

/// A non-negative integer query parameter `key` of `query` (the part after
/// `?`): `fallback` when absent, nullopt when malformed.
std::optional<int64_t> query_int(std::string_view query, std::string_view key,
                                 int64_t fallback);

/// Refuses a body that must be JSON: 415 unless `content_type` says JSON,
/// then 413 when it is over `max_bytes`. Nullopt when it may pass.
std::optional<http_reply> refuse_json_body(
  std::optional<std::string_view> content_type, size_t size,
  uint64_t max_bytes);

/// The transcript window of `GET /v1/threads/{id}/transcript`.
struct transcript_window {
  /// Messages after this cursor (default 0).
  int64_t after = 0;
  /// At most this many (1..1000, default 500).
  int64_t limit = 500;
};

/// Reads `after` and `limit` from `query`; nullopt when either is
/// malformed or out of range (see `transcript_query_reply`).
std::optional<transcript_window> parse_transcript_query(std::string_view query);

/// 400 for a transcript query `parse_transcript_query` refused.
http_reply transcript_query_reply();

/// Reads the body `{"who","why"[,"state"][,"segment_id","butler"]}` of an
/// operator action (`POST /v1/requests/{id}/{action}`, the verb from
/// `parse_operator_verb`) on request `request_id`; missing fields are empty.
/// Nullopt when the body is not a JSON object (see `operator_body_reply`).
std::optional<operator_action> parse_operator_body(operator_verb verb,
                                                   std::string request_id,
                                                   std::string_view body);

/// 400 for an operator action body `parse_operator_body` refused.
http_reply operator_body_reply();

} // namespace butlers
