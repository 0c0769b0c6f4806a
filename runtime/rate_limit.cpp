#include "runtime/rate_limit.hpp"

#include <algorithm>

#include "runtime/json.hpp"

namespace butlers {

namespace {

constexpr int64_t micro = 1'000'000;

/// "30 a minute, burst 10".
std::string describe(const rate_limit& r) {
  auto unit = r.per_us == 1'000'000 ? " a second" : " a minute";
  return std::to_string(r.tokens) + unit + ", burst " + std::to_string(r.burst);
}

} // namespace

bool rate_limits_config::enabled() const {
  if (per_sender_per_minute > 0 || per_connector_per_second > 0)
    return true;
  return std::any_of(tiers.begin(), tiers.end(), [](const rate_limit_tier& t) {
    return t.per_sender_per_minute > 0;
  });
}

// -- token_bucket -------------------------------------------------------------

token_bucket::token_bucket(const rate_limit& r, int64_t now_us)
  : micro_tokens_(r.burst * micro), at_us_(now_us) {
  // nop
}

bool token_bucket::ready(const rate_limit& r, int64_t now_us) {
  if (now_us > at_us_) {
    // tokens/per_us per microsecond, in millionths: elapsed * tokens * 1e6
    // / per_us; computed in two steps so that a long quiet time cannot
    // overflow.
    auto cap = r.burst * micro;
    auto elapsed = std::min(now_us - at_us_, r.per_us * (r.burst + 1));
    auto gained = elapsed * r.tokens / r.per_us * micro
                  + elapsed * r.tokens % r.per_us * micro / r.per_us;
    micro_tokens_ = std::min(cap, micro_tokens_ + gained);
    at_us_ = now_us;
  }
  if (full(r))
    noted = false;
  return micro_tokens_ >= micro;
}

void token_bucket::take() {
  micro_tokens_ -= micro;
}

int64_t token_bucket::wait_us(const rate_limit& r) const {
  if (micro_tokens_ >= micro)
    return 0;
  auto missing = micro - micro_tokens_;
  // per_us / tokens microseconds per token, rounded up.
  return (missing * r.per_us + r.tokens * micro - 1) / (r.tokens * micro);
}

bool token_bucket::full(const rate_limit& r) const {
  return micro_tokens_ >= r.burst * micro;
}

// -- rate_limiter -------------------------------------------------------------

const char* to_string(rate_scope x) {
  return x == rate_scope::sender ? "sender" : "connector";
}

rate_limiter::rate_limiter(rate_limits_config cfg)
  : cfg_(std::move(cfg)), enabled_(cfg_.enabled()) {
  connector_.tokens = cfg_.per_connector_per_second;
  connector_.per_us = micro;
  connector_.burst = std::max<int64_t>(1, cfg_.connector_burst);
  for (size_t i = 0; i < cfg_.tiers.size(); ++i) {
    auto& t = cfg_.tiers[i];
    for (auto& s : t.senders)
      sender_tiers_.emplace(s, i);
    if (t.senders.empty() && !t.channel.empty())
      channel_tiers_.emplace(t.channel, i);
  }
}

std::pair<rate_limit, std::string> rate_limiter::sender_limit(
  const std::string& channel, const std::string& key) const {
  auto of_tier = [this](size_t i) {
    auto& t = cfg_.tiers[i];
    rate_limit r{t.per_sender_per_minute, 60 * micro,
                 std::max<int64_t>(1, t.sender_burst)};
    return std::make_pair(r, "rate_limits.tier[" + t.name + "]");
  };
  if (auto i = sender_tiers_.find(key); i != sender_tiers_.end())
    return of_tier(i->second);
  if (auto i = channel_tiers_.find(channel); i != channel_tiers_.end())
    return of_tier(i->second);
  rate_limit r{cfg_.per_sender_per_minute, 60 * micro,
               std::max<int64_t>(1, cfg_.sender_burst)};
  return {r, "rate_limits.per_sender_per_minute"};
}

token_bucket& rate_limiter::bucket(const std::string& key, const rate_limit& r,
                                   int64_t now_us) {
  if (auto i = map_.find(key); i != map_.end()) {
    lru_.splice(lru_.begin(), lru_, i->second);
    return i->second->second;
  }
  auto cap = static_cast<size_t>(std::max<int64_t>(2, cfg_.max_buckets));
  while (map_.size() >= cap) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
    ++evictions_;
  }
  lru_.emplace_front(key, token_bucket{r, now_us});
  map_.emplace(key, lru_.begin());
  return lru_.front().second;
}

rate_decision rate_limiter::check(const std::string& channel,
                                  const std::string& sender,
                                  const std::string& endpoint, int64_t now_us) {
  rate_decision d;
  if (!enabled_)
    return d;
  auto skey = "s:" + channel + ":" + sender;
  auto [slimit, sconfig] = sender_limit(channel, skey.substr(2));
  token_bucket* sb = nullptr;
  token_bucket* cb = nullptr;
  if (!connector_.unlimited()) {
    cb = &bucket("c:" + channel + ":" + endpoint, connector_, now_us);
    if (!cb->ready(connector_, now_us)) {
      d.allowed = false;
      d.scope = rate_scope::connector;
      d.retry_after_s = static_cast<uint32_t>(
        std::max<int64_t>(1, (cb->wait_us(connector_) + micro - 1) / micro));
      d.limit = describe(connector_);
      d.config_key = "rate_limits.per_connector_per_second";
      return d;
    }
  }
  if (!slimit.unlimited()) {
    // The connector's bucket may be dropped for the sender's room; keep
    // the pointer only while it is safe (a full map of one bucket each).
    sb = &bucket(skey, slimit, now_us);
    if (cb != nullptr && map_.count("c:" + channel + ":" + endpoint) == 0)
      cb = nullptr;
    if (!sb->ready(slimit, now_us)) {
      d.allowed = false;
      d.scope = rate_scope::sender;
      d.retry_after_s = static_cast<uint32_t>(
        std::max<int64_t>(1, (sb->wait_us(slimit) + micro - 1) / micro));
      d.limit = describe(slimit);
      d.config_key = sconfig;
      d.note = !sb->noted;
      sb->noted = true;
      return d;
    }
    sb->take();
  }
  if (cb != nullptr)
    cb->take();
  return d;
}

// -- the note -----------------------------------------------------------------

std::string rate_limit_note(const std::string& channel,
                            const std::string& recipient,
                            const std::string& limit, uint32_t retry_after_s,
                            const std::string& key) {
  auto message = "You're sending messages faster than I take them (" + limit
                 + "). I'll pick up again in " + std::to_string(retry_after_s)
                 + " s; what you send before then is not taken, so please "
                   "send it again after that.";
  return R"({"schema_version":"notify.v1","origin_butler":"switchboard",)"
         R"("delivery":{"intent":"send","channel":)"
         + json::quote(channel) + R"(,"recipient":)" + json::quote(recipient)
         + R"(,"message":)" + json::quote(message) + R"(},"idempotency_key":)"
         + json::quote(key) + "}";
}

} // namespace butlers
