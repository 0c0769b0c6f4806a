// Slack's Events API as the slack connector reads it: the request
// signature (Slack's documented example, a stale timestamp, a changed
// body, a missing secret), and the mapping of documented example payloads
// (test/fixtures/slack) to ingest.v1.

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include "runtime/ingest.hpp"
#include "runtime/json.hpp"
#include "runtime/slack_event.hpp"

namespace butlers {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR} + "/test/fixtures/slack/"
                   + name};
  EXPECT_TRUE(in) << name;
  std::stringstream buf;
  buf << in.rdbuf();
  auto s = buf.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

std::string pointer(const std::string& json, const char* ptr) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(json, doc)) << json;
  auto v = rapidjson::Pointer(ptr).Get(doc);
  if (v == nullptr)
    return "<absent>";
  return v->IsString() ? std::string{v->GetString(), v->GetStringLength()}
                       : json::to_string(*v);
}

// -- signatures ---------------------------------------------------------------

// The worked example of "Verifying requests from Slack": this secret, this
// timestamp and this body give this signature.
constexpr const char* doc_secret = "8f742231b10e8888abcd99yyyzzz85a5";
constexpr const char* doc_ts = "1531420618";
constexpr const char* doc_body
  = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    "&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name="
    "roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2F"
    "hooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZ"
    "RskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce"
    "8b6703c";
constexpr const char* doc_signature
  = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

TEST(slack_signature, MatchesSlacksDocumentedExample) {
  EXPECT_EQ(slack_signature(doc_secret, doc_ts, doc_body), doc_signature);
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, doc_signature, doc_body,
                                   1531420618 + 10),
            slack_signature_status::valid);
}

TEST(slack_signature, ATimestampMoreThanFiveMinutesOffIsStale) {
  auto at = int64_t{1531420618};
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, doc_signature, doc_body,
                                   at + 300),
            slack_signature_status::valid);
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, doc_signature, doc_body,
                                   at + 301),
            slack_signature_status::stale);
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, doc_signature, doc_body,
                                   at - 301),
            slack_signature_status::stale);
}

TEST(slack_signature, AnyChangeOrAbsenceIsRefused) {
  auto now = int64_t{1531420618};
  std::string body = doc_body;
  body[10] ^= 1;
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, doc_signature, body,
                                   now),
            slack_signature_status::mismatch);
  EXPECT_EQ(verify_slack_signature("other", doc_ts, doc_signature, doc_body,
                                   now),
            slack_signature_status::mismatch);
  std::string upper = doc_signature;
  upper[5] = 'A';
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, upper, doc_body, now),
            slack_signature_status::mismatch);
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, "v0=", doc_body, now),
            slack_signature_status::mismatch);
  EXPECT_EQ(verify_slack_signature(doc_secret, doc_ts, std::nullopt, doc_body,
                                   now),
            slack_signature_status::missing);
  EXPECT_EQ(verify_slack_signature(doc_secret, std::nullopt, doc_signature,
                                   doc_body, now),
            slack_signature_status::missing);
  EXPECT_EQ(verify_slack_signature(doc_secret, "15314x0618", doc_signature,
                                   doc_body, now),
            slack_signature_status::missing);
  EXPECT_EQ(verify_slack_signature("", doc_ts, doc_signature, doc_body, now),
            slack_signature_status::no_secret);
}

// -- mapping ------------------------------------------------------------------

TEST(slack_event, AnAppMentionBecomesAnEnvelopeWithoutTheMention) {
  auto body = fixture("app_mention.json");
  auto m = map_slack_event(body, "U0LAN0Z89");
  ASSERT_EQ(m.verdict, slack_event_verdict::envelope) << m.reason;
  EXPECT_EQ(m.event_id, "Ev123ABC456");
  auto& e = m.envelope;
  EXPECT_EQ(pointer(e, "/source/channel"), "slack");
  EXPECT_EQ(pointer(e, "/source/provider"), "slack");
  EXPECT_EQ(pointer(e, "/source/endpoint_identity"), "U0LAN0Z89");
  EXPECT_EQ(pointer(e, "/event/external_event_id"),
            "C123ABC456:1515449522.000016");
  EXPECT_EQ(pointer(e, "/event/external_thread_id"),
            "C123ABC456:1515449522.000016");
  EXPECT_EQ(pointer(e, "/event/observed_at"), "2018-01-08T22:12:02Z");
  EXPECT_EQ(pointer(e, "/sender/identity"), "U061F7AUR");
  EXPECT_EQ(pointer(e, "/payload/normalized_text"),
            "is it everything a river should be?");
  EXPECT_EQ(pointer(e, "/payload/raw/event_id"), "Ev123ABC456");
  // A valid ingest.v1 envelope.
  auto parsed = parse_ingest(e, size_t{1} << 20, 300,
                             int64_t{1515449522} * 1000000);
  EXPECT_TRUE(parsed.record) << parsed.parse_error;
}

TEST(slack_event, AThreadReplyContinuesItsThread) {
  auto m = map_slack_event(fixture("message_thread_reply.json"), "U0LAN0Z89");
  ASSERT_EQ(m.verdict, slack_event_verdict::envelope) << m.reason;
  EXPECT_EQ(pointer(m.envelope, "/event/external_thread_id"),
            "C123ABC456:1482960137.003543");
  EXPECT_EQ(pointer(m.envelope, "/event/external_event_id"),
            "C123ABC456:1483037604.017506");
  EXPECT_EQ(pointer(m.envelope, "/payload/normalized_text"),
            "Right, and the river!");
}

TEST(slack_event, APlainMessageKeepsItsText) {
  auto m = map_slack_event(fixture("message.json"), "U0LAN0Z89");
  ASSERT_EQ(m.verdict, slack_event_verdict::envelope) << m.reason;
  EXPECT_EQ(pointer(m.envelope, "/payload/normalized_text"), "Hello world");
  EXPECT_EQ(pointer(m.envelope, "/sender/identity"), "U123ABC456");
}

TEST(slack_event, AUrlVerificationIsAChallenge) {
  auto m = map_slack_event(fixture("url_verification.json"), "U0LAN0Z89");
  ASSERT_EQ(m.verdict, slack_event_verdict::challenge);
  EXPECT_EQ(m.challenge,
            "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
}

TEST(slack_event, BotsEditsAndDeletionsAreIgnoredEachForItsReason) {
  auto reason = [](const std::string& file) {
    auto m = map_slack_event(fixture(file), "U0LAN0Z89");
    EXPECT_EQ(m.verdict, slack_event_verdict::ignored) << file << m.reason;
    return m.ignored;
  };
  EXPECT_EQ(reason("message_bot.json"), slack_ignore_reason::bot);
  EXPECT_EQ(reason("message_changed.json"), slack_ignore_reason::edit);
  EXPECT_EQ(reason("message_deleted.json"), slack_ignore_reason::deletion);
  EXPECT_EQ(reason("reaction_added.json"), slack_ignore_reason::other);
  // The bot's own user.
  auto own = map_slack_event(fixture("message.json"), "U123ABC456");
  EXPECT_EQ(own.verdict, slack_event_verdict::ignored);
  EXPECT_EQ(own.ignored, slack_ignore_reason::bot);
}

TEST(slack_event, MalformedBodiesAreInvalidNeverAnException) {
  for (const char* body :
       {"", "null", "[]", "{", R"({"type":1})", R"({"type":"event_callback"})",
        R"({"type":"event_callback","event":[]})",
        R"({"type":"event_callback","event":{"type":"message"}})",
        R"({"type":"event_callback","event":{"type":"message","user":"U",)"
        R"("channel":"C","ts":"1.5","text":7}})",
        R"({"type":"event_callback","event":{"type":"message","user":"U",)"
        R"("channel":"C","ts":"-1","text":"x"}})",
        R"({"type":"event_callback","event":{"type":"message","user":"U",)"
        R"("channel":"C","ts":"1.5","thread_ts":5,"text":"x"}})",
        R"({"type":"url_verification","challenge":3})"}) {
    auto m = map_slack_event(body, "U0LAN0Z89");
    EXPECT_EQ(m.verdict, slack_event_verdict::invalid) << body;
    EXPECT_FALSE(m.reason.empty()) << body;
  }
}

} // namespace
} // namespace butlers
