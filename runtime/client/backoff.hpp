#pragma once

// Which answers the client retries, and how long it waits before a retry.

#include <chrono>
#include <optional>
#include <random>

#include "runtime/client/butlers_client.hpp"

namespace butlers::client {

/// A 2xx answer: the operation is durable on the node.
bool succeeded(const response& r);

/// Worth another attempt: a transport error that is not permanent, 429,
/// 503 or 504. Every other answer fails the operation at once.
bool retryable(const response& r);

/// The wait before retry number `retry` (1 after the first attempt): full
/// jitter, uniform in [0, min(cap, base * 2^(retry-1))], raised to the
/// node's `Retry-After` (itself bounded by `cap`) when one came.
std::chrono::milliseconds
backoff_delay(const retry_policy& p, int retry,
              std::optional<std::chrono::milliseconds> retry_after,
              std::mt19937_64& rng);

} // namespace butlers::client
