#include "runtime/client/backoff.hpp"

#include <algorithm>

namespace butlers::client {

using std::chrono::milliseconds;

bool succeeded(const response& r) {
  return !r.transport_error && r.status >= 200 && r.status < 300;
}

bool retryable(const response& r) {
  if (r.transport_error)
    return !r.permanent;
  return r.status == 429 || r.status == 503 || r.status == 504;
}

milliseconds backoff_delay(const retry_policy& p, int retry,
                           std::optional<milliseconds> retry_after,
                           std::mt19937_64& rng) {
  auto cap = std::max(p.cap.count(), milliseconds::rep{0});
  auto ceiling = std::max(p.base.count(), milliseconds::rep{0});
  for (int i = 1; i < retry && ceiling < cap; ++i)
    ceiling *= 2;
  ceiling = std::min(ceiling, cap);
  std::uniform_int_distribution<milliseconds::rep> pick{0, ceiling};
  auto wait = pick(rng);
  if (retry_after)
    wait = std::max(wait, std::min(retry_after->count(), cap));
  return milliseconds{wait};
}

} // namespace butlers::client
