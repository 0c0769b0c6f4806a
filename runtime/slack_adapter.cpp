#include "runtime/slack_adapter.hpp"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "runtime/http_client.hpp"
#include "runtime/interruptible_sleep.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/reaction_gate.hpp"
#include "runtime/resilience.hpp"
#include "runtime/scripted.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

delivery_attempt failed(const std::string& cls, std::string what,
                        bool retryable) {
  return {"slack: " + std::move(what), retryable, cls};
}

/// Whether a failed answer may succeed on a later run: an `ok:false` error
/// never does; a retry that ran out of attempts may.
bool retryable(const slack_answer& a) {
  return a.slack_error.empty() ? is_retryable_class(a.error_class)
                               : a.slack_error == "ratelimited";
}

std::optional<slack_message_ref> source_of(const delivery_context& dc,
                                           std::string& error) {
  auto id = dc.view.request_id.empty() ? dc.request_id : dc.view.request_id;
  auto src = dc.services.source_payload(id);
  if (!src.ok) {
    error = "source message of request " + id + " not read: " + src.error;
    return std::nullopt;
  }
  if (!src.found)
    return std::nullopt;
  return slack_source(src.raw_payload);
}

} // namespace

slack_adapter::slack_adapter(delivery_adapter_config cfg,
                             slack_endpoint endpoint, slack_timing timing)
  : delivery_adapter(std::move(cfg)), endpoint_(std::move(endpoint)),
    timing_(timing) {
  while (!endpoint_.api_base.empty() && endpoint_.api_base.back() == '/')
    endpoint_.api_base.pop_back();
}

bool slack_adapter::reacts() const {
  return true;
}

delivery_attempt slack_adapter::deliver(const delivery_context& dc) const {
  if (dc.view.intent == "react")
    return react(dc);
  return send_text(dc);
}

slack_answer slack_adapter::call(const std::string& method,
                                 const std::string& body,
                                 const delivery_context& dc,
                                 const outbound_send* send) const {
  std::mt19937_64 rng{std::random_device{}()};
  http_request req;
  req.method = "POST";
  req.url = endpoint_.api_base + "/" + method;
  req.headers.emplace_back("Content-Type", "application/json; charset=utf-8");
  // The token only here: headers are never logged.
  req.headers.emplace_back("Authorization", "Bearer " + endpoint_.token);
  req.body = body;
  req.timeout = std::chrono::milliseconds{cfg_.timeout_ms};
  req.connect_timeout = std::min<std::chrono::milliseconds>(req.timeout, 10s);
  for (uint32_t attempt = 0;; ++attempt) {
    auto a = read_slack_answer(shared_http_client().perform(req, dc.stop));
    if (a.what != slack_answer::outcome::retry)
      return a;
    if (attempt >= cfg_.retries || a.wait > timing_.max_retry_after) {
      a.what = slack_answer::outcome::fail;
      return a;
    }
    auto wait = a.wait.count() > 0
                  ? a.wait
                  : backoff_delay(attempt + 1, timing_.backoff_base,
                                  timing_.backoff_cap, rng);
    spdlog::info("slack: {} failed ({}: {}); attempt {} in {} ms", method,
                 a.error_class, a.description, attempt + 2, wait.count());
    if (!sleep_unless_stopped(wait, dc.stop)) {
      a.what = slack_answer::outcome::fail;
      a.description += " (stopped)";
      return a;
    }
    if (a.ambiguous && send != nullptr)
      dc.services.ledger_begin(*send);
  }
}

delivery_attempt slack_adapter::send_text(const delivery_context& dc) const {
  std::string channel;
  std::string thread;
  if (dc.view.intent != "send") {
    std::string error;
    auto src = source_of(dc, error);
    if (!error.empty())
      return failed("target_unavailable", error, true);
    if (src) {
      channel = src->channel;
      thread = src->thread_ts;
    }
  }
  if (channel.empty())
    channel = dc.view.recipient;
  if (channel.empty())
    return failed("validation_error", "no channel to send to", false);
  auto chunks = split_slack_text(dc.view.message);
  for (size_t i = 0; i < chunks.size(); ++i) {
    outbound_send s{{dc.request_id, dc.segment_id,
                     "chunk:" + std::to_string(i)},
                    "slack",
                    outbound_kind::message,
                    0,
                    {}};
    auto claim = dc.services.ledger_begin(s);
    if (!claim.ok)
      return failed("target_unavailable", "outbound ledger: " + claim.error,
                    true);
    if (claim.decision == send_decision::skip)
      continue;
    auto a = call("chat.postMessage",
                  slack_post_message_body(channel, chunks[i], thread), dc, &s);
    if (a.what != slack_answer::outcome::ok) {
      dc.services.ledger_dead(s, a.error_class, a.description);
      return failed(a.error_class, "chat.postMessage: " + a.description,
                    retryable(a));
    }
    auto mark = dc.services.ledger_end(s, ledger_state::sent, a.ts);
    if (!mark.ok)
      return failed("target_unavailable",
                    "sent, but not recorded in the outbound ledger: "
                      + mark.error,
                    true);
  }
  return {};
}

slack_answer slack_adapter::show(const slack_message_ref& msg,
                                 const std::string& name,
                                 const delivery_context& dc) const {
  auto a = call("reactions.add", slack_reaction_body(msg, name), dc, nullptr);
  if (a.what != slack_answer::outcome::ok && a.slack_error != "already_reacted")
    return a;
  for (auto x : {lifecycle_state::progress, lifecycle_state::queued,
                 lifecycle_state::parsed, lifecycle_state::errored}) {
    auto& other = reaction_emoji(cfg_.reactions, x);
    if (other == name)
      continue;
    // "no_reaction": it was not there, as most of them are not.
    auto r = call("reactions.remove", slack_reaction_body(msg, other), dc,
                  nullptr);
    if (r.what != slack_answer::outcome::ok && r.slack_error != "no_reaction")
      spdlog::debug("slack: reactions.remove of {} failed: {}", other,
                    r.description);
  }
  slack_answer ok;
  ok.what = slack_answer::outcome::ok;
  return ok;
}

delivery_attempt slack_adapter::react(const delivery_context& dc) const {
  auto state = lifecycle_state_of(dc.view.reaction_state);
  if (!state)
    return failed("validation_error",
                  "unknown lifecycle state '" + dc.view.reaction_state + "'",
                  false);
  std::string error;
  auto src = source_of(dc, error);
  if (!error.empty())
    return failed("target_unavailable", error, true);
  if (!src) {
    spdlog::debug("slack: request {} has no Slack message to react to",
                  dc.request_id);
    return {};
  }
  auto& name = reaction_emoji(cfg_.reactions, *state);
  auto rank = reaction_rank(*state, dc.view.reaction_at_us);
  // Never backwards: see runtime/reaction_gate.hpp.
  reaction_turn turn{dc.services.reaction_order(), dc.request_id, rank};
  if (turn.overtaken()) {
    dc.services.count_overtaken("slack");
    return {};
  }
  outbound_send s{{dc.request_id, dc.segment_id, "reaction"},
                  "slack",
                  outbound_kind::reaction,
                  rank,
                  name};
  auto claim = dc.services.ledger_begin(s);
  if (!claim.ok)
    return failed("target_unavailable", "outbound ledger: " + claim.error,
                  true);
  if (claim.decision == send_decision::skip)
    return {};
  if (claim.decision == send_decision::supersede) {
    dc.services.ledger_end(s, ledger_state::skipped, {});
    return {};
  }
  auto a = show(*src, name, dc);
  if (a.what != slack_answer::outcome::ok) {
    dc.services.ledger_dead(s, a.error_class, a.description);
    return failed(a.error_class, "reactions.add: " + a.description,
                  retryable(a));
  }
  turn.sent();
  auto mark = dc.services.ledger_end(s, ledger_state::sent, {});
  // A later state recorded while this one was on its way may have been
  // shown before it: show the latest again (see telegram_adapter::react).
  auto asserted = rank;
  for (int round = 0; mark.ok && mark.top_rank > asserted && round < 4;
       ++round) {
    asserted = mark.top_rank;
    if (show(*src, mark.top_value, dc).what != slack_answer::outcome::ok)
      break; // the later state's own delivery reports its failure
    mark = dc.services.ledger_end(s, ledger_state::sent, {});
  }
  return {};
}

} // namespace butlers
