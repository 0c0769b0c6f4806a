// The Telegram Bot API as the telegram adapter speaks it, without I/O:
// splitting long texts, finding the source message in a stored Update, the
// request bodies, and what each kind of answer means.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "runtime/telegram.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers {
namespace {

namespace tgu = test::telegram;

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += x;
  return out;
}

/// An ingest.v1 body as a connector stores it, with `update` as payload.raw.
std::string ingest_with(const std::string& update) {
  return R"({"schema_version":"ingest.v1","source":{"channel":"telegram",)"
         R"("provider":"telegram","endpoint_identity":"bot"},"event":{)"
         R"("external_event_id":"1","observed_at":"2026-01-01T00:00:00Z"},)"
         R"("sender":{"identity":"7"},"payload":{"raw":)"
         + update + R"(,"normalized_text":"hi"}})";
}

http_response answer(int status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// -- splitting ---------------------------------------------------------------

TEST(TelegramText, AShortTextIsOneMessage) {
  EXPECT_EQ(split_telegram_text("hello"), std::vector<std::string>{"hello"});
  EXPECT_EQ(split_telegram_text(repeat("a", 4096)).size(), 1u);
}

TEST(TelegramText, ALongTextSplitsAtTheLimitAndLosesNothing) {
  auto text = repeat("a", 4096 * 2 + 10);
  auto chunks = split_telegram_text(text);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), 4096u);
  EXPECT_EQ(chunks[1].size(), 4096u);
  EXPECT_EQ(chunks[2].size(), 10u);
  EXPECT_EQ(joined(chunks), text);
}

TEST(TelegramText, ChunksEndAfterTheLastNewlineElseTheLastSpace) {
  // Lines of 99 letters and a newline: the first chunk takes 40 whole lines.
  auto lines = repeat(repeat("x", 99) + "\n", 50);
  auto chunks = split_telegram_text(lines);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].size(), 4000u);
  EXPECT_EQ(chunks[0].back(), '\n');
  EXPECT_EQ(joined(chunks), lines);
  // Words of 9 letters and a space, no newline: a chunk ends after a space.
  auto words = repeat("abcdefghi ", 500);
  auto by_space = split_telegram_text(words);
  ASSERT_EQ(by_space.size(), 2u);
  EXPECT_EQ(by_space[0].size(), 4090u);
  EXPECT_EQ(by_space[0].back(), ' ');
  EXPECT_EQ(joined(by_space), words);
}

TEST(TelegramText, ANewlineEarlyInTheChunkDoesNotHalveIt) {
  // A newline in the first half is passed over for a space in the second.
  auto text = "intro\n" + repeat("abcdefghi ", 500);
  auto chunks = split_telegram_text(text);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_GT(chunks[0].size(), 4000u);
  EXPECT_EQ(joined(chunks), text);
}

TEST(TelegramText, TheLimitCountsCodePointsAndNeverCutsOne) {
  // U+1F600 is four UTF-8 bytes, two UTF-16 units, one character here.
  auto grin = std::string{"\xf0\x9f\x98\x80"};
  auto text = repeat(grin, 4097);
  auto chunks = split_telegram_text(text);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(telegram_length(chunks[0]), 4096u);
  EXPECT_EQ(chunks[0].size(), 4096u * 4);
  EXPECT_EQ(chunks[1], grin);
  // Two-byte characters (é) with a limit that falls inside none of them.
  auto accents = repeat("\xc3\xa9", 10);
  auto small = split_telegram_text(accents, 3);
  ASSERT_EQ(small.size(), 4u);
  for (auto& c : small)
    EXPECT_TRUE(json::is_utf8(c)) << c;
  EXPECT_EQ(joined(small), accents);
}

TEST(TelegramText, WhitespaceOnlyChunksAreDropped) {
  auto text = repeat("a", 4096) + repeat("\n", 5000) + "end";
  auto chunks = split_telegram_text(text);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], repeat("a", 4096));
  EXPECT_EQ(chunks[1].substr(chunks[1].size() - 3), "end");
}

// -- the source message ------------------------------------------------------

TEST(TelegramSource, FromTheUpdateInAnIngestBody) {
  tgu::message_spec m;
  m.message_id = 77;
  m.chat_id = 4242;
  auto ref = telegram_source(ingest_with(tgu::message_update(m, 9)));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->chat_id, "4242");
  EXPECT_EQ(ref->message_id, 77);
}

TEST(TelegramSource, EditedMessagesChannelPostsAndBareUpdates) {
  tgu::message_spec m;
  m.message_id = 5;
  m.chat_id = -1001234567890;
  auto edited = telegram_source(ingest_with(tgu::edited_message_update(m, 1)));
  ASSERT_TRUE(edited);
  EXPECT_EQ(edited->chat_id, "-1001234567890");
  auto post = telegram_source(ingest_with(tgu::channel_post_update(m, 2)));
  ASSERT_TRUE(post);
  EXPECT_EQ(post->message_id, 5);
  auto bare = telegram_source(tgu::message_update(m, 3));
  ASSERT_TRUE(bare) << "an Update stored as it is";
  EXPECT_EQ(bare->message_id, 5);
}

TEST(TelegramSource, NothingForOtherPayloads) {
  EXPECT_FALSE(telegram_source(ingest_with(tgu::callback_query_update())));
  EXPECT_FALSE(telegram_source(R"({"schema_version":"ingest.v1"})"));
  EXPECT_FALSE(telegram_source("not json"));
  EXPECT_FALSE(telegram_source(
    ingest_with(tgu::fixture("malformed_message_without_chat"))));
}

// -- bodies ------------------------------------------------------------------

TEST(TelegramBodies, SendMessageRepliesToTheSourceMessage) {
  rapidjson::Document d;
  ASSERT_FALSE(
    json::parse(telegram_send_message_body("-100", "hi \"x\"", 7), d));
  EXPECT_EQ(d["chat_id"].GetInt64(), -100);
  EXPECT_STREQ(d["text"].GetString(), "hi \"x\"");
  EXPECT_EQ(d["reply_parameters"]["message_id"].GetInt64(), 7);
  EXPECT_TRUE(d["reply_parameters"]["allow_sending_without_reply"].GetBool());
  ASSERT_FALSE(json::parse(telegram_send_message_body("@news", "x", 0), d));
  EXPECT_STREQ(d["chat_id"].GetString(), "@news");
  EXPECT_FALSE(d.HasMember("reply_parameters"));
}

TEST(TelegramBodies, SetMessageReactionSetsOneEmoji) {
  rapidjson::Document d;
  ASSERT_FALSE(
    json::parse(telegram_reaction_body({"42", 9}, "\xf0\x9f\x91\x8d"), d));
  EXPECT_EQ(d["chat_id"].GetInt64(), 42);
  EXPECT_EQ(d["message_id"].GetInt64(), 9);
  ASSERT_EQ(d["reaction"].Size(), 1u);
  EXPECT_STREQ(d["reaction"][0]["type"].GetString(), "emoji");
  EXPECT_STREQ(d["reaction"][0]["emoji"].GetString(), "\xf0\x9f\x91\x8d");
}

// -- answers -----------------------------------------------------------------

using outcome = telegram_answer::outcome;

TEST(TelegramAnswer, OkCarriesTheMessageId) {
  auto a = read_telegram_answer(
    answer(200, R"({"ok":true,"result":{"message_id":321,"chat":{"id":1}}})"));
  EXPECT_EQ(a.what, outcome::ok);
  EXPECT_EQ(a.message_id, "321");
  EXPECT_EQ(read_telegram_answer(answer(200, R"({"ok":true,"result":true})"))
              .what,
            outcome::ok);
}

TEST(TelegramAnswer, TooManyRequestsWaitsWhatTelegramSays) {
  auto a = read_telegram_answer(
    answer(429, R"({"ok":false,"error_code":429,"description":"Too Many )"
                R"(Requests: retry after 7","parameters":{"retry_after":7}})"));
  EXPECT_EQ(a.what, outcome::retry);
  EXPECT_EQ(a.error_class, "overload_rejected");
  EXPECT_EQ(a.wait, std::chrono::seconds{7});
  EXPECT_FALSE(a.ambiguous);
}

TEST(TelegramAnswer, ServerErrorsAndTimeoutsAreRetried) {
  auto e500 = read_telegram_answer(
    answer(500, R"({"ok":false,"error_code":500,"description":"x"})"));
  EXPECT_EQ(e500.what, outcome::retry);
  EXPECT_EQ(e500.error_class, "target_unavailable");
  EXPECT_FALSE(e500.ambiguous);
  auto e502 = read_telegram_answer(answer(502, "<html>Bad Gateway</html>"));
  EXPECT_EQ(e502.what, outcome::retry);
  EXPECT_TRUE(e502.ambiguous) << "the front end may have passed it on";
  http_response slow;
  slow.failure = http_failure::timeout;
  auto t = read_telegram_answer(slow);
  EXPECT_EQ(t.what, outcome::retry);
  EXPECT_EQ(t.error_class, "timeout");
  EXPECT_TRUE(t.ambiguous);
  http_response refused;
  refused.failure = http_failure::connect;
  auto c = read_telegram_answer(refused);
  EXPECT_EQ(c.what, outcome::retry);
  EXPECT_FALSE(c.ambiguous) << "nothing was sent";
}

TEST(TelegramAnswer, BadRequestsAndRefusalsFailForGoodWithTheirClass) {
  auto bad = read_telegram_answer(answer(
    400,
    R"({"ok":false,"error_code":400,"description":"Bad Request: chat not found"})"));
  EXPECT_EQ(bad.what, outcome::fail);
  EXPECT_EQ(bad.error_class, "validation_error");
  EXPECT_NE(bad.description.find("chat not found"), std::string::npos);
  for (int status : {401, 403, 404}) {
    auto a = read_telegram_answer(
      answer(status, R"({"ok":false,"error_code":403,"description":"no"})"));
    EXPECT_EQ(a.what, outcome::fail) << status;
    EXPECT_EQ(a.error_class, "target_unavailable") << status;
  }
  EXPECT_EQ(read_telegram_answer(answer(200, "nonsense")).what, outcome::fail);
}

} // namespace
} // namespace butlers
