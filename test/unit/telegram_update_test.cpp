// A Telegram Update as the ingest.v1 envelope a connector submits: every
// kind taken, the kinds ignored, and malformed input, which must come out
// invalid (never a crash, never an envelope the ingest boundary refuses).

#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "runtime/connector_ingest.hpp"
#include "runtime/json.hpp"
#include "runtime/telegram_update.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers {
namespace {

constexpr int64_t now = 1'795'000'000'000'000; // Unix µs

const std::string bot = "mybot";

std::string text_update() {
  return R"({"update_id":10000,"message":{"message_id":1365,)"
         R"("from":{"id":1111111,"is_bot":false,"first_name":"Test",)"
         R"("username":"Testusername"},)"
         R"("chat":{"id":-1001234,"type":"supergroup","title":"G"},)"
         R"("date":1441645532,"text":"Hello \"butler\"\n\u00e9 \ud83d\ude00"}})";
}

/// The envelope `m` holds, parsed by the canonical ingest boundary.
inbox_record ingested(const telegram_update_mapping& m) {
  EXPECT_EQ(m.verdict, update_verdict::envelope) << m.reason;
  connector_ingest_rules rules;
  rules.connector = "tg";
  rules.endpoint_identity = bot;
  auto r = parse_connector_envelope(m.envelope, rules, {}, now);
  EXPECT_TRUE(r.record) << describe_rejection(r) << "\n" << m.envelope;
  return r.record ? *r.record : inbox_record{};
}

/// payload.raw of an envelope, re-serialized.
std::string raw_of(const std::string& envelope) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(envelope, doc));
  return json::to_string(doc["payload"]["raw"]);
}

std::string canonical(const std::string& text) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(text, doc));
  return json::to_string(doc);
}

TEST(TelegramUpdate, AMessageBecomesAnEnvelopeKeyedByUpdateAndBot) {
  auto update = text_update();
  auto m = map_telegram_update(update, bot);
  EXPECT_EQ(m.kind, "message");
  EXPECT_EQ(m.update_id, 10000);
  auto rec = ingested(m);
  EXPECT_EQ(rec.dedupe_key, "tg:5:mybot:10000");
  EXPECT_EQ(rec.context.source_channel, "telegram");
  EXPECT_EQ(rec.context.source_endpoint_identity, bot);
  EXPECT_EQ(rec.context.source_thread_identity, "-1001234");
  EXPECT_EQ(rec.context.source_sender_identity, "1111111");
  EXPECT_EQ(rec.normalized_text, "Hello \"butler\"\n\u00e9 \U0001F600");
  EXPECT_NE(m.envelope.find(R"("observed_at":"2015-09-07T17:05:32Z")"),
            std::string::npos)
    << m.envelope;
}

TEST(TelegramUpdate, TheUpdateIsKeptVerbatimAsPayloadRaw) {
  auto update = text_update();
  auto m = map_telegram_update(update, bot);
  ASSERT_EQ(m.verdict, update_verdict::envelope);
  EXPECT_NE(m.envelope.find(update), std::string::npos)
    << "the body's own bytes are in the envelope";
  EXPECT_EQ(raw_of(m.envelope), canonical(update));
}

TEST(TelegramUpdate, AnEditIsObservedAtItsEditDate) {
  auto m = map_telegram_update(
    R"({"update_id":10001,"edited_message":{"message_id":1365,)"
    R"("from":{"id":7,"is_bot":false,"first_name":"A"},)"
    R"("chat":{"id":7,"type":"private"},"date":1441645532,)"
    R"("edit_date":1441645592,"text":"edited"}})",
    bot);
  EXPECT_EQ(m.kind, "edited_message");
  auto rec = ingested(m);
  EXPECT_EQ(rec.dedupe_key, "tg:5:mybot:10001");
  EXPECT_EQ(rec.normalized_text, "edited");
  EXPECT_NE(m.envelope.find("2015-09-07T17:06:32Z"), std::string::npos);
}

TEST(TelegramUpdate, AChannelPostIsSentByItsChannel) {
  auto m = map_telegram_update(
    R"({"update_id":10002,"channel_post":{"message_id":9,)"
    R"("sender_chat":{"id":-1009,"type":"channel","title":"News"},)"
    R"("chat":{"id":-1009,"type":"channel","title":"News"},)"
    R"("date":1441645532,"text":"post"}})",
    bot);
  EXPECT_EQ(m.kind, "channel_post");
  auto rec = ingested(m);
  EXPECT_EQ(rec.context.source_sender_identity, "-1009");
  EXPECT_EQ(rec.context.source_thread_identity, "-1009");
}

TEST(TelegramUpdate, AMessageWithoutFromOrSenderChatIsSentByItsChat) {
  auto rec = ingested(map_telegram_update(
    R"({"update_id":3,"channel_post":{"message_id":9,)"
    R"("chat":{"id":-42,"type":"channel"},"date":1,"text":"x"}})",
    bot));
  EXPECT_EQ(rec.context.source_sender_identity, "-42");
}

TEST(TelegramUpdate, ACaptionStandsInForTheText) {
  auto rec = ingested(map_telegram_update(
    R"({"update_id":10005,"message":{"message_id":1367,)"
    R"("from":{"id":1,"is_bot":false,"first_name":"A"},)"
    R"("chat":{"id":1,"type":"private"},"date":1441645532,)"
    R"("document":{"file_id":"x"},"caption":"the minutes"}})",
    bot));
  EXPECT_EQ(rec.normalized_text, "the minutes");
}

TEST(TelegramUpdate, AMessageWithoutTextOrCaptionIsIgnored) {
  auto m = map_telegram_update(
    R"({"update_id":10006,"message":{"message_id":1,)"
    R"("from":{"id":1,"is_bot":false,"first_name":"A"},)"
    R"("chat":{"id":1,"type":"private"},"date":1,"sticker":{"file_id":"s"}}})",
    bot);
  EXPECT_EQ(m.verdict, update_verdict::ignored);
  EXPECT_EQ(m.update_id, 10006);
  EXPECT_TRUE(m.envelope.empty());
}

TEST(TelegramUpdate, OtherKindsAreIgnoredAndNamed) {
  for (auto kind : {"callback_query", "my_chat_member", "inline_query",
                    "edited_channel_post", "message_reaction", "poll"}) {
    auto m = map_telegram_update(R"({"update_id":77,")" + std::string{kind}
                                   + R"(":{"id":"1"}})",
                                 bot);
    EXPECT_EQ(m.verdict, update_verdict::ignored) << kind;
    EXPECT_EQ(m.kind, kind);
    EXPECT_EQ(m.update_id, 77);
  }
  auto bare = map_telegram_update(R"({"update_id":78})", bot);
  EXPECT_EQ(bare.verdict, update_verdict::ignored);
}

TEST(TelegramUpdate, MalformedUpdatesAreInvalidWithAReason) {
  const char* cases[] = {
    "",
    "not json",
    "[1,2]",
    "\"update\"",
    "{}",
    R"({"update_id":"10000","message":{}})",
    R"({"update_id":-1,"message":{}})",
    R"({"update_id":1.5,"message":{}})",
    R"({"update_id":1e300,"message":{}})",
    R"({"update_id":99999999999999999999,"message":{}})",
    R"({"update_id":1,"message":"hi"})",
    R"({"update_id":1,"message":{"chat":{"id":1},"text":"no date"}})",
    R"({"update_id":1,"message":{"chat":{"id":1},"date":-5,"text":"x"}})",
    R"({"update_id":1,"message":{"chat":{"id":1},"date":999999999999,)"
    R"("text":"x"}})",
    R"({"update_id":1,"message":{"date":1,"text":"no chat"}})",
    R"({"update_id":1,"message":{"chat":{"id":"1"},"date":1,"text":"x"}})",
    R"({"update_id":1,"message":{"chat":{"id":1},"date":1,)"
    R"("text":{"bold":"x"}}})",
    R"({"update_id":1,"message":{"chat":{"id":1},"date":1,"text":"x"}} junk)",
    "{\"update_id\":1,\"message\":{\"chat\":{\"id\":1},\"date\":1,"
    "\"text\":\"\xff\xfe\"}}",
  };
  for (auto body : cases) {
    auto m = map_telegram_update(body, bot);
    EXPECT_EQ(m.verdict, update_verdict::invalid) << body;
    EXPECT_FALSE(m.reason.empty()) << body;
    EXPECT_TRUE(m.envelope.empty()) << body;
  }
}

TEST(TelegramUpdate, ADeeplyNestedBodyIsInvalidNotACrash) {
  std::string deep = R"({"update_id":1,"message":)";
  for (int i = 0; i < 100000; ++i)
    deep += "[";
  auto m = map_telegram_update(deep, bot);
  EXPECT_EQ(m.verdict, update_verdict::invalid);
}

TEST(TelegramUpdate, ANulInTheTextIsRefusedByTheIngestBoundary) {
  auto m = map_telegram_update(
    R"({"update_id":5,"message":{"chat":{"id":1},"date":1,"text":"a\u0000b"}})",
    bot);
  ASSERT_EQ(m.verdict, update_verdict::envelope);
  connector_ingest_rules rules;
  rules.connector = "tg";
  auto r = parse_connector_envelope(m.envelope, rules, {}, now);
  EXPECT_FALSE(r.record) << "PostgreSQL cannot store U+0000";
}

// Mutations of a valid Update (truncations, byte flips) never crash, and
// whatever comes out as an envelope passes the ingest boundary.
TEST(TelegramUpdate, MutatedUpdatesNeverCrashAndEnvelopesAlwaysValidate) {
  auto update = text_update();
  connector_ingest_rules rules;
  rules.connector = "tg";
  auto check = [&](const std::string& body) {
    auto m = map_telegram_update(body, bot);
    if (m.verdict != update_verdict::envelope)
      return;
    auto r = parse_connector_envelope(m.envelope, rules, {}, now);
    // A flipped byte can make a valid "\u0000" escape; nothing else may
    // fail.
    if (!r.record) {
      EXPECT_NE(body.find("\\u0000"), std::string::npos)
        << describe_rejection(r) << "\n"
        << body;
    }
  };
  for (size_t n = 0; n <= update.size(); ++n)
    check(update.substr(0, n));
  std::mt19937 rng{42};
  std::uniform_int_distribution<size_t> pos{0, update.size() - 1};
  std::uniform_int_distribution<int> byte{0, 255};
  for (int i = 0; i < 5000; ++i) {
    auto body = update;
    body[pos(rng)] = static_cast<char>(byte(rng));
    check(body);
  }
}

// The recorded Updates of test/fixtures/telegram, each as its README row
// says it should be taken.
TEST(TelegramUpdate, TheRecordedFixturesAreTakenIgnoredOrRefused) {
  struct expectation {
    const char* fixture;
    update_verdict verdict;
    const char* kind;
  };
  const expectation cases[] = {
    {"message_text", update_verdict::envelope, "message"},
    {"message_group", update_verdict::envelope, "message"},
    {"message_reply", update_verdict::envelope, "message"},
    {"message_document", update_verdict::envelope, "message"},
    {"edited_message", update_verdict::envelope, "edited_message"},
    {"channel_post", update_verdict::envelope, "channel_post"},
    {"callback_query", update_verdict::ignored, "callback_query"},
    {"my_chat_member", update_verdict::ignored, "my_chat_member"},
    {"malformed_no_update_id", update_verdict::invalid, ""},
    {"malformed_message_without_chat", update_verdict::invalid, "message"},
    {"malformed_text_not_string", update_verdict::invalid, "message"},
  };
  for (auto& c : cases) {
    auto text = test::telegram::fixture(c.fixture);
    auto m = map_telegram_update(text, bot);
    EXPECT_EQ(m.verdict, c.verdict) << c.fixture << ": " << m.reason;
    EXPECT_EQ(m.kind, c.kind) << c.fixture;
    if (m.verdict == update_verdict::envelope) {
      auto rec = ingested(m);
      EXPECT_EQ(raw_of(m.envelope), canonical(text)) << c.fixture;
      EXPECT_EQ(rec.dedupe_key,
                "tg:5:mybot:" + std::to_string(m.update_id.value_or(-1)));
    }
  }
}

TEST(TelegramUpdate, UnixTimesBecomeRfc3339InUtc) {
  EXPECT_EQ(rfc3339_of_unix_s(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(rfc3339_of_unix_s(1441645532), "2015-09-07T17:05:32Z");
  EXPECT_EQ(rfc3339_of_unix_s(253402300799), "9999-12-31T23:59:59Z");
  EXPECT_EQ(rfc3339_of_unix_s(253402300800), "");
  EXPECT_EQ(rfc3339_of_unix_s(-1), "");
}

} // namespace
} // namespace butlers
