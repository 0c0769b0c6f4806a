#include "runtime/lifecycle.hpp"

#include <algorithm>

#include "runtime/json.hpp"

namespace butlers {

const char* to_string(lifecycle_state x) {
  switch (x) {
    case lifecycle_state::progress: return "progress";
    case lifecycle_state::queued: return "queued";
    case lifecycle_state::parsed: return "parsed";
    case lifecycle_state::errored: return "errored";
  }
  return "progress";
}

std::optional<lifecycle_state> lifecycle_state_of(std::string_view text) {
  for (auto x : {lifecycle_state::progress, lifecycle_state::queued,
                 lifecycle_state::parsed, lifecycle_state::errored})
    if (text == to_string(x))
      return x;
  return std::nullopt;
}

const std::string& reaction_emoji(const reaction_config& cfg,
                                  lifecycle_state x) {
  switch (x) {
    case lifecycle_state::progress: return cfg.progress;
    case lifecycle_state::queued: return cfg.queued;
    case lifecycle_state::parsed: return cfg.parsed;
    case lifecycle_state::errored: return cfg.errored;
  }
  return cfg.progress;
}

lifecycle_policy::lifecycle_policy(
  const std::vector<delivery_adapter_config>& ads) {
  telegram_ = std::any_of(ads.begin(), ads.end(),
                          [](const delivery_adapter_config& a) {
                            return a.kind == adapter_kind::telegram;
                          });
  slack_ = std::any_of(ads.begin(), ads.end(),
                       [](const delivery_adapter_config& a) {
                         return a.kind == adapter_kind::slack;
                       });
}

std::string make_react_notify(const route_envelope& env, lifecycle_state x,
                              int64_t at_us) {
  using json::quote;
  auto at = std::to_string(at_us);
  std::string out = R"({"schema_version":"notify.v1",)"
                    R"("origin_butler":"switchboard","request_context":{)";
  out += R"("request_id":)" + quote(env.request_id);
  if (!env.received_at.empty())
    out += R"(,"received_at":)" + quote(env.received_at);
  out += R"(,"source_channel":)" + quote(env.source_channel);
  out += R"(,"source_endpoint_identity":)"
         + quote(env.source_endpoint_identity);
  out += R"(,"source_sender_identity":)" + quote(env.source_sender_identity);
  if (!env.source_thread_identity.empty())
    out += R"(,"source_thread_identity":)" + quote(env.source_thread_identity);
  out += R"(},"delivery":{"intent":"react","channel":)"
         + quote(env.source_channel);
  out += R"(,"reaction":{"state":")" + std::string{to_string(x)}
         + R"(","at_us":)" + at + "}}";
  out += R"(,"idempotency_key":"react:)" + std::string{to_string(x)} + ":" + at
         + "\"}";
  return out;
}

} // namespace butlers
