#include "runtime/switchboard_metrics.hpp"

namespace butlers {

switchboard_metrics::switchboard_metrics(metrics_registry& m) {
  received = &m.get_counter("butlers_switchboard_message_received",
                            "Requests accepted and stored");
  deduplicated = &m.get_counter("butlers_switchboard_message_deduplicated",
                                "Requests answered with an earlier "
                                "request's id");
  overload_rejected
    = &m.get_counter("butlers_switchboard_message_overload_rejected",
                     "Requests rejected by admission control (429)");
  enqueued_hot = &m.get_counter("butlers_buffer_enqueue_total",
                                "Messages put on the in-memory queue",
                                "path=\"hot\"");
  enqueued_cold = &m.get_counter("butlers_buffer_enqueue_total",
                                 "Messages put on the in-memory queue",
                                 "path=\"cold\"");
  backpressure = &m.get_counter("butlers_buffer_backpressure_total",
                                "Stored messages left to the cold path "
                                "because the queue was full");
  recovered = &m.get_counter("butlers_buffer_scanner_recovered_total",
                             "Messages re-enqueued by the cold path");
  lease_lost = &m.get_counter("butlers_buffer_lease_lost_total",
                              "Completions refused because the lease had "
                              "passed to another worker");
  lifecycle_parsed = &m.get_counter("butlers_switchboard_lifecycle_"
                                    "transition",
                                    "Lifecycle transitions by target state",
                                    "lifecycle_state=\"parsed\"");
  lifecycle_errored = &m.get_counter("butlers_switchboard_lifecycle_"
                                     "transition",
                                     "Lifecycle transitions by target "
                                     "state",
                                     "lifecycle_state=\"errored\"");
  lifecycle_cancelled = &m.get_counter("butlers_switchboard_lifecycle_"
                                       "transition",
                                       "Lifecycle transitions by target "
                                       "state",
                                       "lifecycle_state=\"cancelled\"");
  fallback_to_general = &m.get_counter("butlers_switchboard_fallback_to_"
                                       "general",
                                       "Requests routed whole to general "
                                       "(no match, low confidence, router "
                                       "failure, policy)");
  router_parse_failure = &m.get_counter("butlers_switchboard_router_parse_"
                                        "failure",
                                        "Router outputs that did not "
                                        "validate");
  policy_reroutes = &m.get_counter("butlers_switchboard_policy_reroutes_"
                                   "total",
                                   "Segments re-targeted by "
                                   "[[router.rule]]");
  notify_handed = &m.get_counter("butlers_switchboard_notify_total",
                                 "notify.v1 handed to the messenger",
                                 "outcome=\"accepted\"");
  notify_rejected = &m.get_counter("butlers_switchboard_notify_total",
                                   "notify.v1 handed to the messenger",
                                   "outcome=\"rejected\"");
  queue_depth = &m.get_gauge("butlers_buffer_queue_depth",
                             "Messages in the in-memory queue");
  inflight_requests = &m.get_gauge("butlers_switchboard_inflight_requests",
                                   "Ingest requests waiting for their "
                                   "commit");
  process_latency = &m.get_histogram("butlers_buffer_process_latency_ms",
                                     "From received_at to the start of "
                                     "processing");
  // -- fair admission --
  fair.sources = &m.get_gauge("butlers_fair_queue_sources",
                              "Sources with requests in the hot-path queue");
  auto overflow = [&m](const char* reason) {
    return &m.get_counter("butlers_fair_queue_overflow_total",
                          "Requests the hot-path queue had no room for (they "
                          "stay accepted in the inbox), by reason",
                          std::string{"reason=\""} + reason + "\"");
  };
  fair.source_full = overflow("source_full");
  fair.total_full = overflow("total_full");
  fair.shed = overflow("shed");
}

} // namespace butlers
