// The checks the HTTP API runs before a request reaches an actor: the
// bearer token, media type and size of a body, ids, query parameters, and
// the operator actions' bodies.

#include <gtest/gtest.h>

#include "runtime/http_checks.hpp"

namespace butlers {
namespace {

TEST(BearerToken, MatchesOnlyTheExactHeaderWhenATokenIsSet) {
  EXPECT_TRUE(bearer_matches("Bearer s3cret", std::string_view{"Bearer "
                                                               "s3cret"}));
  EXPECT_FALSE(bearer_matches("Bearer s3cret", std::string_view{"Bearer "
                                                                "s3creT"}));
  EXPECT_FALSE(bearer_matches("Bearer s3cret", std::string_view{"Bearer s3"}));
  EXPECT_FALSE(bearer_matches("Bearer s3cret", std::string_view{"bearer "
                                                                "s3cret"}));
  EXPECT_FALSE(bearer_matches("Bearer s3cret", std::nullopt));
}

TEST(BearerToken, AnyRequestPassesWithoutAConfiguredToken) {
  EXPECT_TRUE(bearer_matches("", std::nullopt));
  EXPECT_TRUE(bearer_matches("", std::string_view{"Bearer whatever"}));
}

TEST(JsonMediaType, IgnoresCaseParametersAndTrailingSpaces) {
  EXPECT_TRUE(is_json_media_type("application/json"));
  EXPECT_TRUE(is_json_media_type("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(is_json_media_type("application/json ;charset=utf-8"));
  EXPECT_FALSE(is_json_media_type("text/plain"));
  EXPECT_FALSE(is_json_media_type("application/json-seq"));
  EXPECT_FALSE(is_json_media_type(""));
}

TEST(Uuid, WantsFiveGroupsOfHexDigits) {
  EXPECT_TRUE(is_uuid("0190f4c2-7d1e-7a3b-9c4d-5e6f7a8b9c0d"));
  EXPECT_TRUE(is_uuid("0190F4C2-7D1E-7A3B-9C4D-5E6F7A8B9C0D"));
  EXPECT_FALSE(is_uuid("0190f4c2-7d1e-7a3b-9c4d-5e6f7a8b9c0"));
  EXPECT_FALSE(is_uuid("0190f4c2x7d1e-7a3b-9c4d-5e6f7a8b9c0d"));
  EXPECT_FALSE(is_uuid("0190f4c2-7d1e-7a3b-9c4d-5e6f7a8b9c0g"));
  EXPECT_FALSE(is_uuid("not-a-uuid"));
}

TEST(QueryInt, ReadsAKeyFallsBackWhenAbsentAndRefusesGarbage) {
  EXPECT_EQ(query_int("after=12&limit=3", "after", 0), 12);
  EXPECT_EQ(query_int("after=12&limit=3", "limit", 500), 3);
  EXPECT_EQ(query_int("afterwards=1", "after", 7), 7);
  EXPECT_EQ(query_int("", "after", 7), 7);
  EXPECT_EQ(query_int("after=", "after", 0), std::nullopt);
  EXPECT_EQ(query_int("after=-1", "after", 0), std::nullopt);
  EXPECT_EQ(query_int("after=1x", "after", 0), std::nullopt);
  EXPECT_EQ(query_int("after=" + std::string(19, '9'), "after", 0),
            std::nullopt);
  EXPECT_EQ(query_int("after=" + std::string(18, '9'), "after", 0),
            999999999999999999);
}

TEST(JsonBody, RefusesTheMediaTypeBeforeTheSize) {
  auto type = std::optional<std::string_view>{"text/plain"};
  auto json = std::optional<std::string_view>{"application/json"};
  auto r = refuse_json_body(type, 100, 10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  EXPECT_NE(r->body.find("Content-Type must be application/json"),
            std::string::npos);
  ASSERT_TRUE(refuse_json_body(std::nullopt, 1, 10));
  r = refuse_json_body(json, 11, 10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("body exceeds http.max_body_bytes"),
            std::string::npos);
  EXPECT_FALSE(refuse_json_body(json, 10, 10));
}

TEST(TranscriptQuery, DefaultsAndBoundsTheWindow) {
  auto w = parse_transcript_query("");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->after, 0);
  EXPECT_EQ(w->limit, 500);
  w = parse_transcript_query("after=41&limit=1000");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->after, 41);
  EXPECT_EQ(w->limit, 1000);
  EXPECT_FALSE(parse_transcript_query("limit=0"));
  EXPECT_FALSE(parse_transcript_query("limit=1001"));
  EXPECT_FALSE(parse_transcript_query("after=x"));
  auto r = transcript_query_reply();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("limit (1..1000)"), std::string::npos);
}

TEST(OperatorBody, ReadsWhoWhyAndTheActionsArguments) {
  auto op = parse_operator_body(operator_verb::force_complete, "r-1",
                                R"({"who":"ops","why":"stuck","state":"x"})");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->verb, operator_verb::force_complete);
  EXPECT_EQ(op->request_id, "r-1");
  EXPECT_EQ(op->who, "ops");
  EXPECT_EQ(op->why, "stuck");
  EXPECT_EQ(op->state, "x");
  op = parse_operator_body(operator_verb::reroute, "r-1",
                           R"({"segment_id":"s1","butler":"b"})");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->who, "");
  EXPECT_EQ(op->segment_id, "s1");
  EXPECT_EQ(op->butler, "b");
  op = parse_operator_body(operator_verb::replay, "r-1",
                           R"({"who":1,"state":"x"})");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->who, "");
  EXPECT_EQ(op->state, "");
}

TEST(OperatorBody, RefusesABodyThatIsNoJsonObject) {
  EXPECT_FALSE(parse_operator_body(operator_verb::replay, "r", "[]"));
  EXPECT_FALSE(parse_operator_body(operator_verb::replay, "r", "{"));
  EXPECT_FALSE(parse_operator_body(operator_verb::replay, "r", ""));
  auto r = operator_body_reply();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("body must be a JSON object with 'who' and 'why'"),
            std::string::npos);
}

TEST(PathIds, NameWhatIsWrongWithThem) {
  auto r = bad_uuid_reply("run");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find(R"("message":"run id must be a UUID")"),
            std::string::npos);
  r = bad_thread_id_reply();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("thread id must be 1..128 of [A-Za-z0-9._:-]"),
            std::string::npos);
}

} // namespace
} // namespace butlers
