#pragma once

#include <chrono>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/http_api.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/dashboard.hpp"

namespace butlers {

/// The web dashboard (runtime/dashboard/README.md): its shell and the
/// `/api/...` endpoints it reads.
///
/// - `GET /`, `GET /assets/{file}`: the static shell, compiled into the
///   binary, open without the token: it holds no data (every number comes
///   from `/api/...`), and a browser cannot send a bearer token when it
///   navigates to a page.
/// - `GET /api/overview`: intake and completion totals and rates, in-flight
///   work, queues, open circuits and each butler's slots, from the node's
///   metrics.
/// - `GET /api/requests?offset&limit&q&state`: requests newest first
///   (PaginatedResponse); `q` a request id or its prefix.
/// - `GET /api/requests/{id}`: `GET /v1/requests/{id}` as an ApiResponse.
/// - `GET /api/butlers`: `GET /v1/butlers` with each butler's slots in use,
///   queue and circuit.
/// - `GET /api/dead-letters?offset&limit&state=open|replayed`.
/// - `GET /api/approvals?offset&limit&q`: the approval questions still
///   waiting for their answer, the oldest first; `q` a butler's name.
///
/// Reads go through the node's db_reader with named statements; list
/// endpoints take `limit` 1..200 and answer 400 naming a bad parameter.
class dashboard_api {
 public:
  /// `settings` and `ctx` outlive this.
  dashboard_api(caf::actor_system& sys, const node_settings& settings,
                node_context_ptr ctx);

  /// GET / and GET /assets/{file}.
  void file(const http_call& call, http_responder& out, const path_params& p);

  /// GET /api/overview.
  void overview(const http_call& call, http_responder& out,
                const path_params& p);

  /// GET /api/requests.
  void requests(const http_call& call, http_responder& out,
                const path_params& p);

  /// GET /api/requests/{id}.
  void request(const http_call& call, http_responder& out,
               const path_params& p);

  /// GET /api/butlers.
  void butlers(const http_call& call, http_responder& out,
               const path_params& p);

  /// GET /api/dead-letters.
  void dead_letters(const http_call& call, http_responder& out,
                    const path_params& p);

  /// GET /api/approvals.
  void approvals(const http_call& call, http_responder& out,
                 const path_params& p);

  /// Anything else under /api/ (but /api/connectors...).
  void other(const http_call& call, http_responder& out, const path_params& p);

 private:
  /// Answers a page read by `stmt` (see `api_page_from_read`).
  void read_page(http_responder& out, named_statement stmt,
                 const dashboard_page_query& q);

  std::chrono::milliseconds timeout() const;

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
  std::unique_ptr<dashboard_overview> overview_;
};

} // namespace butlers
