#include <gtest/gtest.h>

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

TEST(IngestParse, RespectsTheSizeLimit) {
  auto body = telegram_body(std::string(2000, 'x'));
  auto r = parse_ingest(body, 1000, 300, now);
  EXPECT_FALSE(r.record);
  EXPECT_FALSE(r.parse_error.empty());
}

} // namespace
} // namespace butlers
