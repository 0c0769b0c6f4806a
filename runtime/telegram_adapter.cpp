#include "runtime/telegram_adapter.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "runtime/http_client.hpp"
#include "runtime/interruptible_sleep.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/reaction_gate.hpp"
#include "runtime/resilience.hpp"
#include "runtime/scripted.hpp"
#include "runtime/typing_ticker.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

delivery_attempt failed(const std::string& cls, std::string what,
                        bool retryable) {
  return {"telegram: " + std::move(what), retryable, cls};
}

/// The source message of the request `dc` answers; `error` is set when
/// it could not be read (nullopt without error: there is none).
std::optional<telegram_message_ref> source_of(const delivery_context& dc,
                                              std::string& error) {
  auto id = dc.view.request_id.empty() ? dc.request_id : dc.view.request_id;
  auto src = dc.services.source_payload(id);
  if (!src.ok) {
    error = "source message of request " + id + " not read: " + src.error;
    return std::nullopt;
  }
  if (!src.found)
    return std::nullopt;
  return telegram_source(src.raw_payload);
}

} // namespace

telegram_adapter::telegram_adapter(delivery_adapter_config cfg,
                                   telegram_endpoint endpoint,
                                   telegram_timing timing)
  : delivery_adapter(std::move(cfg)), endpoint_(std::move(endpoint)),
    timing_(timing) {
  while (!endpoint_.api_base.empty() && endpoint_.api_base.back() == '/')
    endpoint_.api_base.pop_back();
}

bool telegram_adapter::reacts() const {
  return true;
}

delivery_attempt telegram_adapter::deliver(const delivery_context& dc) const {
  if (dc.view.intent == "react")
    return react(dc);
  return send_text(dc);
}

telegram_answer telegram_adapter::call(const std::string& method,
                                       const std::string& body,
                                       const delivery_context& dc,
                                       const outbound_send* send) const {
  std::mt19937_64 rng{std::random_device{}()};
  http_request req;
  req.method = "POST";
  // The token is in the path: never log the URL.
  req.url = endpoint_.api_base + "/bot" + endpoint_.token + "/" + method;
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = body;
  req.timeout = std::chrono::milliseconds{cfg_.timeout_ms};
  req.connect_timeout = std::min<std::chrono::milliseconds>(req.timeout, 10s);
  for (uint32_t attempt = 0;; ++attempt) {
    auto a = read_telegram_answer(shared_http_client().perform(req, dc.stop));
    if (a.what != telegram_answer::outcome::retry)
      return a;
    if (attempt >= cfg_.retries || a.wait > timing_.max_retry_after) {
      a.what = telegram_answer::outcome::fail;
      return a;
    }
    auto wait = a.wait.count() > 0
                  ? a.wait
                  : backoff_delay(attempt + 1, timing_.backoff_base,
                                  timing_.backoff_cap, rng);
    spdlog::info("telegram: {} failed ({}: {}); attempt {} in {} ms", method,
                 a.error_class, a.description, attempt + 2, wait.count());
    if (!sleep_unless_stopped(wait, dc.stop)) {
      a.what = telegram_answer::outcome::fail;
      a.description += " (stopped)";
      return a;
    }
    // It may have arrived: the retry may duplicate it, which the ledger
    // counts as a redelivery.
    if (a.ambiguous && send != nullptr)
      dc.services.ledger_begin(*send);
  }
}

delivery_attempt telegram_adapter::send_text(const delivery_context& dc) const {
  std::string chat;
  int64_t reply_to = 0;
  if (dc.view.intent != "send") {
    std::string error;
    auto src = source_of(dc, error);
    if (!error.empty())
      return failed("target_unavailable", error, true);
    if (src) {
      chat = src->chat_id;
      reply_to = src->message_id;
    }
  }
  if (chat.empty())
    chat = dc.view.recipient;
  if (chat.empty())
    return failed("validation_error", "no chat to send to", false);
  auto chunks = split_telegram_text(dc.view.message);
  for (size_t i = 0; i < chunks.size(); ++i) {
    outbound_send s{{dc.request_id, dc.segment_id,
                     "chunk:" + std::to_string(i)},
                    "telegram",
                    outbound_kind::message,
                    0,
                    {}};
    auto claim = dc.services.ledger_begin(s);
    if (!claim.ok)
      return failed("target_unavailable", "outbound ledger: " + claim.error,
                    true);
    if (claim.decision == send_decision::skip)
      continue;
    auto a = call("sendMessage",
                  telegram_send_message_body(chat, chunks[i], reply_to), dc,
                  &s);
    if (a.what != telegram_answer::outcome::ok) {
      dc.services.ledger_dead(s, a.error_class, a.description);
      return failed(a.error_class, "sendMessage: " + a.description,
                    is_retryable_class(a.error_class));
    }
    auto mark = dc.services.ledger_end(s, ledger_state::sent, a.message_id);
    if (!mark.ok)
      return failed("target_unavailable",
                    "sent, but not recorded in the outbound ledger: "
                      + mark.error,
                    true);
  }
  return {};
}

delivery_attempt telegram_adapter::react(const delivery_context& dc) const {
  auto state = lifecycle_state_of(dc.view.reaction_state);
  if (!state)
    return failed("validation_error",
                  "unknown lifecycle state '" + dc.view.reaction_state + "'",
                  false);
  // 😴 and the terminal states end "typing" (again below, once the
  // reactions before this one have ended).
  auto* typing = dc.services.typing();
  if (typing != nullptr && *state != lifecycle_state::progress)
    typing->stop(dc.request_id);
  std::string error;
  auto src = source_of(dc, error);
  if (!error.empty())
    return failed("target_unavailable", error, true);
  if (!src) {
    spdlog::debug("telegram: request {} has no Telegram message to react to",
                  dc.request_id);
    return {};
  }
  auto rank = reaction_rank(*state, dc.view.reaction_at_us);
  // Never backwards: a reaction overtaken by a later state of the message
  // is dropped before anything is sent (runtime/reaction_gate.hpp).
  auto* gate = dc.services.reaction_order();
  if (gate != nullptr && !gate->begin(dc.request_id, rank)) {
    dc.services.count_overtaken("telegram");
    return {};
  }
  if (typing != nullptr && *state != lifecycle_state::progress)
    typing->stop(dc.request_id);
  bool sent = false;
  auto result = set_reaction(dc, *src, *state, rank, sent);
  if (sent && typing != nullptr && *state == lifecycle_state::progress
      && (gate == nullptr || gate->latest(dc.request_id, rank)))
    start_typing(*typing, dc.request_id, src->chat_id);
  if (gate != nullptr)
    gate->end(dc.request_id, rank, sent);
  return result;
}

delivery_attempt telegram_adapter::set_reaction(const delivery_context& dc,
                                                const telegram_message_ref& src,
                                                lifecycle_state state,
                                                int64_t rank,
                                                bool& sent) const {
  auto& emoji = reaction_emoji(cfg_.reactions, state);
  outbound_send s{{dc.request_id, dc.segment_id, "reaction"},
                  "telegram",
                  outbound_kind::reaction,
                  rank,
                  emoji};
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
  auto a = call("setMessageReaction", telegram_reaction_body(src, emoji), dc,
                nullptr);
  if (a.what != telegram_answer::outcome::ok) {
    dc.services.ledger_dead(s, a.error_class, a.description);
    return failed(a.error_class, "setMessageReaction: " + a.description,
                  is_retryable_class(a.error_class));
  }
  sent = true;
  auto mark = dc.services.ledger_end(s, ledger_state::sent, {});
  // A later state recorded while this one was on its way (by another
  // node's messenger, or a run after a restart: within one messenger the
  // gate keeps them apart) may have been set before it: set the latest
  // again, after this one (each round reads the ledger anew; ranks only
  // grow, and there are four states).
  auto asserted = rank;
  for (int round = 0; mark.ok && mark.top_rank > asserted && round < 4;
       ++round) {
    asserted = mark.top_rank;
    auto again = call("setMessageReaction",
                      telegram_reaction_body(src, mark.top_value), dc, nullptr);
    if (again.what != telegram_answer::outcome::ok)
      break; // the later state's own delivery reports its failure
    mark = dc.services.ledger_end(s, ledger_state::sent, {});
  }
  return {};
}

void telegram_adapter::start_typing(typing_ticker& typing,
                                    const std::string& request_id,
                                    const std::string& chat_id) const {
  if (cfg_.typing_max_s == 0)
    return;
  http_request req;
  req.method = "POST";
  // The token is in the path: never log the URL.
  req.url = endpoint_.api_base + "/bot" + endpoint_.token + "/sendChatAction";
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = telegram_chat_action_body(chat_id);
  std::chrono::milliseconds interval{cfg_.typing_interval_ms};
  // One try per tick, answered within the tick: the next tick tries again.
  req.timeout = std::min<
    std::chrono::milliseconds>(std::chrono::milliseconds{cfg_.timeout_ms},
                               interval);
  req.connect_timeout = req.timeout;
  typing.start(request_id, interval, std::chrono::seconds{cfg_.typing_max_s},
               [req](const std::atomic<bool>& stop) {
                 auto a = read_telegram_answer(
                   shared_http_client().perform(req, &stop));
                 return a.what == telegram_answer::outcome::ok;
               });
}

} // namespace butlers
