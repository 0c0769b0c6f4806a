// Rate limits at the ingest boundary (runtime/rate_limit.md): every record
// passes the limiter before admission; a refused one carries its limit and
// Retry-After in the batch's answer, and a sender refused for the first
// time in its limited period is told once, through the messenger.

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/lifecycle.hpp"
#include "actors/switchboard.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// Where the channel's adapter reaches the sender: a Telegram chat (the
/// conversation of the message), else the sender's own address.
std::string recipient_of(const request_context& ctx) {
  if (ctx.source_channel == "telegram" && !ctx.source_thread_identity.empty())
    return ctx.source_thread_identity;
  return ctx.source_sender_identity;
}

/// Hands the sender its one note; a failure is logged and counted (the
/// refusal stands either way).
void send_note(switchboard_ptr self, const request_context& ctx,
               const rate_decision& d) {
  auto key = "rate-limited:" + ctx.source_channel + ":"
             + std::to_string(unix_now_us() / 1000) + ":"
             + ctx.source_sender_identity;
  if (key.size() > 256)
    key.resize(256);
  auto note = rate_limit_note(ctx.source_channel, recipient_of(ctx), d.limit,
                              d.retry_after_s, key);
  auto who = ctx.source_channel + ":" + ctx.source_sender_identity;
  hand_to_messenger(self, std::move(note), [self, who](route_response r) {
    bool ok = r.status != "error";
    self->state.ctx->metrics
      .get_counter("butlers_rate_limit_notes_total",
                   "One-time notes to senders over their rate limit",
                   ok ? "outcome=\"handed\"" : "outcome=\"failed\"")
      .inc();
    if (!ok)
      spdlog::warn("switchboard: the rate-limit note to {} was not handed to "
                   "the messenger: {}",
                   who, r.error_message);
  });
}

/// The message of a refusal, naming the limit.
std::string refusal_message(const request_context& ctx,
                            const rate_decision& d) {
  auto who = d.scope == rate_scope::sender
               ? "sender " + ctx.source_channel + ":"
                   + ctx.source_sender_identity
               : "connector " + ctx.source_channel + ":"
                   + ctx.source_endpoint_identity;
  return who + " is over its rate limit (" + d.limit + "; " + d.config_key
         + "); retry after " + std::to_string(d.retry_after_s) + " s";
}

} // namespace

void rate_limit_records(switchboard_ptr self, ingest_batch& b,
                        const std::vector<inbox_record>& recs) {
  auto& st = self->state;
  if (!st.limiter || !st.limiter->enabled())
    return;
  auto& m = st.ctx->metrics;
  auto now = unix_now_us();
  auto evicted = st.limiter->evictions();
  for (size_t i = 0; i < recs.size(); ++i) {
    auto& ctx = recs[i].context;
    auto d = st.limiter->check(ctx.source_channel, ctx.source_sender_identity,
                               ctx.source_endpoint_identity, now);
    if (d.allowed)
      continue;
    auto code = d.scope == rate_scope::sender
                  ? butlers_errc::sender_rate_limited
                  : butlers_errc::connector_rate_limited;
    b.out[i].error_code = static_cast<uint8_t>(code);
    b.out[i].error_message = refusal_message(ctx, d);
    b.out[i].retry_after_s = d.retry_after_s;
    m.get_counter("butlers_rate_limited_total",
                  "Messages refused at ingest by a rate limit",
                  std::string{"scope=\""} + to_string(d.scope) + "\",channel=\""
                    + ctx.source_channel + "\"")
      .inc();
    // The HTTP API's caller reads its 429; a person of a chat or mail
    // channel is told once per limited period.
    if (d.note && st.routing.rate_limits.notify && ctx.source_channel != "api"
        && ctx.source_channel != "mcp")
      send_note(self, ctx, d);
  }
  if (auto n = st.limiter->evictions() - evicted; n > 0)
    m.get_counter("butlers_rate_limit_evictions_total",
                  "Rate-limit buckets dropped for room (rate_limits."
                  "max_buckets)")
      .inc(n);
  m.get_gauge("butlers_rate_limit_buckets", "Rate-limit buckets held")
    .set(static_cast<int64_t>(st.limiter->size()));
}

caf::error ingest_error(append_result& r) {
  auto code = static_cast<butlers_errc>(r.error_code);
  if (is_rate_limited(code))
    return rate_limited_error(code, std::move(r.error_message),
                              r.retry_after_s);
  return caf::error{code, std::move(r.error_message)};
}

} // namespace butlers
