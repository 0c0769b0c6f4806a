#pragma once

// Connector health and statistics over HTTP (actors/README.md; spec 001
// §17.5–§17.7): the heartbeat endpoint, the rollup
// endpoint for operators and tests, and the dashboard API's connector
// endpoints (ApiResponse / PaginatedResponse, runtime/api_response.hpp).
// Nothing here knows restinio; the HTTP server routes to it.

#include <chrono>

#include <caf/fwd.hpp>

#include "actors/http_api.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/http_router.hpp"

namespace butlers {

class connector_stats_api {
 public:
  /// `settings` and `ctx` outlive this.
  connector_stats_api(caf::actor_system& sys, const node_settings& settings,
                      node_context_ptr ctx);

  /// POST /v1/connectors/heartbeat: a `connector.heartbeat.v1`, checked
  /// here (400 naming the field), then queued: 202 once queued (before it
  /// is written), 429 when the queue is full, 503 without a switchboard.
  void heartbeat(const http_call& call, http_responder& out,
                 const path_params& p);

  /// POST /v1/connectors/rollup `{"kind": "hourly|daily|fanout|retention",
  /// "at": RFC 3339 (default now)}`: runs that rollup now; 200 with what
  /// each statement did once committed.
  void rollup(const http_call& call, http_responder& out, const path_params& p);

  /// GET /api/connectors?offset=&limit=: the registry with liveness and
  /// today's summary (PaginatedResponse).
  void list(const http_call& call, http_responder& out, const path_params& p);

  /// GET /api/connectors/{type}/{identity}: one connector; 404 unknown.
  void detail(const http_call& call, http_responder& out, const path_params& p);

  /// GET /api/connectors/{type}/{identity}/stats?period=24h|7d|30d.
  void stats(const http_call& call, http_responder& out, const path_params& p);

  /// GET /api/connectors/summary?period=24h|7d|30d.
  void summary(const http_call& call, http_responder& out,
               const path_params& p);

  /// GET /api/connectors/fanout?period=7d|30d.
  void fanout(const http_call& call, http_responder& out, const path_params& p);

 private:
  std::chrono::milliseconds timeout() const;

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
};

} // namespace butlers
