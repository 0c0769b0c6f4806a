#pragma once

// Rate limits at the ingest boundary (spec 001 §17.8): token buckets per
// sender (`channel:identity`) and per connector (`channel:endpoint`), with
// a bounded bucket map. Plain logic with the time passed in, so the tests
// drive the clock; the switchboard owns one limiter and asks it once per
// record before admission (runtime/rate_limit.md).

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace butlers {

// -- configuration ------------------------------------------------------------

/// One `[[rate_limits.tier]]`: other limits for every sender of a channel,
/// or for the senders it lists.
struct rate_limit_tier {
  /// A name for logs and answers.
  std::string name;
  /// When set (and `senders` empty): the tier of every sender of this
  /// channel not listed in a tier of its own.
  std::string channel;
  /// `channel:identity` of each sender of this tier.
  std::vector<std::string> senders;
  /// Messages a minute each of these senders may send; 0: no limit.
  int64_t per_sender_per_minute = 0;
  /// The bucket: how many messages at once after a quiet time.
  int64_t sender_burst = 10;
};

/// `[rate_limits]` (config/README.md).
struct rate_limits_config {
  /// Messages a minute one sender may send; 0: no per-sender limit.
  int64_t per_sender_per_minute = 0;
  /// The sender's bucket: how many at once after a quiet time.
  int64_t sender_burst = 10;
  /// Messages a second one connector (`channel:endpoint_identity`) may
  /// bring; 0: no per-connector limit.
  int64_t per_connector_per_second = 0;
  /// The connector's bucket.
  int64_t connector_burst = 100;
  /// Buckets kept at most; the least recently used is dropped (counted).
  int64_t max_buckets = 100000;
  /// Tell a limited sender once per limited period (through the
  /// messenger, channels with an adapter).
  bool notify = true;
  /// `[[rate_limits.tier]]`, in file order.
  std::vector<rate_limit_tier> tiers;

  /// Whether any limit is on.
  bool enabled() const;
};

// -- the bucket ---------------------------------------------------------------

/// A rate: `tokens` per `per_us` microseconds, at most `burst` saved up.
struct rate_limit {
  /// Tokens per period; 0 means no limit.
  int64_t tokens = 0;
  /// The period in microseconds (60 s for a minute, 1 s for a second).
  int64_t per_us = 60'000'000;
  int64_t burst = 1;

  bool unlimited() const {
    return tokens <= 0;
  }
};

/// One token bucket. Tokens are kept in millionths so the arithmetic is
/// exact in integers.
class token_bucket {
 public:
  /// A full bucket at `now_us`.
  token_bucket(const rate_limit& r, int64_t now_us);

  /// Refills up to `now_us`, then whether one token is there (not taken).
  bool ready(const rate_limit& r, int64_t now_us);

  /// Takes one token; call only after `ready` said true at the same time.
  void take();

  /// Microseconds until one token is there (0 when it is).
  int64_t wait_us(const rate_limit& r) const;

  /// Whether the bucket is full (as of its last refill).
  bool full(const rate_limit& r) const;

  /// Whether the sender was told about the limit in this limited period
  /// (cleared once the bucket is full again).
  bool noted = false;

 private:
  /// Millionths of a token.
  int64_t micro_tokens_;
  /// When the bucket was last refilled (Unix microseconds).
  int64_t at_us_;
};

// -- the limiter --------------------------------------------------------------

/// Which limit refused a record.
enum class rate_scope : uint8_t {
  sender,
  connector,
};

/// "sender", "connector".
const char* to_string(rate_scope x);

/// The limiter's answer for one record.
struct rate_decision {
  /// True when the record may go on (a token of each limit was taken).
  bool allowed = true;
  /// When refused: which limit.
  rate_scope scope = rate_scope::sender;
  /// When refused: whole seconds until one message would be taken (≥ 1).
  uint32_t retry_after_s = 0;
  /// When refused by the sender's limit for the first time in its limited
  /// period: tell the sender (once).
  bool note = false;
  /// When refused: the limit in words ("30 a minute, burst 10") and the
  /// key that names it in config ("rate_limits.per_sender_per_minute" or
  /// "rate_limits.tier[family]").
  std::string limit;
  std::string config_key;
};

/// Token buckets per sender and per connector in one bounded map.
/// Not thread-safe: one owner (the switchboard) asks it.
class rate_limiter {
 public:
  explicit rate_limiter(rate_limits_config cfg);

  /// Checks a record of `sender` (its identity) from `channel` through
  /// `endpoint` at `now_us`: takes a token from both buckets, or neither
  /// when either is empty.
  rate_decision check(const std::string& channel, const std::string& sender,
                      const std::string& endpoint, int64_t now_us);

  /// Buckets dropped for room since the start.
  uint64_t evictions() const {
    return evictions_;
  }

  /// Buckets held now.
  size_t size() const {
    return map_.size();
  }

  bool enabled() const {
    return enabled_;
  }

 private:
  /// A sender's limit: its tier's, its channel's, or the default; and the
  /// config key that names it.
  std::pair<rate_limit, std::string> sender_limit(const std::string& channel,
                                                  const std::string& key) const;

  /// The bucket of `key` (created full), now the most recently used; may
  /// drop the least recently used one for room.
  token_bucket& bucket(const std::string& key, const rate_limit& r,
                       int64_t now_us);

  rate_limits_config cfg_;
  bool enabled_;
  rate_limit connector_;
  /// Sender key → index of its tier in `cfg_.tiers`.
  std::unordered_map<std::string, size_t> sender_tiers_;
  /// Channel → index of its tier.
  std::unordered_map<std::string, size_t> channel_tiers_;
  /// Most recently used first.
  std::list<std::pair<std::string, token_bucket>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> map_;
  uint64_t evictions_ = 0;
};

/// The notify.v1 that tells a limited sender when it will be taken again.
/// `recipient` is where the channel's adapter sends (a Telegram chat, a
/// mail address); `key` makes it idempotent.
std::string rate_limit_note(const std::string& channel,
                            const std::string& recipient,
                            const std::string& limit, uint32_t retry_after_s,
                            const std::string& key);

} // namespace butlers
