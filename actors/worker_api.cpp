#include "actors/worker_api.hpp"

#include "actors/http_bridge.hpp"
#include "runtime/attachments.hpp"
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

namespace {

bool is_sha256_hex(std::string_view x) {
  return x.size() == 64
         && x.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

/// The file of a `worker_file` row, or 404.
http_reply file_reply(const named_result& r, const std::string& sha) {
  if (!r.ok)
    return error_reply(butlers_errc::internal_error, "file query failed");
  if (r.rows.empty() || r.rows[0].size() < 3)
    return error_reply(butlers_errc::not_found,
                       "no file " + sha
                         + " of a running item (the item is not running, "
                           "does not name it, or its bytes are gone)");
  auto bytes = base64_decode(r.rows[0][2]);
  if (!bytes)
    return error_reply(butlers_errc::internal_error, "file unreadable");
  http_reply out;
  out.content_type = r.rows[0][0];
  out.no_store = true;
  out.body = std::move(*bytes);
  return out;
}

} // namespace

void worker_api::file(const http_call&, http_responder& out,
                      const path_params& p) {
  auto work_id = std::string{p["work_id"]};
  auto sha = std::string{p["sha256"]};
  if (!is_uuid(work_id))
    return out.now(validation_reply("work_id must be a UUID"));
  if (!is_sha256_hex(sha))
    return out.now(validation_reply("sha256 must be 64 lower-case hex digits"));
  auto rd = ctx_->reader();
  if (!rd)
    return out.now(no_reader_reply());
  auto answer = out.later();
  bridge<named_result>(
    sys_, std::move(rd),
    std::chrono::milliseconds{settings_.http.request_timeout_ms},
    [answer, sha](named_result& r) {
      answer(file_reply(r, sha));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    read_atom_v,
    named_statement{"worker_file", {std::string{p["name"]}, work_id, sha}});
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
