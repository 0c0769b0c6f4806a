#include "actors/worker_api.hpp"

#include "actors/http_bridge.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/worker_wire.hpp"

namespace butlers {

namespace {

http_reply render(const worker_reply& r) {
  if (r.code == 0)
    return json_reply(200, r.body);
  return error_reply(static_cast<butlers_errc>(r.code), r.message);
}

} // namespace

worker_api::worker_api(caf::actor_system& sys, const node_settings& settings,
                       node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)) {
  // nop
}

void worker_api::recv(const http_call& call, http_responder& out,
                      const path_params& p) {
  worker_call wc;
  if (!call.body.empty())
    if (auto no = refuse_json_body(call.content_type, call.body.size(),
                                   settings_.http.max_body_bytes))
      return out.now(std::move(*no));
  if (auto bad = parse_worker_body(worker_op::recv, call.body, wc);
      !bad.empty())
    return out.now(validation_reply(bad));
  // The butler answers a recv after wait_ms at the latest.
  auto timeout = std::chrono::milliseconds{wc.wait_ms
                                           + settings_.http.request_timeout_ms};
  send(call, out, p, std::move(wc), timeout);
}

void worker_api::item(const http_call& call, http_responder& out,
                      const path_params& p) {
  worker_op op;
  if (!parse_worker_verb(p["verb"], op))
    return out.now(no_route_reply(call.method, call.path));
  if (auto no = refuse_json_body(call.content_type, call.body.size(),
                                 settings_.http.max_body_bytes))
    return out.now(std::move(*no));
  worker_call wc;
  if (auto bad = parse_worker_body(op, call.body, wc); !bad.empty())
    return out.now(validation_reply(bad));
  wc.work_id = std::string{p["work_id"]};
  send(call, out, p, std::move(wc),
       std::chrono::milliseconds{settings_.http.request_timeout_ms});
}

void worker_api::send(const http_call&, http_responder& out,
                      const path_params& p, worker_call wc,
                      std::chrono::milliseconds timeout) {
  auto reg = ctx_->registry();
  if (!reg)
    return out.now(no_registry_reply(ctx_->status.database_configured));
  if (ctx_->status.draining)
    return out.now(draining_reply());
  auto answer = out.later();
  auto name = std::string{p["name"]};
  auto& sys = sys_;
  auto lookup_timeout = std::chrono::milliseconds{
    settings_.http.request_timeout_ms};
  bridge<butler_actor>(
    sys, std::move(reg), lookup_timeout,
    [&sys, answer, timeout, wc](butler_actor& b) mutable {
      bridge<worker_reply>(
        sys, b, timeout,
        [answer](worker_reply& r) {
          answer(render(r));
        },
        [answer](const caf::error& err) {
          answer(failure_reply(err));
        },
        worker_atom_v, std::move(wc));
    },
    [answer, name](const caf::error&) {
      answer(no_butler_reply(name));
    },
    lookup_atom_v, name);
}

} // namespace butlers
