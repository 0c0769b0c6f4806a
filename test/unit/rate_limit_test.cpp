// Token buckets at ingest (runtime/rate_limit.hpp) on an injected clock:
// microseconds passed in, nothing waits.

#include <gtest/gtest.h>

#include "runtime/admission.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "runtime/rate_limit.hpp"

using namespace butlers;

namespace {

constexpr int64_t s = 1'000'000; // one second in microseconds
constexpr int64_t t0 = 1'800'000'000 * s;

rate_limits_config per_minute(int64_t n, int64_t burst) {
  rate_limits_config c;
  c.per_sender_per_minute = n;
  c.sender_burst = burst;
  return c;
}

/// How many of `n` messages of `sender` at `at` the limiter takes.
int taken(rate_limiter& l, const std::string& sender, int n, int64_t at) {
  int ok = 0;
  for (int i = 0; i < n; ++i)
    ok += l.check("telegram", sender, "bot", at).allowed ? 1 : 0;
  return ok;
}

} // namespace

TEST(RateLimit, OffByDefaultTakesEverything) {
  rate_limiter l{rate_limits_config{}};
  EXPECT_FALSE(l.enabled());
  EXPECT_EQ(taken(l, "a", 1000, t0), 1000);
  EXPECT_EQ(l.size(), 0u);
}

TEST(RateLimit, AFullBucketTakesItsBurstAtOnceThenRefuses) {
  rate_limiter l{per_minute(60, 5)};
  EXPECT_EQ(taken(l, "a", 5, t0), 5);
  auto d = l.check("telegram", "a", "bot", t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.scope, rate_scope::sender);
  EXPECT_EQ(d.limit, "60 a minute, burst 5");
  EXPECT_EQ(d.config_key, "rate_limits.per_sender_per_minute");
}

TEST(RateLimit, RefillsAtItsRateAndRetryAfterSaysWhen) {
  rate_limiter l{per_minute(30, 2)}; // one token every 2 s
  EXPECT_EQ(taken(l, "a", 2, t0), 2);
  auto d = l.check("telegram", "a", "bot", t0);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 2u);
  // Half a token after 1 s: still refused, one more second to wait.
  d = l.check("telegram", "a", "bot", t0 + s);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 1u);
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0 + 2 * s).allowed);
  EXPECT_FALSE(l.check("telegram", "a", "bot", t0 + 2 * s).allowed);
  // A long quiet time refills up to the burst, not beyond.
  EXPECT_EQ(taken(l, "a", 10, t0 + 3600 * s), 2);
}

TEST(RateLimit, RetryAfterRoundsUpToWholeSeconds) {
  rate_limiter l{per_minute(7, 1)}; // a token every 8.57 s
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0).allowed);
  auto d = l.check("telegram", "a", "bot", t0);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_s, 9u);
  EXPECT_FALSE(l.check("telegram", "a", "bot", t0 + 8 * s).allowed);
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0 + 9 * s).allowed);
}

TEST(RateLimit, SendersHaveBucketsOfTheirOwn) {
  rate_limiter l{per_minute(60, 3)};
  EXPECT_EQ(taken(l, "flood", 30, t0), 3);
  EXPECT_EQ(taken(l, "calm", 3, t0), 3);
}

TEST(RateLimit, TheNoteIsOncePerLimitedPeriod) {
  rate_limiter l{per_minute(60, 2)};
  EXPECT_EQ(taken(l, "a", 2, t0), 2);
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0).note);
  // Still over the limit, a second and ten seconds on: no second note.
  EXPECT_FALSE(l.check("telegram", "a", "bot", t0).note);
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0 + s).allowed);
  EXPECT_FALSE(l.check("telegram", "a", "bot", t0 + s).note);
  // Quiet until the bucket is full again: the period is over, the next
  // refusal is a new one and is noted.
  EXPECT_EQ(taken(l, "a", 2, t0 + 60 * s), 2);
  auto d = l.check("telegram", "a", "bot", t0 + 60 * s);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.note);
}

TEST(RateLimit, ConnectorLimitCountsEveryRecordOfTheEndpoint) {
  rate_limits_config c;
  c.per_connector_per_second = 10;
  c.connector_burst = 10;
  rate_limiter l{c};
  int ok = 0;
  for (int i = 0; i < 50; ++i)
    ok += l.check("telegram", "s" + std::to_string(i), "bot", t0).allowed;
  EXPECT_EQ(ok, 10);
  auto d = l.check("telegram", "x", "bot", t0);
  EXPECT_EQ(d.scope, rate_scope::connector);
  EXPECT_EQ(d.retry_after_s, 1u);
  EXPECT_EQ(d.config_key, "rate_limits.per_connector_per_second");
  EXPECT_TRUE(l.check("telegram", "x", "other-bot", t0).allowed);
  EXPECT_TRUE(l.check("telegram", "x", "bot", t0 + s / 10).allowed);
}

TEST(RateLimit, ASenderRefusalTakesNoConnectorToken) {
  rate_limits_config c = per_minute(60, 1);
  c.per_connector_per_second = 2;
  c.connector_burst = 2;
  rate_limiter l{c};
  EXPECT_TRUE(l.check("telegram", "a", "bot", t0).allowed);
  for (int i = 0; i < 5; ++i)
    EXPECT_FALSE(l.check("telegram", "a", "bot", t0).allowed);
  EXPECT_TRUE(l.check("telegram", "b", "bot", t0).allowed);
}

TEST(RateLimit, TiersGiveListedSendersAndChannelsTheirOwnLimits) {
  auto c = per_minute(60, 1);
  rate_limit_tier family;
  family.name = "family";
  family.senders = {"telegram:mum"};
  family.per_sender_per_minute = 600;
  family.sender_burst = 20;
  rate_limit_tier mail;
  mail.name = "mail";
  mail.channel = "email";
  mail.per_sender_per_minute = 0; // no limit
  c.tiers = {family, mail};
  rate_limiter l{c};
  EXPECT_EQ(taken(l, "mum", 50, t0), 20);
  EXPECT_EQ(l.check("telegram", "mum", "bot", t0).config_key,
            "rate_limits.tier[family]");
  EXPECT_EQ(taken(l, "stranger", 50, t0), 1);
  int ok = 0;
  for (int i = 0; i < 100; ++i)
    ok += l.check("email", "bob@example.org", "inbox", t0).allowed;
  EXPECT_EQ(ok, 100);
}

TEST(RateLimit, TheMapIsBoundedAndDropsTheLeastRecentlyUsed) {
  auto c = per_minute(60, 1);
  c.max_buckets = 100;
  rate_limiter l{c};
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(l.check("api", "s" + std::to_string(i), "e", t0).allowed);
  EXPECT_EQ(l.size(), 100u);
  EXPECT_EQ(l.evictions(), 0u);
  // s0 is used again, so s1 is now the least recently used.
  EXPECT_FALSE(l.check("api", "s0", "e", t0).allowed);
  EXPECT_TRUE(l.check("api", "new", "e", t0).allowed);
  EXPECT_EQ(l.size(), 100u);
  EXPECT_EQ(l.evictions(), 1u);
  // s0 kept its empty bucket; s1 was dropped and starts full again.
  EXPECT_FALSE(l.check("api", "s0", "e", t0).allowed);
  EXPECT_TRUE(l.check("api", "s1", "e", t0).allowed);
  EXPECT_EQ(l.evictions(), 2u);
}

TEST(RateLimit, TheNoteNamesTheWaitAndIsAValidSend) {
  auto n = rate_limit_note("telegram", "42", "30 a minute, burst 10", 7,
                           "rate-limited:telegram:1:42");
  EXPECT_NE(n.find(R"("intent":"send")"), std::string::npos);
  EXPECT_NE(n.find(R"("recipient":"42")"), std::string::npos);
  EXPECT_NE(n.find("pick up again in 7 s"), std::string::npos);
  EXPECT_NE(n.find("30 a minute, burst 10"), std::string::npos);
}

TEST(RateLimit, AdmissionSkipsWhatTheLimiterRefused) {
  ingest_admission adm{10};
  std::vector<inbox_record> recs(2);
  recs[0].context.request_id = "a";
  recs[1].context.request_id = "b";
  ingest_batch b;
  b.out.resize(2);
  b.out[0].error_code = static_cast<uint8_t>(butlers_errc::sender_rate_limited);
  uint64_t overloaded = 0;
  auto admitted = adm.admit(b, recs, false, &overloaded);
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].context.request_id, "b");
  EXPECT_EQ(b.slots, (std::vector<size_t>{1}));
  EXPECT_EQ(adm.in_flight(), 1u);
}

TEST(RateLimit, RefusalsCarryTheirWaitThroughACafError) {
  auto err = rate_limited_error(butlers_errc::sender_rate_limited,
                                "over its limit", 12);
  EXPECT_EQ(code_of(err), butlers_errc::sender_rate_limited);
  EXPECT_EQ(message_of(err), "over its limit");
  EXPECT_EQ(retry_after_of(err), 12u);
  EXPECT_EQ(error_class(code_of(err)), butlers_errc::overload_rejected);
  EXPECT_EQ(http_status(code_of(err)), 429);
  EXPECT_EQ(retry_after_of(caf::error{butlers_errc::timeout, "x"}), 0u);
}

// -- [rate_limits] in node.toml -------------------------------------------

namespace {

/// The errors of `text` (reading, then the checks across keys), one a line.
std::string errors_of(const std::string& text) {
  auto res = parse_config(text, "node.toml");
  std::string out;
  auto errors = res.errors;
  if (res.settings) {
    auto more = validate_settings(*res.settings);
    errors.insert(errors.end(), more.begin(), more.end());
  }
  for (auto& e : errors)
    out += e.to_string() + "\n";
  return out;
}

} // namespace

TEST(RateLimitConfig, ReadsTheDefaultsAndTiers) {
  auto res = parse_config(R"(
[rate_limits]
per_sender_per_minute = 30
per_connector_per_second = 50
[[rate_limits.tier]]
name = "family"
senders = ["telegram:123", "email:mum@example.org"]
per_sender_per_minute = 600
sender_burst = 50
[[rate_limits.tier]]
name = "mail"
channel = "email"
per_sender_per_minute = 0
)",
                          "node.toml");
  ASSERT_TRUE(res.settings);
  auto& r = res.settings->rate_limits;
  EXPECT_EQ(r.per_sender_per_minute, 30);
  EXPECT_EQ(r.sender_burst, 10);
  EXPECT_EQ(r.per_connector_per_second, 50);
  EXPECT_TRUE(r.notify);
  ASSERT_EQ(r.tiers.size(), 2u);
  EXPECT_EQ(r.tiers[0].senders[1], "email:mum@example.org");
  EXPECT_EQ(r.tiers[1].channel, "email");
  EXPECT_TRUE(r.enabled());
  EXPECT_EQ(errors_of(to_toml(*res.settings)), "");
  EXPECT_FALSE(rate_limits_config{}.enabled());
}

TEST(RateLimitConfig, BadValuesAreErrorsNamingTheKey) {
  auto e = errors_of("[rate_limits]\nper_sender_per_minute = -1\n");
  EXPECT_NE(e.find("rate_limits.per_sender_per_minute: must be in "
                   "0..100000, got -1"),
            std::string::npos)
    << e;
  e = errors_of("[rate_limits]\nsender_burst = 0\n");
  EXPECT_NE(e.find("rate_limits.sender_burst"), std::string::npos) << e;
  e = errors_of("[rate_limits]\nper_sender = 3\n");
  EXPECT_NE(e.find("rate_limits.per_sender: unknown key"), std::string::npos)
    << e;
  e = errors_of("[[rate_limits.tier]]\nname = \"x\"\nchannel = \"fax\"\n"
                "per_sender_per_minute = 1\n");
  EXPECT_NE(e.find("rate_limits.tier[0].channel: must be one of"),
            std::string::npos)
    << e;
  e = errors_of("[[rate_limits.tier]]\nname = \"x\"\n"
                "senders = [\"telegram:1\"]\n");
  EXPECT_NE(e.find("rate_limits.tier[0].per_sender_per_minute"),
            std::string::npos)
    << e;
}

TEST(RateLimitConfig, TiersNameAChannelOrSendersEachOnce) {
  auto e = errors_of("[[rate_limits.tier]]\nname = \"x\"\n"
                     "per_sender_per_minute = 1\n");
  EXPECT_NE(e.find("rate_limits.tier[0]: set exactly one of channel"),
            std::string::npos)
    << e;
  e = errors_of("[[rate_limits.tier]]\nname = \"x\"\nsenders = [\"bob\"]\n"
                "per_sender_per_minute = 1\n");
  EXPECT_NE(e.find("rate_limits.tier[0].senders[0]: 'bob' is not "
                   "channel:identity"),
            std::string::npos)
    << e;
  e = errors_of("[[rate_limits.tier]]\nname = \"a\"\n"
                "senders = [\"telegram:1\"]\nper_sender_per_minute = 1\n"
                "[[rate_limits.tier]]\nname = \"b\"\n"
                "senders = [\"telegram:1\"]\nper_sender_per_minute = 2\n");
  EXPECT_NE(e.find("rate_limits.tier[1].senders[0]: sender 'telegram:1' is "
                   "in tier 'a' already"),
            std::string::npos)
    << e;
  e = errors_of("[[rate_limits.tier]]\nname = \"a\"\nchannel = \"email\"\n"
                "per_sender_per_minute = 1\n"
                "[[rate_limits.tier]]\nname = \"a\"\nchannel = \"email\"\n"
                "per_sender_per_minute = 2\n");
  EXPECT_NE(e.find("rate_limits.tier[1].name: duplicate tier name 'a'"),
            std::string::npos)
    << e;
  EXPECT_NE(e.find("rate_limits.tier[1].channel: duplicate channel tier "
                   "'email'"),
            std::string::npos)
    << e;
}
