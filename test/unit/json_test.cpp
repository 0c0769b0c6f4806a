#include <string>

#include <gtest/gtest.h>

#include "runtime/json.hpp"

namespace json = butlers::json;

namespace {

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

} // namespace

TEST(json_parse, accepts_a_document) {
  rapidjson::Document doc;
  auto err = json::parse(R"({"a": [1, 2.5, "x", null, true], "b": {}})", doc);
  ASSERT_FALSE(err) << err->message;
  ASSERT_TRUE(doc.IsObject());
  EXPECT_EQ(doc["a"].Size(), 5u);
}

TEST(json_parse, rejects_100000_deep_nesting_without_crashing) {
  rapidjson::Document doc;
  auto err = json::parse(nested_arrays(100000), doc);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("depth limit of 64"), std::string::npos)
    << err->message;
  EXPECT_EQ(err->offset, 64u);
}

TEST(json_parse, depth_limit_is_inclusive) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(nested_arrays(64), doc));
  EXPECT_TRUE(json::parse(nested_arrays(65), doc));
  json::parse_limits limits;
  limits.max_depth = 3;
  EXPECT_FALSE(json::parse(R"({"a": [{}]})", doc, limits));
  EXPECT_TRUE(json::parse(R"({"a": [{"b": []}]})", doc, limits));
}

TEST(json_parse, brackets_inside_strings_do_not_count) {
  rapidjson::Document doc;
  std::string text = R"({"a": ")" + std::string(1000, '[')
                     + R"(\"[{", "b": 1})";
  auto err = json::parse(text, doc);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(doc["b"].GetInt(), 1);
}

TEST(json_parse, iterative_parser_survives_depth_when_the_limit_allows_it) {
  // Only the pre-scan bounds depth; the parser itself must not recurse, and
  // destroying the document must not either (the pool allocator frees all
  // at once).
  json::parse_limits limits;
  limits.max_depth = 1000000;
  rapidjson::Document doc;
  auto err = json::parse(nested_arrays(100000), doc, limits);
  EXPECT_FALSE(err);
}

TEST(json_parse, rejects_oversized_text) {
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = 16;
  auto err = json::parse(R"({"a": "12345678"})", doc, limits);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("exceeds the limit of 16 bytes"),
            std::string::npos)
    << err->message;
  std::string big = "\"" + std::string(1 << 20, 'x') + "\"";
  err = json::parse(big, doc);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("1048576 bytes"), std::string::npos);
}

TEST(json_parse, rejects_trailing_garbage_with_offset) {
  rapidjson::Document doc;
  auto err = json::parse(R"({"a": 1} x)", doc);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->offset, 9u);
  EXPECT_NE(err->message.find("offset 9"), std::string::npos) << err->message;
  EXPECT_NE(err->message.find("must not be followed"), std::string::npos)
    << err->message;
}

TEST(json_parse, rejects_malformed_input) {
  rapidjson::Document doc;
  EXPECT_TRUE(json::parse("", doc));
  EXPECT_TRUE(json::parse("{", doc));
  EXPECT_TRUE(json::parse("[1,]", doc));
  EXPECT_TRUE(json::parse("NaN", doc));
  EXPECT_TRUE(json::parse("{'a': 1}", doc));
  EXPECT_TRUE(json::parse("]]]]", doc));
  EXPECT_TRUE(json::parse("\"\xff\"", doc)) << "invalid UTF-8";
  EXPECT_TRUE(json::parse("\"\xed\xa0\x80\"", doc)) << "UTF-8 surrogate";
}

TEST(json_scratch_document, holds_documents_beyond_its_buffer) {
  // 2,000 members of ~40 bytes each: far past the 16 KiB scratch buffer.
  std::string text = "{";
  for (int i = 0; i < 2000; ++i)
    text += (i ? ",\"" : "\"") + std::string(24, 'k') + std::to_string(i)
            + "\":" + std::to_string(i);
  text += "}";
  for (int round = 0; round < 3; ++round) {
    json::scratch_document scratch;
    ASSERT_FALSE(json::parse(text, scratch.doc()));
    ASSERT_EQ(scratch.doc().MemberCount(), 2000u);
    EXPECT_EQ(scratch.doc()[(std::string(24, 'k') + "1999").c_str()].GetInt(),
              1999);
  }
}

TEST(json_scratch_document, a_second_one_on_the_thread_does_not_share_it) {
  {
    json::scratch_document outer;
    ASSERT_FALSE(
      json::parse(R"({"outer": "a value that must survive"})", outer.doc()));
    {
      json::scratch_document inner;
      ASSERT_FALSE(json::parse(R"({"inner": "another value, overwriting?"})",
                               inner.doc()));
      EXPECT_STREQ(inner.doc()["inner"].GetString(),
                   "another value, overwriting?");
    }
    EXPECT_STREQ(outer.doc()["outer"].GetString(), "a value that must survive");
  }
  // Both gone: the next one takes the thread's buffer again, and what it
  // parses is its own.
  json::scratch_document after;
  ASSERT_FALSE(json::parse(R"([1, 2, 3])", after.doc()));
  EXPECT_EQ(after.doc().Size(), 3u);
}

TEST(json_parse, rejects_a_nul_byte_anywhere) {
  // RapidJSON alone would stop at the NUL and accept the document before it.
  rapidjson::Document doc;
  auto err = json::parse(std::string{"{\"a\": 1}\0garbage", 17}, doc);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->offset, 8u);
  EXPECT_NE(err->message.find("NUL byte at offset 8"), std::string::npos)
    << err->message;
  EXPECT_TRUE(json::parse(std::string{"[\"a\0b\"]", 7}, doc));
  // Escaped, a NUL is JSON (what may hold one is the schema's business).
  EXPECT_FALSE(json::parse(R"(["a\u0000b"])", doc));
}

TEST(json_parse, rejects_a_lone_surrogate_escape) {
  rapidjson::Document doc;
  for (auto text : {R"(["\udc00"])", R"({"k\udfff": 1})", R"(["x\udc00y"])"}) {
    auto err = json::parse(text, doc);
    ASSERT_TRUE(err) << text;
    EXPECT_NE(err->message.find("lone UTF-16 surrogate"), std::string::npos)
      << err->message;
  }
  // A high surrogate without its low half RapidJSON rejects by itself.
  EXPECT_TRUE(json::parse(R"(["\ud800"])", doc));
  // A pair is fine, and so is every other escape.
  ASSERT_FALSE(json::parse(R"(["\ud83d\ude00", "\u00e9\u4e2d"])", doc));
  EXPECT_STREQ(doc[0].GetString(), "\xf0\x9f\x98\x80");
  EXPECT_STREQ(doc[1].GetString(), "\xc3\xa9\xe4\xb8\xad");
}

TEST(json_to_string, is_compact) {
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(R"( { "a" : [ 1 , 2 ] , "b" : "x\ny" } )", doc));
  EXPECT_EQ(json::to_string(doc), R"({"a":[1,2],"b":"x\ny"})");
}

TEST(json_quote, escapes_quotes_backslashes_and_control_characters) {
  EXPECT_EQ(json::quote(""), R"("")");
  EXPECT_EQ(json::quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(json::quote("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(json::quote(std::string_view{"\x01\x1f\0", 3}),
            R"("\u0001\u001f\u0000")");
  EXPECT_EQ(json::quote("caf\xc3\xa9 /"), "\"caf\xc3\xa9 /\"");
}

TEST(json_quote, replaces_invalid_utf8) {
  EXPECT_EQ(json::quote("a\xff"
                        "b"),
            "\"a\xef\xbf\xbd"
            "b\"");
  EXPECT_EQ(json::quote("\xc3"), "\"\xef\xbf\xbd\"") << "truncated sequence";
  EXPECT_EQ(json::quote("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\"")
    << "overlong form";
}

TEST(json_quote, roundtrips_through_parse) {
  std::string every_control;
  for (char c = 0; c < 0x20; ++c)
    every_control += c;
  const std::string samples[] = {
    "",
    "plain",
    "quote \" backslash \\ slash /",
    every_control,
    "emoji \xf0\x9f\x98\x80 and \xe2\x82\xac",
    std::string("nul\0inside", 10),
  };
  for (auto& s : samples) {
    rapidjson::Document doc;
    auto err = json::parse(json::quote(s), doc);
    ASSERT_FALSE(err) << err->message;
    ASSERT_TRUE(doc.IsString());
    EXPECT_EQ(std::string(doc.GetString(), doc.GetStringLength()), s);
  }
}
