// The dashboard API's envelopes: ApiResponse, PaginatedResponse, the
// pagination window and the 4xx answers naming a bad query parameter.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/api_response.hpp"
#include "runtime/json.hpp"

namespace butlers {
namespace {

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(text, doc)) << text;
  return doc;
}

TEST(ApiResponse, WrapsDataAndMeta) {
  auto r = api_response(R"({"a":1})");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.no_store);
  EXPECT_EQ(r.body, R"({"data":{"a":1},"meta":{}})");
  auto doc = parsed(api_response_body("[1,2]", R"({"period":"7d"})"));
  ASSERT_TRUE(doc["data"].IsArray());
  EXPECT_EQ(doc["data"].Size(), 2u);
  EXPECT_STREQ(doc["meta"]["period"].GetString(), "7d");
}

TEST(PaginatedResponse, CarriesTotalOffsetLimitAndHasMore) {
  auto doc = parsed(paginated_body("[1,2]", page_meta{5, 0, 2}));
  EXPECT_EQ(doc["data"].Size(), 2u);
  EXPECT_EQ(doc["meta"]["total"].GetInt(), 5);
  EXPECT_EQ(doc["meta"]["offset"].GetInt(), 0);
  EXPECT_EQ(doc["meta"]["limit"].GetInt(), 2);
  EXPECT_TRUE(doc["meta"]["has_more"].GetBool());
  auto last = parsed(paginated_body("[5]", page_meta{5, 4, 2}, R"("x":true)"));
  EXPECT_FALSE(last["meta"]["has_more"].GetBool());
  EXPECT_TRUE(last["meta"]["x"].GetBool());
  EXPECT_EQ(paginated_response("[]", page_meta{0, 0, 50}).body,
            R"({"data":[],"meta":{"total":0,"offset":0,"limit":50,)"
            R"("has_more":false}})");
}

TEST(PageWindow, DefaultsAndBounds) {
  auto w = parse_page_window("");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->offset, 0);
  EXPECT_EQ(w->limit, 50);
  w = parse_page_window("offset=10&limit=500");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->offset, 10);
  EXPECT_EQ(w->limit, 500);
  EXPECT_FALSE(parse_page_window("limit=0"));
  EXPECT_FALSE(parse_page_window("limit=501"));
  EXPECT_FALSE(parse_page_window("offset=-1"));
  EXPECT_FALSE(parse_page_window("offset=x"));
  EXPECT_EQ(bad_page_reply().status, 400);
}

TEST(QueryParam, FindsExactKeysOnly) {
  EXPECT_EQ(query_param("period=7d&x=1", "period"), std::string_view{"7d"});
  EXPECT_EQ(query_param("a=1&period=30d", "period"), std::string_view{"30d"});
  EXPECT_FALSE(query_param("periods=7d", "period"));
  EXPECT_FALSE(query_param("", "period"));
  EXPECT_EQ(query_param("period", "period"), std::string_view{});
}

TEST(ApiErrors, NameTheParameterAndKeepTheErrorShape) {
  auto r = bad_query_param_reply("period", "1y", "24h, 7d or 30d");
  EXPECT_EQ(r.status, 400);
  auto doc = parsed(r.body);
  EXPECT_STREQ(doc["error"]["code"].GetString(), "validation_error");
  EXPECT_NE(std::string{doc["error"]["message"].GetString()}.find("period"),
            std::string::npos);
  EXPECT_STREQ(doc["error"]["details"][0]["parameter"].GetString(), "period");
  EXPECT_STREQ(doc["error"]["details"][0]["value"].GetString(), "1y");
  auto nf = api_not_found_reply("connector", "telegram/bot-1");
  EXPECT_EQ(nf.status, 404);
  EXPECT_STREQ(parsed(nf.body)["error"]["code"].GetString(), "not_found");
}

} // namespace
} // namespace butlers
