// The Slack Web API as the slack adapter speaks it: text splitting (limit,
// line and word boundaries, never inside a UTF-8 sequence), the source
// message read back from a stored request, request bodies, emoji names,
// and what each answer means (documented answers in test/fixtures/slack).

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/delivery.hpp"
#include "runtime/json.hpp"
#include "runtime/slack.hpp"

namespace butlers {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR} + "/test/fixtures/slack/"
                   + name};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

http_response reply(int status, std::string body,
                    std::vector<std::pair<std::string, std::string>> h = {}) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(h);
  return r;
}

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

// -- splitting ----------------------------------------------------------------

TEST(slack_split, AShortTextIsOneChunk) {
  EXPECT_EQ(split_slack_text("hello"), std::vector<std::string>{"hello"});
}

TEST(slack_split, ALongTextSplitsAtLinesUnderFourThousandCharacters) {
  auto para = repeat("word ", 599) + "end\n"; // 2999 characters
  auto chunks = split_slack_text(para + para + para);
  ASSERT_EQ(chunks.size(), 3u);
  for (auto& c : chunks) {
    EXPECT_LE(json::code_points(c), slack_chunk_chars);
    EXPECT_EQ(c.back(), '\n') << "ends at a line boundary";
  }
}

TEST(slack_split, WithoutLinesItSplitsAtWords) {
  auto chunks = split_slack_text(repeat("abcdefghi ", 1000)); // 10000 chars
  ASSERT_EQ(chunks.size(), 3u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_LE(json::code_points(chunks[i]), slack_chunk_chars);
    EXPECT_EQ(chunks[i].back(), ' ');
  }
}

TEST(slack_split, NeverInsideAUtf8Sequence) {
  // 4-byte emoji and 3-byte CJK, no spaces: cuts fall between characters.
  auto text = repeat("\xf0\x9f\x91\x80\xe6\xbc\xa2", 5000);
  auto chunks = split_slack_text(text);
  ASSERT_EQ(chunks.size(), 3u);
  std::string joined;
  for (auto& c : chunks) {
    EXPECT_TRUE(json::is_utf8(c));
    EXPECT_LE(json::code_points(c), slack_chunk_chars);
    joined += c;
  }
  EXPECT_EQ(joined, text);
}

TEST(slack_split, NoChunkExceedsSlacksHardLimit) {
  auto chunks = split_slack_text(repeat("x", 100000), 1000000);
  for (auto& c : chunks)
    EXPECT_LE(c.size(), slack_text_limit);
}

// -- source and bodies --------------------------------------------------------

TEST(slack_source, IsReadFromTheStoredEnvelope) {
  auto raw = fixture("message_thread_reply.json");
  auto stored = R"({"schema_version":"ingest.v1","payload":{"raw":)" + raw
                + "}}";
  auto src = slack_source(stored);
  ASSERT_TRUE(src);
  EXPECT_EQ(src->channel, "C123ABC456");
  EXPECT_EQ(src->ts, "1483037604.017506");
  EXPECT_EQ(src->thread_ts, "1482960137.003543");
  auto top = slack_source(fixture("app_mention.json"));
  ASSERT_TRUE(top);
  EXPECT_EQ(top->thread_ts, "1515449522.000016") << "a reply starts a thread";
  EXPECT_FALSE(slack_source(R"({"payload":{"raw":{"update_id":1}}})"));
  EXPECT_FALSE(slack_source("not json"));
}

TEST(slack_bodies, QuoteWhatTheyCarry) {
  EXPECT_EQ(slack_post_message_body("C1", "a \"b\"\n", "1.2"),
            R"({"channel":"C1","text":"a \"b\"\n","thread_ts":"1.2"})");
  EXPECT_EQ(slack_post_message_body("C1", "x", ""),
            R"({"channel":"C1","text":"x"})");
  EXPECT_EQ(slack_reaction_body({"C1", "1.2", "1.2"}, "eyes"),
            R"({"channel":"C1","timestamp":"1.2","name":"eyes"})");
}

TEST(slack_emoji, NamesAreCheckedAsReactionsAddTakesThem) {
  for (auto ok : {"eyes", "white_check_mark", "space_invader", "+1",
                  "thumbsup::skin-tone-3", "man-woman-boy", "e-mail"})
    EXPECT_TRUE(is_slack_emoji_name(ok)) << ok;
  for (auto bad : {"", ":eyes:", "Eyes", "two words", "eyes::skin-tone-7",
                   "\xf0\x9f\x91\x80"})
    EXPECT_FALSE(is_slack_emoji_name(bad)) << bad;
}

// -- answers ------------------------------------------------------------------

TEST(slack_answer, OkCarriesTheTs) {
  auto a = read_slack_answer(reply(200, fixture("chat_postMessage_ok.json")));
  EXPECT_EQ(a.what, slack_answer::outcome::ok);
  EXPECT_EQ(a.ts, "1503435956.000247");
}

TEST(slack_answer, EachNamedErrorIsForGoodWithItsOwnClass) {
  auto of = [](const std::string& file) {
    return read_slack_answer(reply(200, fixture(file)));
  };
  auto a = of("error_not_in_channel.json");
  EXPECT_EQ(a.what, slack_answer::outcome::fail);
  EXPECT_EQ(a.error_class, "target_unavailable");
  EXPECT_EQ(a.slack_error, "not_in_channel");
  auto b = read_slack_answer(reply(200, R"({"ok":false,)"
                                        R"("error":"channel_not_found"})"));
  EXPECT_EQ(b.what, slack_answer::outcome::fail);
  EXPECT_EQ(b.error_class, "validation_error");
  auto c = of("error_invalid_auth.json");
  EXPECT_EQ(c.what, slack_answer::outcome::fail);
  EXPECT_EQ(c.error_class, "internal_error");
  EXPECT_NE(a.error_class, b.error_class);
  EXPECT_NE(b.error_class, c.error_class);
  EXPECT_NE(a.error_class, c.error_class);
}

TEST(slack_answer, TooManyRequestsWaitsForRetryAfter) {
  auto a = read_slack_answer(
    reply(429, fixture("error_ratelimited.json"), {{"retry-after", "7"}}));
  EXPECT_EQ(a.what, slack_answer::outcome::retry);
  EXPECT_EQ(a.error_class, "overload_rejected");
  EXPECT_EQ(a.wait, std::chrono::seconds{7});
}

TEST(slack_answer, ServerErrorsAndTimeoutsRetry) {
  EXPECT_EQ(read_slack_answer(reply(503, "")).what,
            slack_answer::outcome::retry);
  http_response t;
  t.failure = http_failure::timeout;
  auto a = read_slack_answer(t);
  EXPECT_EQ(a.what, slack_answer::outcome::retry);
  EXPECT_TRUE(a.ambiguous);
  EXPECT_EQ(read_slack_answer(reply(200, "<html>")).what,
            slack_answer::outcome::fail);
}

// -- configuration ------------------------------------------------------------

constexpr const char* slack_toml = R"(
[[connector]]
name = "slack-main"
type = "slack"
endpoint_identity = "U0LAN0Z89"
[[messenger.adapter]]
kind = "slack"
connector = "slack-main"
)";

TEST(slack_config, AnAdapterGetsSlackEmojiNamesAndSecretsComeFromTheEnv) {
  auto res = parse_config(slack_toml, "node.toml");
  ASSERT_TRUE(res.settings);
  auto& s = *res.settings;
  auto& r = s.messenger.adapters.at(0).reactions;
  EXPECT_EQ(r.progress, "eyes");
  EXPECT_EQ(r.parsed, "white_check_mark");
  EXPECT_EQ(r.errored, "space_invader");
  EXPECT_EQ(slack_api_base(s.connectors.at(0)), "https://slack.com/api");
  // Neither secret in the file: both are errors until the environment has
  // them.
  EXPECT_EQ(validate_settings(s).size(), 2u);
  auto errs = apply_env_overrides(s, [](const char* name) -> const char* {
    std::string n{name};
    if (n == "BUTLERS_CONNECTOR_SLACK_MAIN_SIGNING_SECRET")
      return "sign";
    if (n == "BUTLERS_CONNECTOR_SLACK_MAIN_TOKEN")
      return "xoxb-1";
    return nullptr;
  });
  EXPECT_TRUE(errs.empty());
  EXPECT_EQ(s.connectors.at(0).signing_secret, "sign");
  EXPECT_TRUE(validate_settings(s).empty());
  EXPECT_EQ(to_toml(s).find("sign\""), std::string::npos) << "never shown";
}

TEST(slack_config, ReactionsAreCheckedAtLoad) {
  auto res = parse_config(std::string{slack_toml}
                            + "reactions = { parsed = \":tada:\", "
                              "progress = \"hourglass\" }\n",
                          "node.toml");
  ASSERT_EQ(res.errors.size(), 1u);
  EXPECT_NE(res.errors[0].message.find("not a Slack emoji name"),
            std::string::npos)
    << res.errors[0].message;
  // A Telegram emoji is not a Slack name, nor a Slack name a Telegram emoji.
  auto tg = parse_config(std::string{slack_toml}
                           + "reactions = { parsed = \"\xf0\x9f\x91\x8d\" }\n",
                         "node.toml");
  EXPECT_EQ(tg.errors.size(), 1u);
}

// -- the adapter's channel ----------------------------------------------------

TEST(slack_adapter, ChatAdaptersServeTheirOwnChannelOnlyEvenWithAStar) {
  delivery_adapter_config cfg;
  cfg.channels = {"*"};
  cfg.kind = adapter_kind::slack;
  auto slack = make_delivery_adapter(cfg);
  EXPECT_TRUE(slack->serves("slack"));
  EXPECT_FALSE(slack->serves("telegram"));
  EXPECT_TRUE(slack->reacts());
  cfg.kind = adapter_kind::telegram;
  auto telegram = make_delivery_adapter(cfg);
  EXPECT_TRUE(telegram->serves("telegram"));
  EXPECT_FALSE(telegram->serves("slack"));
}

} // namespace
} // namespace butlers
