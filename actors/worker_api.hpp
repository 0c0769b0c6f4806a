#pragma once

#include <chrono>

#include <caf/fwd.hpp>

#include "actors/http_api.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"

namespace butlers {

/// The HTTP routes of external workers (actors/README.md "Writing a butler in
/// any language"), checked on the HTTP thread, then handed to the butler (its
/// external runner answers; others answer 409):
///
/// - `POST /v1/butlers/{name}/work/recv` `{max, visibility_ms, wait_ms}`:
///   up to `max` items, waiting up to `wait_ms` for one (long poll; the
///   request waits in the butler, no thread does);
/// - `POST /v1/butlers/{name}/work/{work_id}/ack` `{lease_token, response |
///   reply}`, `.../nack` `{lease_token, retryable, delay_ms, error,
///   error_class}`, `.../extend` `{lease_token, visibility_ms}`;
/// - `GET /v1/butlers/{name}/work/{work_id}/files/{sha256}`: the bytes of a
///   file the running item's route.v1 names (`input.context.attachments`),
///   read from the database (a worker of any node may fetch it).
///
/// 400 names the bad field, 404 an unknown butler, 409 a stale token or a
/// butler that is not external, 429 (+ Retry-After) too many waiting recv
/// calls, 503 while the node drains.
class worker_api {
 public:
  /// `settings` and `ctx` outlive this.
  worker_api(caf::actor_system& sys, const node_settings& settings,
             node_context_ptr ctx);

  /// POST /v1/butlers/{name}/work/recv.
  void recv(const http_call& call, http_responder& out, const path_params& p);

  /// POST /v1/butlers/{name}/work/{work_id}/{verb}: ack, nack or extend.
  void item(const http_call& call, http_responder& out, const path_params& p);

  /// GET /v1/butlers/{name}/work/{work_id}/files/{sha256}: 200 with the
  /// bytes and their media type; 404 unless the item is running and names
  /// the file (and its bytes are still kept).
  void file(const http_call& call, http_responder& out, const path_params& p);

 private:
  void send(const http_call& call, http_responder& out, const path_params& p,
            worker_call wc, std::chrono::milliseconds timeout);

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
};

} // namespace butlers
