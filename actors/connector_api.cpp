#include "actors/connector_api.hpp"

#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/http_bridge.hpp"
#include "runtime/attachment_store.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/slack_event.hpp"
#include "runtime/telegram_update.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// The header Telegram sends the webhook's secret token in.
constexpr std::string_view secret_header = "X-Telegram-Bot-Api-Secret-Token";

/// "update 123" or "an update" for logs.
std::string update_label(const telegram_update_mapping& m) {
  return m.update_id ? "update " + std::to_string(*m.update_id)
                     : std::string{"an update"};
}

/// What Telegram is answered when the connector could not store an Update:
/// every status but a 2xx makes it retry later, which is what an outage
/// calls for; a refusal that could never change is a 200 (the caller made
/// sure of that before submitting).
/// A webhook's failure: its status (the platform sends it again), except a
/// sender over its rate limit, which is acknowledged as refused (the sender
/// is told once; a redelivery would only be refused again).
http_reply webhook_failure(const caf::error& err) {
  if (code_of(err) == butlers_errc::sender_rate_limited)
    return webhook_ack_reply("rate_limited", {}, message_of(err));
  return failure_reply(err);
}

} // namespace

connector_api::connector_api(caf::actor_system& sys,
                             const node_settings& settings,
                             node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)) {
  // Only a node that runs the switchboard runs connectors.
  if (!settings_.cluster.switchboard)
    return;
  auto webhook_files = false;
  for (auto& cfg : settings_.connectors) {
    if (!cfg.enabled)
      continue;
    entry e;
    e.cfg = cfg;
    e.metrics = connector_metrics::of(ctx_->metrics, cfg.name);
    e.rules.connector = cfg.name;
    e.rules.endpoint_identity = cfg.endpoint_identity;
    e.rules.max_bytes = settings_.http.max_body_bytes;
    e.rules.dedupe_window_s = settings_.switchboard.dedupe_window_s;
    if (cfg.type == connector_type::slack)
      slack_metrics(e);
    webhook_files = webhook_files
                    || (cfg.type == connector_type::telegram
                        && cfg.mode == connector_mode::webhook);
    entries_.emplace(cfg.name, std::move(e));
  }
  if (webhook_files && !settings_.database.url.empty()) {
    files_ = std::make_shared<attachment_store>(settings_.database.url,
                                                settings_.attachments, 1);
    files_pool_ = std::make_shared<blocking_pool>(2, 16);
  }
}

const connector_api::entry* connector_api::find(std::string_view name,
                                                connector_type type) const {
  auto i = entries_.find(name);
  if (i == entries_.end() || i->second.cfg.type != type)
    return nullptr;
  return &i->second;
}

void connector_api::submit(
  const entry& e, inbox_record rec, http_responder& out,
  std::function<http_reply(const append_result&)> render,
  std::function<http_reply(const caf::error&)> fail) {
  auto hdl = ctx_->connector(e.cfg.name);
  if (!hdl)
    return out.now(connector_down_reply(e.cfg.name));
  auto answer = out.later();
  bridge<append_result>(
    sys_, std::move(hdl),
    std::chrono::milliseconds{settings_.http.request_timeout_ms},
    [answer, render](const append_result& r) {
      answer(render(r));
    },
    [answer, fail](const caf::error& err) {
      answer(fail(err));
    },
    ingest_atom_v, std::move(rec));
}

void connector_api::telegram_webhook(const http_call& call, http_responder& out,
                                     const path_params& p) {
  auto* e = find(p["name"], connector_type::telegram);
  if (e == nullptr || e->cfg.mode != connector_mode::webhook)
    return out.now(no_connector_reply("telegram webhook", p["name"]));
  if (!secret_matches(e->cfg.secret_token, call.header_value(secret_header)))
    return out.now(webhook_secret_reply());
  if (ctx_->status.draining)
    return out.now(draining_reply());
  if (!ctx_->connector(e->cfg.name))
    return out.now(connector_down_reply(e->cfg.name));
  auto& name = e->cfg.name;
  e->metrics.received->inc();
  telegram_update_mapping m;
  if (call.body.size() <= settings_.http.max_body_bytes) {
    m = map_telegram_update(call.body, e->cfg.endpoint_identity);
  } else {
    m.verdict = update_verdict::invalid;
    m.reason = "body exceeds http.max_body_bytes";
  }
  if (m.verdict == update_verdict::ignored && m.kind == "callback_query") {
    // A press on an approval question's button (runtime/approvals.md).
    if (auto tools = ctx_->tool_server())
      caf::anon_send(tools, approve_atom_v, e->cfg.endpoint_identity,
                     std::string{call.body});
    return out.now(webhook_ack_reply("callback", {}, {}));
  }
  if (m.verdict == update_verdict::envelope && !m.media.empty()) {
    if (files_pool_)
      return submit_with_files(*e, std::move(m), out);
    // No database to store files in: a caption goes alone.
    if (!m.has_text) {
      m.verdict = update_verdict::ignored;
      m.reason = m.kind + " of media only (no database to store files in)";
    }
  }
  if (m.verdict == update_verdict::ignored) {
    e->metrics.ignored->inc();
    spdlog::debug("connector {}: {} ignored: {}", name, update_label(m),
                  m.reason);
    return out.now(webhook_ack_reply("ignored", {}, m.reason));
  }
  std::optional<inbox_record> rec;
  if (m.verdict == update_verdict::envelope) {
    auto parsed = parse_connector_envelope(m.envelope, e->rules, {},
                                           unix_now_us());
    if (parsed.record)
      rec = std::move(parsed.record);
    else
      m.reason = describe_rejection(parsed);
  }
  if (!rec) {
    e->metrics.invalid->inc();
    spdlog::warn("connector {}: {} is invalid and was dropped: {}", name,
                 update_label(m), m.reason);
    return out.now(webhook_ack_reply("invalid", {}, m.reason));
  }
  submit(
    *e, std::move(*rec), out,
    [](const append_result& r) {
      return webhook_ack_reply(r.duplicate ? "deduped" : "accepted",
                               r.request_id);
    },
    webhook_failure);
}

void connector_api::ingest(const http_call& call, http_responder& out,
                           const path_params& p) {
  auto* e = find(p["name"], connector_type::http);
  if (e == nullptr)
    return out.now(no_connector_reply("http", p["name"]));
  if (ctx_->status.draining)
    return out.now(draining_reply());
  if (!call.content_type || !is_json_media_type(*call.content_type))
    return out.now(not_json_reply());
  if (call.body.size() > settings_.http.max_body_bytes)
    return out.now(
      ingest_too_large_reply(call.body.size(), settings_.http.max_body_bytes));
  if (!ctx_->connector(e->cfg.name))
    return out.now(connector_down_reply(e->cfg.name));
  e->metrics.received->inc();
  auto parsed = parse_connector_envelope(call.body, e->rules, {},
                                         unix_now_us());
  if (!parsed.record) {
    e->metrics.invalid->inc();
    return out.now(parsed.parse_error.empty()
                     ? ingest_violations_reply(parsed.violations)
                     : ingest_not_json_reply(parsed.parse_error));
  }
  submit(
    *e, std::move(*parsed.record), out,
    [](const append_result& r) {
      return ingest_reply(r);
    },
    [](const caf::error& err) {
      return ingest_failure_reply(err);
    });
}

void connector_api::other(const http_call& call, http_responder& out,
                          const path_params&) {
  out.now(no_route_reply(call.method, call.path));
}

} // namespace butlers
