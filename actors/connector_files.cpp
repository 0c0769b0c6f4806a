// Telegram webhook mode with files (runtime/attachments.md): the Update's
// files are fetched with getFile and stored on a pool thread, never on the
// HTTP thread, and the Update is answered once its message is stored (or
// refused, with a message to the person). Telegram waits for the answer
// and sends the Update again after any non-2xx.

#include <caf/actor_system.hpp>
#include <spdlog/spdlog.h>

#include "actors/connector_api.hpp"
#include "actors/http_bridge.hpp"
#include "runtime/attachment_store.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/http_client.hpp"
#include "runtime/telegram_files.hpp"

namespace butlers {

namespace {

/// Everything a fetch needs, owned by the job: the HTTP server and its
/// connector_api may be gone when it runs at shutdown.
struct files_job {
  caf::actor_system* sys = nullptr;
  node_context_ptr ctx;
  connector_actor connector;
  std::string name;
  std::string api_base;
  std::string token;
  std::string endpoint_identity;
  connector_ingest_rules rules;
  connector_metrics metrics;
  attachment_limits caps;
  std::shared_ptr<attachment_store> store;
  std::chrono::milliseconds timeout{0};
  telegram_update_mapping m;
  std::function<void(http_reply)> answer;
};

/// Tells the person why their message was not taken (through the
/// messenger, like any reply), then acknowledges the Update; Telegram sends
/// it again when the messenger could not take the notice (its idempotency
/// key makes that one message).
void refuse(const std::shared_ptr<files_job>& j, const std::string& reason) {
  spdlog::info("connector {}: update {} refused: {}", j->name,
               j->m.update_id.value_or(0), reason);
  auto notify = attachment_refusal_notify("telegram",
                                          std::to_string(j->m.chat_id), reason,
                                          "attachment-refused:"
                                            + j->endpoint_identity + ":"
                                            + std::to_string(
                                              j->m.update_id.value_or(0)));
  auto sb = j->ctx->switchboard();
  if (!sb)
    return j->answer(
      error_reply(butlers_errc::target_unavailable, "no switchboard"));
  bridge<route_response>(
    *j->sys, std::move(sb), j->timeout,
    [j, reason](route_response& r) {
      if (r.status == "error")
        return j->answer(error_reply(butlers_errc::target_unavailable,
                                     "the refusal was not delivered"));
      j->metrics.attachments_refused->inc();
      j->answer(webhook_ack_reply("refused", {}, reason));
    },
    [j](const caf::error& err) {
      j->answer(failure_reply(err));
    },
    deliver_atom_v, std::move(notify));
}

void run(const std::shared_ptr<files_job>& j) {
  auto fetch = [](const http_request& req, const std::atomic<bool>* cancel) {
    return shared_http_client().perform(req, cancel);
  };
  // A drain cancels the download: Telegram gets a 503 and sends the Update
  // again (to this node once it is back, or to another).
  auto& draining = j->ctx->status.draining;
  auto got = fetch_telegram_media(j->m.media, j->caps, j->api_base, j->token,
                                  fetch, j->store.get(), &draining);
  if (draining.load())
    return j->answer(draining_reply());
  if (got.what == media_fetch::kind::refused)
    return refuse(j, got.reason);
  if (got.what == media_fetch::kind::retry) {
    j->metrics.errors->inc();
    spdlog::warn("connector {}: the files of update {} were not fetched "
                 "({}); Telegram sends it again",
                 j->name, j->m.update_id.value_or(0), got.reason);
    return j->answer(error_reply(butlers_errc::target_unavailable,
                                 "files not fetched: " + got.reason));
  }
  auto envelope = with_attachments(std::move(j->m.envelope), got.refs);
  auto parsed = parse_connector_envelope(envelope, j->rules, {}, unix_now_us());
  if (!parsed.record) {
    j->metrics.invalid->inc();
    return j->answer(
      webhook_ack_reply("invalid", {}, describe_rejection(parsed)));
  }
  bridge<append_result>(
    *j->sys, j->connector, j->timeout,
    [j](const append_result& r) {
      j->answer(
        webhook_ack_reply(r.duplicate ? "deduped" : "accepted", r.request_id));
    },
    [j](const caf::error& err) {
      j->answer(code_of(err) == butlers_errc::sender_rate_limited
                  ? webhook_ack_reply("rate_limited", {}, message_of(err))
                  : failure_reply(err));
    },
    ingest_atom_v, std::move(*parsed.record));
}

} // namespace

void connector_api::submit_with_files(const entry& e, telegram_update_mapping m,
                                      http_responder& out) {
  auto hdl = ctx_->connector(e.cfg.name);
  if (!hdl)
    return out.now(connector_down_reply(e.cfg.name));
  auto j = std::make_shared<files_job>();
  j->sys = &sys_;
  j->ctx = ctx_;
  j->connector = std::move(hdl);
  j->name = e.cfg.name;
  j->api_base = e.cfg.api_base;
  j->token = e.cfg.token;
  j->endpoint_identity = e.cfg.endpoint_identity;
  j->rules = e.rules;
  j->metrics = e.metrics;
  j->caps = settings_.attachments;
  j->store = files_;
  j->timeout = std::chrono::milliseconds{settings_.http.request_timeout_ms};
  j->m = std::move(m);
  j->answer = out.later();
  if (!files_pool_->post([j] {
        run(j);
      }))
    j->answer(error_reply(butlers_errc::overload_rejected,
                          "every file download thread is busy"));
}

} // namespace butlers
