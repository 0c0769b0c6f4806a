#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace butlers {

/// The one error enum of the project: the error taxonomy of spec 001 §10.6
/// followed by internal codes. Every terminal failure maps to one of the
/// taxonomy classes; internal codes map onto them at the edges (HTTP status,
/// persisted error class) through `error_class()`.
enum class butlers_errc : uint8_t {
  /// Not an error (CAF reserves code 0).
  none = 0,
  // -- taxonomy of spec 001 §10.6 ---------------------------------------------
  /// The switchboard could not classify a request.
  classification_error,
  /// A payload or envelope violated its schema or contract.
  validation_error,
  /// The switchboard could not plan or dispatch a route.
  routing_error,
  /// The target (butler, node, database) cannot be reached right now.
  target_unavailable,
  /// A deadline passed before an answer arrived.
  timeout,
  /// Admission control rejected the work: a bounded queue is full.
  overload_rejected,
  /// Anything else, including unknown classes reported by others.
  internal_error,
  // -- internal codes
  // ----------------------------------------------------------
  /// The database cannot be reached (maps to target_unavailable, HTTP 503).
  database_unavailable,
  /// The node is draining for shutdown and takes no new work (HTTP 503).
  draining,
  /// A uniqueness rule was violated (e.g. a duplicate key).
  conflict,
  /// Missing or wrong credentials (HTTP 401).
  unauthorized,
  /// A body exceeded its size limit (HTTP 413).
  payload_too_large,
  /// A body was not of a supported media type (HTTP 415).
  unsupported_media_type,
  /// No such resource (HTTP 404).
  not_found,
  /// A configuration file or value is invalid.
  invalid_config,
  /// A sender is over its rate limit at ingest (maps to overload_rejected,
  /// HTTP 429 with the bucket's Retry-After; runtime/rate_limit.md).
  sender_rate_limited,
  /// A connector (channel and endpoint) is over its rate limit at ingest
  /// (maps to overload_rejected, HTTP 429 with Retry-After).
  connector_rate_limited,
};

/// Returns the enumerator's name, e.g. "validation_error".
const char* to_string(butlers_errc x);

/// Maps any code to its class in the taxonomy of spec 001 §10.6.
butlers_errc error_class(butlers_errc x);

/// Parses an error class reported by someone else (e.g. a downstream
/// `route_response.v1`). Unknown or internal-only names normalize to
/// `internal_error`, as §10.6 requires; the caller keeps the original string
/// as non-user-facing metadata.
butlers_errc normalize_error_class(std::string_view name);

/// The HTTP status a failure with this code answers with.
int http_status(butlers_errc x);

/// Extracts our code from a CAF error: `internal_error` for errors of other
/// categories (CAF's own, e.g. request_timeout, map to `timeout`;
/// request_receiver_down to `target_unavailable`).
butlers_errc code_of(const caf::error& err);

/// A rate-limit refusal: `code` with its message and the seconds until the
/// bucket takes a message again (read back with `retry_after_of`).
caf::error rate_limited_error(butlers_errc code, std::string message,
                              uint32_t retry_after_s);

/// The seconds of a `rate_limited_error`; 0 for any other error.
uint32_t retry_after_of(const caf::error& err);

/// Whether `code` is one of the rate-limit refusals.
inline bool is_rate_limited(butlers_errc code) {
  return code == butlers_errc::sender_rate_limited
         || code == butlers_errc::connector_rate_limited;
}

/// Extracts the human-readable context string stored by `make_error` calls
/// of the form `caf::error{code, "text"}`; empty if none.
std::string message_of(const caf::error& err);

} // namespace butlers

CAF_ERROR_CODE_ENUM(butlers::butlers_errc, "butlers")
