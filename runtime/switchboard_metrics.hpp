#pragma once

#include "runtime/fair_queue.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// The switchboard's own metrics (spec 001 §12.2, spec 000 §4.1; dots as
/// underscores): ingest, the hot path, lifecycle and planning. The request
/// tracker registers those of the requests in progress.
struct switchboard_metrics {
  switchboard_metrics() = default;
  explicit switchboard_metrics(metrics_registry& m);

  counter* received = nullptr;
  counter* deduplicated = nullptr;
  counter* overload_rejected = nullptr;
  counter* enqueued_hot = nullptr;
  counter* enqueued_cold = nullptr;
  counter* backpressure = nullptr;
  counter* recovered = nullptr;
  counter* lease_lost = nullptr;
  counter* lifecycle_parsed = nullptr;
  counter* lifecycle_errored = nullptr;
  counter* lifecycle_cancelled = nullptr;
  counter* fallback_to_general = nullptr;
  counter* router_parse_failure = nullptr;
  counter* policy_reroutes = nullptr;
  counter* notify_handed = nullptr;
  counter* notify_rejected = nullptr;
  gauge* queue_depth = nullptr;
  gauge* inflight_requests = nullptr;
  histogram* process_latency = nullptr;
  /// The hot path's fair queue.
  fair_queue_metrics fair;
};

} // namespace butlers
