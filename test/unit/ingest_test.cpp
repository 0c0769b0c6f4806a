#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/dedupe.hpp"
#include "runtime/embedded.hpp"
#include "runtime/ingest.hpp"
#include "runtime/uuid.hpp"

namespace butlers {
namespace {

constexpr int64_t now = 1'795'000'000'000'000; // Unix µs

std::string telegram_body(const std::string& text = "hello") {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"telegram","provider":"telegram",)"
         R"("endpoint_identity":"bot-7"},)"
         R"("event":{"external_event_id":"918273","external_thread_id":"c-1",)"
         R"("observed_at":"2026-11-23T12:00:00Z"},)"
         R"("sender":{"identity":"user-9"},)"
         R"("payload":{"raw":{"update_id":918273},"normalized_text":")"
         + text
         + R"("},"control":{"policy_tier":"interactive","trace_context":)"
           R"({"traceparent":"00-abc-def-01"}}})";
}

/// telegram_body() with the first `from` replaced by `to`.
std::string telegram_with(const std::string& from, const std::string& to) {
  auto b = telegram_body();
  auto at = b.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? b : b.replace(at, from.size(), to);
}

TEST(IngestParse, BuildsContextRecordAndDedupeKey) {
  auto body = telegram_body();
  auto r = parse_ingest(body, 1 << 20, 300, now);
  ASSERT_TRUE(r.record) << r.parse_error;
  auto& rec = *r.record;
  auto id = uuid::parse(rec.context.request_id);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->version(), 7);
  EXPECT_EQ(rec.context.received_at_us, now);
  EXPECT_EQ(rec.context.source_channel, "telegram");
  EXPECT_EQ(rec.context.source_endpoint_identity, "bot-7");
  EXPECT_EQ(rec.context.source_sender_identity, "user-9");
  EXPECT_EQ(rec.context.source_thread_identity, "c-1");
  EXPECT_EQ(rec.context.trace_parent, "00-abc-def-01");
  EXPECT_EQ(rec.dedupe_key, "tg:5:bot-7:918273");
  EXPECT_EQ(rec.normalized_text, "hello");
  EXPECT_EQ(rec.policy_tier, "interactive");
  EXPECT_EQ(rec.schema_version, "ingest.v1");
  EXPECT_EQ(rec.raw_payload, body) << "the envelope as received";
}

/// telegram_body() with a tracestate beside its traceparent: `value` is
/// the JSON text of the member's value.
std::string with_tracestate(const std::string& value) {
  return telegram_with(R"("traceparent":"00-abc-def-01")",
                       R"("traceparent":"00-abc-def-01","tracestate":)"
                         + value);
}

/// Both paths, and their combination, give `body` a record with
/// `tracestate` (the fast path may leave it to the full path).
void expect_tracestate(const std::string& body, const std::string& expected) {
  auto full = detail::parse_ingest_full(body, 1 << 20, 300, now);
  ASSERT_TRUE(full.record) << body;
  EXPECT_EQ(full.record->context.trace_state, expected) << body;
  EXPECT_EQ(full.record->context.trace_parent, "00-abc-def-01") << body;
  if (auto fast = detail::parse_ingest_fast(body, 1 << 20, 300, now)) {
    EXPECT_EQ(fast->context.trace_state, expected) << body;
  }
  auto both = parse_ingest(body, 1 << 20, 300, now);
  ASSERT_TRUE(both.record) << body;
  EXPECT_EQ(both.record->context.trace_state, expected) << body;
}

TEST(IngestParse, KeepsAUsableTracestate) {
  // The W3C spec's examples (test/fixtures/tracestate/README.md).
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR}
                   + "/test/fixtures/tracestate/valid.txt"};
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    auto body = with_tracestate("\"" + line + "\"");
    expect_tracestate(body, line);
    EXPECT_TRUE(detail::parse_ingest_fast(body, 1 << 20, 300, now))
      << "a usable tracestate stays on the fast path: " << body;
  }
  EXPECT_GE(n, 5);
}

TEST(IngestParse, DropsAnUnusableTracestateAndStillIngests) {
  std::vector<std::string> values;
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR}
                   + "/test/fixtures/tracestate/invalid.txt"};
  for (std::string line; std::getline(in, line);) {
    std::string quoted = "\"";
    for (char c : line)
      quoted += c == '\t' ? std::string{"\\t"} : std::string{c};
    values.push_back(quoted + "\"");
  }
  ASSERT_GE(values.size(), 5u);
  std::string too_long = "\"k=" + std::string(256, 'v')
                         + ",l=" + std::string(252, 'v') + "\"";
  std::string too_many = "\"";
  for (int i = 0; i < 33; ++i)
    too_many += (i == 0 ? "k" : ",k") + std::to_string(i) + "=v";
  too_many += "\"";
  for (auto v :
       {too_long, too_many, std::string{R"("a=\u0000")"}, std::string{"7"},
        std::string{"null"}, std::string{R"(["rojo=1"])"},
        std::string{R"({"rojo":"1"})"}, std::string{R"("")"}})
    values.push_back(v);
  for (auto& v : values)
    expect_tracestate(with_tracestate(v), "");
}

TEST(IngestParse, EveryCallGetsItsOwnRequestId) {
  auto body = telegram_body();
  auto a = parse_ingest(body, 1 << 20, 300, now);
  auto b = parse_ingest(body, 1 << 20, 300, now);
  ASSERT_TRUE(a.record && b.record);
  EXPECT_NE(a.record->context.request_id, b.record->context.request_id);
  EXPECT_EQ(a.record->dedupe_key, b.record->dedupe_key);
}

TEST(IngestParse, ReportsParseErrors) {
  auto r = parse_ingest("{\"schema_version\":", 1 << 20, 300, now);
  EXPECT_FALSE(r.record);
  EXPECT_FALSE(r.parse_error.empty());
}

TEST(IngestParse, ReportsEverySchemaViolation) {
  auto r = parse_ingest(R"({"schema_version":"ingest.v2","extra":1})", 1 << 20,
                        300, now);
  EXPECT_FALSE(r.record);
  EXPECT_TRUE(r.parse_error.empty());
  EXPECT_GE(r.violations.size(), 5u) << "version, extra, four required";
}

TEST(IngestParse, RejectsNulInNormalizedText) {
  auto r = parse_ingest(telegram_body("a\\u0000b"), 1 << 20, 300, now);
  EXPECT_FALSE(r.record);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].pointer, "/payload/normalized_text");
}

TEST(IngestParse, RejectsWhatPostgreSQLCouldNotStore) {
  // Each used to pass here and fail in the database: a batch replayed one
  // by one and a 500 instead of a 400.
  auto surrogate = parse_ingest(telegram_body("a\\udc00b"), 1 << 20, 300, now);
  EXPECT_FALSE(surrogate.record);
  EXPECT_NE(surrogate.parse_error.find("surrogate"), std::string::npos)
    << surrogate.parse_error;
  auto trailing = parse_ingest(telegram_body() + std::string{"\0junk", 5},
                               1 << 20, 300, now);
  EXPECT_FALSE(trailing.record);
  EXPECT_NE(trailing.parse_error.find("NUL byte"), std::string::npos)
    << trailing.parse_error;
}

TEST(IngestParse, RejectsNulInEveryStoredIdentity) {
  // The idempotency key and the event id end up in the dedupe key, which
  // is text: both used to reach PostgreSQL and fail the batch (500).
  const std::pair<std::string, std::string> cases[] = {
    {telegram_with(R"("918273")", R"("91\u00008273")"),
     "/event/external_event_id"},
    {telegram_with(R"("policy_tier")",
                   R"("idempotency_key":"k\u0000","policy_tier")"),
     "/control/idempotency_key"},
    {telegram_with(R"("bot-7")", R"("bot\u0000")"),
     "/source/endpoint_identity"},
    {telegram_with(R"("user-9")", R"("user\u0000")"), "/sender/identity"},
    {telegram_with(R"("c-1")", R"("c\u0000")"), "/event/external_thread_id"},
    {telegram_with(R"("00-abc-def-01")", R"("00\u0000")"),
     "/control/trace_context/traceparent"},
  };
  for (auto& [body, pointer] : cases) {
    auto r = parse_ingest(body, 1 << 20, 300, now);
    EXPECT_FALSE(r.record) << body;
    ASSERT_EQ(r.violations.size(), 1u) << body;
    EXPECT_EQ(r.violations[0].pointer, pointer);
    EXPECT_EQ(r.violations[0].keyword, "nul");
  }
}

TEST(IngestParse, RespectsTheSizeLimit) {
  auto body = telegram_body(std::string(2000, 'x'));
  auto r = parse_ingest(body, 1000, 300, now);
  EXPECT_FALSE(r.record);
  EXPECT_FALSE(r.parse_error.empty());
}
// -- the fast path against the full path ------------------------------------

/// Bodies of the shapes connectors send, each valid.
std::vector<std::string> valid_bodies() {
  auto api = [](const std::string& text, const std::string& control) {
    return R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
           R"("provider":"internal","endpoint_identity":"bench"},)"
           R"("event":{"external_event_id":"e-1",)"
           R"("observed_at":"2026-01-01T00:00:00Z"},)"
           R"("sender":{"identity":"user-1234"},"payload":{"raw":{)"
           R"("update_id":123456,"message":{"message_id":1,"ok":true,)"
           R"("n":null,"f":-1.5e3,"list":[1,"a",{"b":[]}]}},)"
           R"("normalized_text":")"
           + text + R"("})" + control + "}";
  };
  return {
    telegram_body(),
    telegram_body(
      "Kannst du \\u00e4ndern? \\ud83d\\ude00 \xc3\xa4 \xe2\x82\xac"),
    api("move my appointment", R"(,"control":{"idempotency_key":"k-1"})"),
    api("", ""),
    api(R"(tabs\tand \\ \"quotes\")", R"(,"control":{"trace_context":null})"),
    api("x", R"(,"control":{"trace_context":{"tracestate":[1,{"a":null}],)"
             R"("traceparent":"00-1-2-01","baggage":"b"},)"
             R"("policy_tier":"high_priority"})"),
    api("y", R"(,"control":{"trace_context":{"tracestate":)"
             R"("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE","traceparent":)"
             R"("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})"),
    R"({"payload":{"normalized_text":"hi","raw":{}},"sender":{"identity":)"
    R"("a@b"},"event":{"observed_at":"2026-11-23T12:00:00.123456+05:30",)"
    R"("external_thread_id":null,"external_event_id":"<m@x>"},)"
    R"("source":{"endpoint_identity":"inbox","provider":"imap",)"
    R"("channel":"email"},"schema_version":"ingest.v1"})",
    " \n" + telegram_body() + "\n ",
  };
}

/// Every field of the record except the request id, which is fresh per call.
void expect_same_record(const inbox_record& a, const inbox_record& b,
                        const std::string& body) {
  EXPECT_EQ(a.context.received_at_us, b.context.received_at_us) << body;
  EXPECT_EQ(a.context.source_channel, b.context.source_channel) << body;
  EXPECT_EQ(a.context.source_endpoint_identity,
            b.context.source_endpoint_identity)
    << body;
  EXPECT_EQ(a.context.source_sender_identity, b.context.source_sender_identity)
    << body;
  EXPECT_EQ(a.context.source_thread_identity, b.context.source_thread_identity)
    << body;
  EXPECT_EQ(a.context.trace_parent, b.context.trace_parent) << body;
  EXPECT_EQ(a.context.trace_state, b.context.trace_state) << body;
  EXPECT_EQ(a.dedupe_key, b.dedupe_key) << body;
  EXPECT_EQ(a.raw_payload, b.raw_payload) << body;
  EXPECT_EQ(a.normalized_text, b.normalized_text) << body;
  EXPECT_EQ(a.policy_tier, b.policy_tier) << body;
  EXPECT_EQ(a.schema_version, b.schema_version) << body;
}

TEST(IngestFastPath, TakesTheBodiesConnectorsSend) {
  for (auto& body : valid_bodies()) {
    auto fast = detail::parse_ingest_fast(body, 1 << 20, 300, now);
    auto full = detail::parse_ingest_full(body, 1 << 20, 300, now);
    ASSERT_TRUE(full.record) << body << full.parse_error;
    ASSERT_TRUE(fast) << body;
    expect_same_record(*fast, *full.record, body);
  }
}

TEST(IngestFastPath, LeavesEveryViolationToTheFullPath) {
  auto base = telegram_body();
  std::vector<std::string> invalid = {
    telegram_with("ingest.v1", "ingest.v2"),
    telegram_with(R"("telegram","provider")", R"("sms","provider")"),
    telegram_with(R"("provider":"telegram")", R"("provider":"x")"),
    telegram_with(R"("bot-7")", R"("")"),
    telegram_with(R"("bot-7")", "\"" + std::string(257, 'b') + "\""),
    telegram_with(R"("c-1")", "1"),
    telegram_with(R"("c-1")", R"("")"),
    telegram_with("2026-11-23T12:00:00Z", "2026-11-23 12:00:00Z"),
    telegram_with("2026-11-23T12:00:00Z", "2026-11-23T12:00:00."),
    telegram_with("2026-11-23T12:00:00Z", "2026-11-23T12:00:00+0100"),
    telegram_with("2026-11-23T12:00:00Z", "2026-11-23T12:00:00Z "),
    telegram_with("2026-11-23T12:00:00Z",
                  "2026-11-23T12:00:00." + std::string(50, '1') + "Z"),
    telegram_with(R"("user-9")", "null"),
    telegram_with(R"({"update_id":918273})", "[]"),
    telegram_with(R"("interactive")", R"("urgent")"),
    telegram_with(R"("policy_tier")", R"("priority")"),
    telegram_with(R"(,"sender":{"identity":"user-9"})", ""),
    telegram_with(R"("external_event_id":"918273",)", ""),
    telegram_with(R"({"traceparent":"00-abc-def-01"})", "1"),
    telegram_with(R"("hello")", "\"" + std::string(65537, 'h') + "\""),
    telegram_with(R"("hello")", R"("a\u0000b")"),
    telegram_with(R"("user-9")", R"("a\u0000b")"),
    telegram_with(R"("hello")", R"("a\udc00b")"),
    telegram_with(R"("hello")", "\"a\xc3"
                                "b\""),
    telegram_with(R"("hello")", "\"\xed\xa0\x80\""),
    telegram_with(R"("hello")", R"("hello","extra":1)"),
    base + "x",
    base + std::string{"\0{}", 3},
    "[" + base + "]",
    R"("ingest.v1")",
  };
  for (auto& body : invalid) {
    EXPECT_FALSE(detail::parse_ingest_fast(body, 1 << 20, 300, now)) << body;
    EXPECT_FALSE(detail::parse_ingest_full(body, 1 << 20, 300, now).record)
      << body;
    EXPECT_FALSE(parse_ingest(body, 1 << 20, 300, now).record) << body;
  }
  EXPECT_FALSE(detail::parse_ingest_fast(base, base.size() - 1, 300, now));
}

TEST(IngestFastPath, LeavesTheUnusualToTheFullPath) {
  // Valid, but not what the fast path vouches for: the full path decides.
  for (auto& body :
       {telegram_with(R"("traceparent":"00-abc-def-01")", R"("traceparent":7)"),
        telegram_with(R"("identity":"user-9")",
                      R"("identity":"user-9","identity":"user-8")")}) {
    EXPECT_FALSE(detail::parse_ingest_fast(body, 1 << 20, 300, now)) << body;
    auto full = detail::parse_ingest_full(body, 1 << 20, 300, now);
    auto both = parse_ingest(body, 1 << 20, 300, now);
    EXPECT_EQ(both.record.has_value(), full.record.has_value()) << body;
    EXPECT_EQ(both.violations.size(), full.violations.size()) << body;
  }
}

/// Deterministic bytes for the mutations (xorshift64).
struct rng {
  uint64_t state;
  uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  size_t below(size_t n) {
    return static_cast<size_t>(next() % n);
  }
};

/// Where each string literal of `body` starts and ends (its quotes),
/// skipping escaped quotes.
std::vector<std::pair<size_t, size_t>> string_spans(const std::string& body) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '"')
      continue;
    size_t j = i + 1;
    while (j < body.size() && body[j] != '"')
      j += body[j] == '\\' ? 2 : 1;
    if (j >= body.size())
      break;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

TEST(IngestFastPath, AcceptsOnlyWhatTheFullPathAcceptsWithTheSameRecord) {
  // Fragments that make a body invalid, or unusual, or leave it valid:
  // tokens, keys of the schema in the wrong place, escapes, bad UTF-8.
  const std::vector<std::string> fragments = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "null",
    "true",
    "1",
    "-0.5e9",
    "1e999",
    R"("x")",
    R"("")",
    R"("ingest.v1")",
    R"("telegram")",
    R"("email")",
    R"("api")",
    R"("default")",
    R"("channel":)",
    R"("identity":"u",)",
    R"("traceparent":)",
    R"("tracestate":)",
    R"("raw":{},)",
    R"("external_thread_id":null,)",
    R"("control":{},)",
    R"("extra":1,)",
    R"("2026-01-01T00:00:00+01:00")",
    R"("2026-01-01T00:00:00")",
    R"(\u0000)",
    R"(\udc00)",
    R"(\ud83d\ude00)",
    R"(\u00e9)",
    "\xc3\xa4",
    "\xc3",
    "\xe2\x82",
    "\xed\xa0\x80",
    "\xf4\x90\x80\x80",
    "\xef\xbb\xbf",
    std::string{"\0", 1},
    " ",
    "\n",
    std::string(300, 'x'),
  };
  // String contents at and around the schema's limits and enums.
  std::string two_byte_256;
  for (int i = 0; i < 256; ++i)
    two_byte_256 += "\xc3\xa4";
  const std::vector<std::string> contents = {
    "",
    "x",
    std::string(256, 'k'),
    std::string(257, 'k'),
    two_byte_256,
    two_byte_256 + "\xc3\xa4",
    std::string(65536, 't'),
    std::string(65537, 't'),
    "ingest.v1",
    "ingest.v2",
    "telegram",
    "slack",
    "email",
    "api",
    "mcp",
    "imap",
    "internal",
    "default",
    "interactive",
    "high_priority",
    "traceparent",
    "tracestate",
    "congo=t61rcWkgMzE",
    "Rojo=1",
    "identity",
    "raw",
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.5-01:00",
    "2026-01-01T00:00:00.Z",
    "2026-01-01T00:00:00+01:0",
    "2026-1-01T00:00:00Z",
    "2026-01-01T00:00:00." + std::string(44, '9') + "Z",
    "2026-01-01T00:00:00." + std::string(45, '9') + "Z",
    R"(a\u0000)",
    R"(\udc00)",
    R"(\ud83d\ude00)",
    R"(\u00e9)",
    " <id@x> ",
  };
  const std::vector<std::string> values = {
    "null", "1", "true", "{}", "[]", R"({"traceparent":"t"})", "[\"a\"]",
  };
  const auto bases = valid_bodies();
  rng r{0x9E3779B97F4A7C15ULL};
  int fast_accepted = 0;
  int full_only = 0;
  int both_rejected = 0;
  constexpr int mutations = 40000;
  for (int i = 0; i < mutations; ++i) {
    auto body = bases[r.below(bases.size())];
    auto edits = 1 + r.below(3);
    for (size_t e = 0; e < edits && !body.empty(); ++e) {
      if (r.below(2) == 0) {
        // Syntax stays: a string's content (or the whole string) replaced.
        auto quotes = string_spans(body);
        if (quotes.empty())
          continue;
        auto [open, close] = quotes[r.below(quotes.size())];
        if (r.below(4) == 0)
          body.replace(open, close - open + 1, values[r.below(values.size())]);
        else
          body.replace(open + 1, close - open - 1,
                       contents[r.below(contents.size())]);
        continue;
      }
      auto at = r.below(body.size());
      auto len = std::min(body.size() - at, r.below(12));
      switch (r.below(3)) {
        case 0: body.erase(at, len); break;
        case 1: body.insert(at, fragments[r.below(fragments.size())]); break;
        default:
          body.replace(at, len, fragments[r.below(fragments.size())]);
          break;
      }
    }
    auto fast = detail::parse_ingest_fast(body, 1 << 20, 300, now);
    auto full = detail::parse_ingest_full(body, 1 << 20, 300, now);
    if (fast) {
      ++fast_accepted;
      ASSERT_TRUE(full.record)
        << "the fast path accepted what the full path rejects: " << body;
      expect_same_record(*fast, *full.record, body);
    } else if (full.record) {
      ++full_only;
    } else {
      ++both_rejected;
    }
  }
  // The mutations must exercise both outcomes, or the test shows nothing.
  EXPECT_GT(fast_accepted, mutations / 50);
  EXPECT_GT(both_rejected, mutations / 4);
  RecordProperty("fast_accepted", fast_accepted);
  RecordProperty("full_only", full_only);
  RecordProperty("both_rejected", both_rejected);
}

TEST(IngestFastPath, WasWrittenAgainstThisSchema) {
  // parse_ingest_fast mirrors schemas/ingest.v1.json by hand. When the
  // schema changes, change the fast path to match (runtime/ingest.cpp),
  // extend the tests above, then update this fingerprint. (payload.attachments
  // is left to the full path: the fast path refuses the unknown key, see
  // test/unit/attachments_test.cpp.)
  auto schema = embedded("schemas/ingest.v1.json");
  ASSERT_TRUE(schema);
  EXPECT_EQ(sha256_hex(*schema),
            "214f6f52e58b72b9162e082e01e41d44d9a638f7f4f6381f3192160ac23fb492");
}

} // namespace
} // namespace butlers
