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

/// Where an `http://` or `https://` URL points.
struct http_url {
  /// https://: TLS with certificate and host name checks.
  bool tls = false;
  /// Host name or IPv4 address; an IPv6 literal without its brackets.
  std::string host;
  /// 80 or 443 unless the URL names one.
  uint16_t port = 80;
  /// Path and query as sent in the request line; never empty.
  std::string target = "/";

  /// The URL again, normalised (scheme lower case, default port dropped).
  std::string str() const;
};

/// Parses `http[s]://host[:port][/path][?query]`; the fragment is dropped.
/// Every other scheme, user info, a missing host, a bad port and control
/// characters or spaces are errors. On failure returns nullopt and, when
/// `error` is not null, stores the reason.
std::optional<http_url> parse_http_url(std::string_view url,
                                       std::string* error);

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

/// Delivers with retries, one POST per attempt (Content-Type:
/// application/json) through shared_http_client(), so attempts and
/// deliveries reuse kept-alive connections: 2xx = delivered; other 4xx (and
/// 3xx: redirects are not followed) = permanent failure, no retry; 5xx, 408,
/// 429, connect errors and timeouts are retried up to `policy.retries` times
/// with full-jitter exponential backoff. On 429 and 503 a `Retry-After` in
/// seconds replaces the jitter, capped by `backoff_cap`. Every attempt
/// carries `Idempotency-Key: <idempotency_key>`, so the receiver can drop
/// the duplicates retries may cause. Each attempt is bounded by
/// `policy.timeout`; the first 64 KiB of a refusal's body go into the error.
/// `cancel`, when not null, is checked before each attempt, during it and
/// every 50 ms while sleeping; a cancelled delivery returns promptly with
/// error "cancelled" and retryable = true. Blocking: never on a
/// cooperatively scheduled actor.
webhook_outcome deliver_webhook(const http_url& url, std::string_view body,
                                std::string_view idempotency_key,
                                const webhook_policy& policy,
                                const std::atomic<bool>* cancel = nullptr);

} // namespace butlers
