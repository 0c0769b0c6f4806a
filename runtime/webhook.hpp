#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace butlers {

// -- URLs ---------------------------------------------------------------------

/// Where an `http://` URL points.
struct http_url {
  /// Host name or IPv4 address; an IPv6 literal without its brackets.
  std::string host;
  uint16_t port = 80;
  /// Path and query as sent in the request line; never empty.
  std::string target = "/";
};

/// Parses `http://host[:port][/path][?query]`; the fragment is dropped.
/// `https://` and every other scheme, user info, a missing host, a bad port
/// and control characters or spaces are errors. On failure returns nullopt
/// and, when `error` is not null, stores the reason.
std::optional<http_url> parse_http_url(std::string_view url,
                                       std::string* error);

// -- one attempt --------------------------------------------------------------

/// What one POST came back with.
struct http_post_result {
  /// A complete HTTP response was read.
  bool sent = false;
  /// Response status code.
  int status = 0;
  /// Response headers in order, names lower-cased.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Response body, capped at 64 KiB.
  std::string body;
  /// Connect, timeout or parse failure text.
  std::string error;
};

/// One blocking attempt: non-blocking connect + poll, then
/// `POST target` with Host, Content-Type: application/json, Content-Length,
/// Connection: close and `headers`; reads the status line, headers and body
/// (Content-Length, chunked, or until close). The whole attempt, from
/// connect to the last byte, is bounded by `timeout`, except name
/// resolution (getaddrinfo cannot be interrupted; IP literals skip it).
/// Never throws; sends with MSG_NOSIGNAL. Interim 1xx responses are skipped.
http_post_result http_post(
  const http_url& url, std::string_view body, std::chrono::milliseconds timeout,
  const std::vector<std::pair<std::string, std::string>>& headers = {});

// -- delivery with retries ----------------------------------------------------

/// How hard deliver_webhook tries.
struct webhook_policy {
  /// Bound on each attempt.
  std::chrono::milliseconds timeout{5000};
  /// Attempts after the first one.
  uint32_t retries = 3;
  /// Before retry n (n = 0, 1, ...) sleep a random time in
  /// [0, min(backoff_cap, backoff_base * 2^n)].
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{5000};
  /// Sent as `Authorization: Bearer <token>` when not empty.
  std::string token;
};

/// How a delivery ended.
struct webhook_outcome {
  /// A 2xx arrived.
  bool delivered = false;
  /// Status of the last attempt's response; 0 when it got none.
  int status = 0;
  /// Attempts made.
  uint32_t attempts = 0;
  /// The last error, empty when delivered.
  std::string error;
  /// Not delivered, but the last failure was transient (5xx, 408, 429,
  /// network, timeout, cancellation): trying again later may succeed.
  bool retryable = false;
};

/// Delivers with retries: 2xx = delivered; other 4xx (and 3xx: redirects are
/// not followed) = permanent failure, no retry; 5xx, 408, 429, connect
/// errors and timeouts are retried up to `policy.retries` times with
/// full-jitter exponential backoff. On 429 and 503 a `Retry-After` in
/// seconds replaces the jitter, capped by `backoff_cap`. Every attempt
/// carries `Idempotency-Key: <idempotency_key>`, so the receiver can drop
/// the duplicates retries may cause. `cancel`, when not null, is checked
/// before each attempt and every 50 ms while sleeping; a cancelled delivery
/// returns promptly with error "cancelled" and retryable = true.
webhook_outcome deliver_webhook(const http_url& url, std::string_view body,
                                std::string_view idempotency_key,
                                const webhook_policy& policy,
                                const std::atomic<bool>* cancel = nullptr);

} // namespace butlers
