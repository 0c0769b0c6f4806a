// The Slack Events API route of `connector_api` (actors/connector_api.hpp,
// actors/SLACK.md): signature, url_verification, mapping, submission.

#include <spdlog/spdlog.h>

#include "actors/connector_api.hpp"
#include "runtime/json.hpp"
#include "runtime/slack_event.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// 401 for a request whose signature does not hold (no bearer challenge:
/// Slack sends none).
http_reply slack_unauthorized_reply(slack_signature_status why) {
  std::string message;
  switch (why) {
    case slack_signature_status::no_secret:
      message = "the connector has no signing secret";
      break;
    case slack_signature_status::missing:
      message = "missing X-Slack-Signature or X-Slack-Request-Timestamp";
      break;
    case slack_signature_status::stale:
      message = "X-Slack-Request-Timestamp is more than 5 minutes off";
      break;
    default: message = "X-Slack-Signature does not match"; break;
  }
  auto r = error_reply(butlers_errc::unauthorized, message);
  r.bearer_challenge = false;
  return r;
}

/// "event Ev123 (retry 2)" for logs.
std::string event_label(const slack_event_mapping& m,
                        const std::optional<std::string_view>& retry) {
  auto out = m.event_id.empty() ? std::string{"an event"}
                                : "event " + m.event_id;
  if (retry)
    out += " (retry " + std::string{retry->substr(0, 8)} + ")";
  return out;
}

} // namespace

void connector_api::slack_metrics(entry& e) {
  auto labels = [&](const char* key, const char* value) {
    return "connector=\"" + e.cfg.name + "\"," + key + "=\"" + value + "\"";
  };
  for (auto x : {slack_ignore_reason::bot, slack_ignore_reason::edit,
                 slack_ignore_reason::deletion, slack_ignore_reason::other})
    e.slack_ignored.at(static_cast<size_t>(x)) = &ctx_->metrics.get_counter(
      "butlers_connector_slack_ignored_total",
      "Slack events a connector acknowledged without storing, by reason",
      labels("reason", to_string(x)));
  for (auto x :
       {slack_signature_status::no_secret, slack_signature_status::missing,
        slack_signature_status::stale, slack_signature_status::mismatch})
    e.slack_refused.at(static_cast<size_t>(x)) = &ctx_->metrics.get_counter(
      "butlers_connector_slack_unauthorized_total",
      "Slack requests refused with 401, by what was wrong with the signature",
      labels("reason", to_string(x)));
}

void connector_api::slack_events(const http_call& call, http_responder& out,
                                 const path_params& p) {
  auto* e = find(p["name"], connector_type::slack);
  if (e == nullptr)
    return out.now(no_connector_reply("slack", p["name"]));
  auto& name = e->cfg.name;
  auto verdict = verify_slack_signature(e->cfg.signing_secret,
                                        call.header_value(
                                          "X-Slack-Request-Timestamp"),
                                        call.header_value("X-Slack-Signature"),
                                        call.body, unix_now_ms() / 1000);
  if (verdict != slack_signature_status::valid) {
    e->slack_refused.at(static_cast<size_t>(verdict))->inc();
    spdlog::warn("connector {}: a request refused: signature {}", name,
                 to_string(verdict));
    return out.now(slack_unauthorized_reply(verdict));
  }
  if (ctx_->status.draining)
    return out.now(draining_reply());
  if (!ctx_->connector(name))
    return out.now(connector_down_reply(name));
  e->metrics.received->inc();
  auto m = call.body.size() <= settings_.http.max_body_bytes
             ? map_slack_event(call.body, e->cfg.endpoint_identity)
             : slack_event_mapping{slack_event_verdict::invalid,
                                   {},
                                   {},
                                   slack_ignore_reason::none,
                                   "body exceeds http.max_body_bytes",
                                   {}};
  auto label = event_label(m, call.header_value("X-Slack-Retry-Num"));
  if (m.verdict == slack_event_verdict::challenge) {
    spdlog::info("connector {}: url_verification answered", name);
    return out.now(
      json_reply(200, R"({"challenge":)" + json::quote(m.challenge) + "}"));
  }
  if (m.verdict == slack_event_verdict::ignored) {
    e->metrics.ignored->inc();
    if (auto* c = e->slack_ignored.at(static_cast<size_t>(m.ignored)))
      c->inc();
    spdlog::debug("connector {}: {} ignored: {}", name, label, m.reason);
    return out.now(webhook_ack_reply("ignored", {}, m.reason));
  }
  std::optional<inbox_record> rec;
  if (m.verdict == slack_event_verdict::envelope) {
    auto parsed = parse_connector_envelope(m.envelope, e->rules, {},
                                           unix_now_us());
    if (parsed.record)
      rec = std::move(parsed.record);
    else
      m.reason = describe_rejection(parsed);
  }
  if (!rec) {
    e->metrics.invalid->inc();
    spdlog::warn("connector {}: {} is invalid and was dropped: {}", name, label,
                 m.reason);
    return out.now(webhook_ack_reply("invalid", {}, m.reason));
  }
  spdlog::debug("connector {}: {} submitted", name, label);
  submit(
    *e, std::move(*rec), out,
    [](const append_result& r) {
      return webhook_ack_reply(r.duplicate ? "deduped" : "accepted",
                               r.request_id);
    },
    [](const caf::error& err) {
      if (code_of(err) == butlers_errc::sender_rate_limited)
        return webhook_ack_reply("rate_limited", {}, message_of(err));
      return failure_reply(err);
    });
}

} // namespace butlers
