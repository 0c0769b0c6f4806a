#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/schema.h>

#include "runtime/embedded.hpp"
#include "runtime/schema.hpp"

namespace fs = std::filesystem;
using butlers::schema;
using butlers::violation;

namespace {

// -- helpers -----------------------------------------------------------------

/// The repository root. test/CMakeLists.txt gives BUTLERS_SOURCE_DIR to
/// butlers_test_support only, so fall back to this file's own location.
fs::path source_dir() {
#ifdef BUTLERS_SOURCE_DIR
  return fs::path{BUTLERS_SOURCE_DIR};
#else
  return fs::path{__FILE__}.parent_path().parent_path().parent_path();
#endif
}

fs::path fixture_root() {
  return source_dir() / "test" / "fixtures" / "schemas";
}

std::string read_file(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw std::runtime_error("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

rapidjson::Document parse_or_throw(const std::string& text,
                                   const std::string& what) {
  rapidjson::Document doc;
  if (auto err = butlers::json::parse(text, doc))
    throw std::runtime_error(what + ": " + err->message);
  return doc;
}

std::string render(const std::vector<violation>& xs) {
  std::string out;
  for (auto& x : xs)
    out += "\n  " + butlers::to_string(x);
  return out;
}

bool has(const std::vector<violation>& xs, const std::string& pointer,
         const std::string& keyword) {
  return std::any_of(xs.begin(), xs.end(), [&](const violation& x) {
    return x.pointer == pointer && x.keyword == keyword;
  });
}

/// Reads `<fixture>.expect`: `<pointer> <keyword>` lines, `""` for the root
/// pointer, `#` starts a comment line.
std::vector<std::pair<std::string, std::string>> read_expectations(
  const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> result;
  std::istringstream in{read_file(file)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto space = line.find_last_of(' ');
    if (space == std::string::npos)
      throw std::runtime_error("bad line in " + file.string() + ": " + line);
    auto pointer = line.substr(0, space);
    if (pointer == "\"\"")
      pointer.clear();
    result.emplace_back(pointer, line.substr(space + 1));
  }
  return result;
}

struct fixture {
  std::string schema_name;
  bool valid;
  fs::path path;
};

std::vector<fixture> all_fixtures() {
  std::vector<fixture> result;
  if (!fs::is_directory(fixture_root()))
    return result;
  for (auto& dir : fs::directory_iterator{fixture_root()}) {
    for (bool valid : {true, false}) {
      auto sub = dir.path() / (valid ? "valid" : "invalid");
      if (!fs::is_directory(sub))
        continue;
      for (auto& file : fs::directory_iterator{sub})
        if (file.path().extension() == ".json")
          result.push_back(
            {dir.path().filename().string(), valid, file.path()});
    }
  }
  std::sort(result.begin(), result.end(), [](auto& a, auto& b) {
    return a.path < b.path;
  });
  return result;
}

std::string fixture_test_name(const testing::TestParamInfo<fixture>& info) {
  auto name = info.param.schema_name + "_"
              + (info.param.valid ? "valid" : "invalid") + "_"
              + info.param.path.stem().string();
  for (auto& c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

/// A minimal, valid ingest.v1 document for the hand-written tests.
constexpr const char* ingest_doc = R"({
  "schema_version": "ingest.v1",
  "source": {"channel": "telegram", "provider": "telegram",
             "endpoint_identity": "bot"},
  "event": {"external_event_id": "1", "observed_at": "2025-01-01T00:00:00Z"},
  "sender": {"identity": "user"},
  "payload": {"raw": {}, "normalized_text": "hi"}
})";

std::vector<violation> check(const std::string& schema_text,
                             const std::string& instance_text) {
  auto s = schema::compile("inline", schema_text);
  auto doc = parse_or_throw(instance_text, "instance");
  return s.validate(doc);
}

void expect_load_error(const std::string& schema_text,
                       const std::string& needle) {
  try {
    schema::compile("broken", schema_text);
    ADD_FAILURE() << "no error for " << schema_text;
  } catch (const std::logic_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'broken'"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

} // namespace

// -- embedded schemas --------------------------------------------------------

TEST(schema_registry, every_embedded_schema_compiles) {
  auto names = schema::names();
  for (auto expected :
       {"ingest.v1", "route.v1", "route_response.v1", "notify.v1",
        "connector.heartbeat.v1", "router_plan.v1"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
      << expected;
  for (auto& name : names)
    EXPECT_EQ(schema::get(name).name(), name);
  EXPECT_EQ(&schema::get("ingest.v1"), &schema::get("ingest.v1"))
    << "compiled once";
}

TEST(schema_registry, unknown_name_throws) {
  EXPECT_THROW(schema::get("nope.v1"), std::logic_error);
}

TEST(schema_registry, every_schema_has_fixtures) {
  // At least 2 valid and 4 invalid fixtures, one of them with .expect.
  for (auto& name : schema::names()) {
    SCOPED_TRACE(name);
    size_t valid = 0;
    size_t invalid = 0;
    size_t expectations = 0;
    for (auto& f : all_fixtures()) {
      if (f.schema_name != name)
        continue;
      (f.valid ? valid : invalid) += 1;
      if (fs::exists(f.path.string() + ".expect"))
        ++expectations;
    }
    EXPECT_GE(valid, 2u);
    EXPECT_GE(invalid, 4u);
    EXPECT_GE(expectations, 1u);
  }
}

// -- fixtures ----------------------------------------------------------------

class schema_fixture : public testing::TestWithParam<fixture> {};

TEST_P(schema_fixture, matches_expectation) {
  auto& f = GetParam();
  auto& s = schema::get(f.schema_name);
  auto doc = parse_or_throw(read_file(f.path), f.path.string());
  auto violations = s.validate(doc);
  if (f.valid) {
    EXPECT_TRUE(violations.empty()) << render(violations);
    return;
  }
  EXPECT_FALSE(violations.empty());
  auto expect_file = f.path.string() + ".expect";
  if (!fs::exists(expect_file))
    return;
  for (auto& [pointer, keyword] : read_expectations(expect_file)) {
    EXPECT_TRUE(has(violations, pointer, keyword))
      << "missing '" << pointer << " " << keyword << "' in"
      << render(violations);
  }
}

TEST_P(schema_fixture, rapidjson_agrees) {
  // RapidJSON 1.1's own validator is the reference for valid/invalid; only
  // the number and wording of violations differ. The schemas keep to the
  // regex subset RapidJSON's internal engine understands ([0-9], not \d),
  // so it enforces every pattern as well; our extra rule that a pattern
  // only runs on strings within maxLength changes no verdict, because such
  // strings fail maxLength in both validators anyway.
  auto& f = GetParam();
  auto text = butlers::embedded("schemas/" + f.schema_name + ".json");
  ASSERT_TRUE(text);
  auto schema_doc = parse_or_throw(std::string{*text}, f.schema_name);
  rapidjson::SchemaDocument reference{schema_doc};
  rapidjson::SchemaValidator validator{reference};
  auto doc = parse_or_throw(read_file(f.path), f.path.string());
  EXPECT_EQ(doc.Accept(validator), f.valid);
  auto ours = schema::get(f.schema_name).validate(doc);
  EXPECT_EQ(ours.empty(), f.valid) << render(ours);
}

INSTANTIATE_TEST_SUITE_P(fixtures, schema_fixture,
                         testing::ValuesIn(all_fixtures()), fixture_test_name);

// -- reporting ---------------------------------------------------------------

TEST(schema_validate, reports_every_independent_fault) {
  auto doc = parse_or_throw(ingest_doc, "ingest");
  doc["source"]["channel"].SetString("sms");
  doc["payload"].RemoveMember("normalized_text");
  doc["sender"].AddMember("nickname", "bob", doc.GetAllocator());
  auto violations = schema::get("ingest.v1").validate(doc);
  ASSERT_EQ(violations.size(), 3u) << render(violations);
  EXPECT_TRUE(has(violations, "/source/channel", "enum"));
  EXPECT_TRUE(has(violations, "/payload", "required"));
  EXPECT_TRUE(has(violations, "/sender/nickname", "additionalProperties"));
}

TEST(schema_validate, required_message_names_the_member) {
  auto doc = parse_or_throw(ingest_doc, "ingest");
  doc.RemoveMember("sender");
  auto violations = schema::get("ingest.v1").validate(doc);
  ASSERT_EQ(violations.size(), 1u) << render(violations);
  EXPECT_EQ(violations[0].pointer, "");
  EXPECT_EQ(violations[0].keyword, "required");
  EXPECT_NE(violations[0].message.find("'sender'"), std::string::npos)
    << violations[0].message;
  EXPECT_EQ(butlers::to_string(violations[0]),
            "# required: missing required property 'sender'");
}

TEST(schema_validate, valid_minimal_ingest) {
  auto doc = parse_or_throw(ingest_doc, "ingest");
  EXPECT_TRUE(schema::get("ingest.v1").validate(doc).empty());
}

TEST(schema_validate, huge_strings_never_reach_the_regex) {
  // libstdc++'s std::regex recurses per character; half a megabyte would
  // overflow the stack if a pattern ran on it.
  std::string huge(1 << 19, 'a');
  auto doc = parse_or_throw(ingest_doc, "ingest");
  doc["event"]["observed_at"].SetString(huge, doc.GetAllocator());
  auto violations = schema::get("ingest.v1").validate(doc);
  ASSERT_EQ(violations.size(), 1u) << render(violations);
  EXPECT_EQ(violations[0].keyword, "maxLength");
  // Property names have no maxLength: long ones never match a pattern.
  auto s = schema::compile("pp", R"({"patternProperties": {"^a*$": {}},
                                    "additionalProperties": false})");
  rapidjson::Document obj;
  obj.SetObject();
  rapidjson::Value long_name{huge, obj.GetAllocator()};
  rapidjson::Value one{1};
  obj.AddMember(long_name, one, obj.GetAllocator());
  obj.AddMember("aaa", 1, obj.GetAllocator());
  violations = s.validate(obj);
  ASSERT_EQ(violations.size(), 1u) << render(violations);
  EXPECT_EQ(violations[0].pointer, "/" + huge);
  EXPECT_EQ(violations[0].keyword, "additionalProperties");
}

TEST(schema_validate, is_thread_safe) {
  auto doc = parse_or_throw(ingest_doc, "ingest");
  doc["source"]["channel"].SetString("sms");
  auto& s = schema::get("ingest.v1");
  std::vector<std::thread> threads;
  std::vector<size_t> counts(4);
  for (size_t i = 0; i < counts.size(); ++i)
    threads.emplace_back([&, i] {
      for (int n = 0; n < 200; ++n)
        counts[i] += s.validate(doc).size();
    });
  for (auto& t : threads)
    t.join();
  for (auto count : counts)
    EXPECT_EQ(count, 200u);
}

// -- keywords ----------------------------------------------------------------

TEST(schema_keywords, integer_is_not_any_number) {
  auto s = R"({"type": "integer"})";
  EXPECT_TRUE(check(s, "3").empty());
  EXPECT_TRUE(check(s, "-3").empty());
  EXPECT_TRUE(has(check(s, "3.5"), "", "type"));
  EXPECT_TRUE(has(check(s, "\"3\""), "", "type"));
  EXPECT_TRUE(check(R"({"type": "number"})", "3").empty());
  EXPECT_TRUE(check(R"({"type": ["string", "null"]})", "null").empty());
  EXPECT_TRUE(has(check(R"({"type": ["string", "null"]})", "1"), "", "type"));
}

TEST(schema_keywords, lengths_count_code_points) {
  auto s = R"({"type": "string", "minLength": 2, "maxLength": 3})";
  EXPECT_TRUE(check(s, "\"\u00e9\u00e9\u00e9\"").empty());
  EXPECT_TRUE(has(check(s, "\"\u00e9\u00e9\u00e9\u00e9\""), "", "maxLength"));
  EXPECT_TRUE(has(check(s, "\"\u20ac\""), "", "minLength"));
}

TEST(schema_keywords, pattern_searches_unless_anchored) {
  auto s = R"({"type": "string", "maxLength": 10, "pattern": "b+"})";
  EXPECT_TRUE(check(s, "\"abba\"").empty());
  EXPECT_TRUE(has(check(s, "\"aaa\""), "", "pattern"));
  // Too long: reported as maxLength only, the regex never runs.
  auto v = check(s, "\"aaaaaaaaaaaaaaaa\"");
  ASSERT_EQ(v.size(), 1u) << render(v);
  EXPECT_EQ(v[0].keyword, "maxLength");
}

TEST(schema_keywords, numeric_bounds) {
  auto s = R"({"minimum": 0, "maximum": 10, "exclusiveMaximum": true})";
  EXPECT_TRUE(check(s, "0").empty());
  EXPECT_TRUE(check(s, "9.99").empty());
  EXPECT_TRUE(has(check(s, "-0.5"), "", "minimum"));
  EXPECT_TRUE(has(check(s, "10"), "", "maximum"));
  EXPECT_TRUE(check(s, "\"not a number\"").empty()) << "applies to numbers";
}

TEST(schema_keywords, arrays) {
  auto s = R"({"type": "array", "minItems": 1, "maxItems": 2,
               "items": {"type": "integer"}})";
  EXPECT_TRUE(check(s, "[1, 2]").empty());
  EXPECT_TRUE(has(check(s, "[]"), "", "minItems"));
  EXPECT_TRUE(has(check(s, "[1, 2, 3]"), "", "maxItems"));
  auto v = check(s, R"([1, "x"])");
  ASSERT_EQ(v.size(), 1u) << render(v);
  EXPECT_EQ(v[0].pointer, "/1");
}

TEST(schema_keywords, properties_pattern_and_additional) {
  auto s = R"({"type": "object",
               "properties": {"a/b": {"type": "string"}},
               "patternProperties": {"^x-": {"type": "integer"}},
               "additionalProperties": {"type": "boolean"}})";
  EXPECT_TRUE(check(s, R"({"a/b": "s", "x-1": 1, "other": true})").empty());
  auto v = check(s, R"({"a/b": 1, "x-1": "s", "other~": 1})");
  EXPECT_EQ(v.size(), 3u) << render(v);
  EXPECT_TRUE(has(v, "/a~1b", "type")) << "pointer tokens are escaped";
  EXPECT_TRUE(has(v, "/x-1", "type"));
  EXPECT_TRUE(has(v, "/other~0", "type"));
}

TEST(schema_keywords, combinators) {
  auto any = R"({"anyOf": [{"type": "string"}, {"minimum": 5}]})";
  EXPECT_TRUE(check(any, "\"s\"").empty());
  EXPECT_TRUE(check(any, "7").empty());
  auto v = check(any, "3");
  ASSERT_EQ(v.size(), 1u) << render(v);
  EXPECT_EQ(v[0].keyword, "anyOf");
  EXPECT_NE(v[0].message.find("minimum"), std::string::npos) << v[0].message;

  auto one = R"({"oneOf": [{"type": "integer"}, {"minimum": 5}]})";
  EXPECT_TRUE(check(one, "3").empty());
  EXPECT_TRUE(check(one, "5.5").empty());
  EXPECT_TRUE(has(check(one, "7"), "", "oneOf")) << "matches both";
  EXPECT_TRUE(has(check(one, "1.5"), "", "oneOf")) << "matches neither";

  auto all = R"({"allOf": [{"minimum": 1}, {"maximum": 0}]})";
  EXPECT_EQ(check(all, "0.5").size(), 2u) << "allOf reports every branch";

  EXPECT_TRUE(has(check(R"({"not": {"type": "null"}})", "null"), "", "not"));
  EXPECT_TRUE(check(R"({"not": {"type": "null"}})", "1").empty());
}

TEST(schema_keywords, refs_and_enum) {
  auto s = R"({"definitions": {"c": {"enum": ["a", 1, null, {"k": [1]}]}},
               "properties": {"x": {"$ref": "#/definitions/c"}}})";
  EXPECT_TRUE(check(s, R"({"x": "a"})").empty());
  EXPECT_TRUE(check(s, R"({"x": {"k": [1]}})").empty());
  EXPECT_TRUE(has(check(s, R"({"x": "b"})"), "/x", "enum"));
}

// -- load-time errors ------------------------------------------------------

TEST(schema_compile, unknown_keyword_throws) {
  expect_load_error(R"({"type": "object", "multipleOf": 2})", "multipleOf");
  expect_load_error(R"({"properties": {"a": {"maxlength": 3}}})", "maxlength");
  expect_load_error(R"({"items": [{"type": "string"}]})", "tuple");
}

TEST(schema_compile, rejects_what_it_cannot_enforce) {
  expect_load_error(R"({"$schema": "http://json-schema.org/draft-07/schema#"})",
                    "draft-04");
  expect_load_error(R"({"$ref": "#/definitions/missing", "definitions": {}})",
                    "unresolved");
  expect_load_error(R"({"$ref": "other.json#/x"})", "#/definitions/");
  expect_load_error(R"({"definitions": {"a": {"type": "string"}},
                        "properties": {"x": {"$ref": "#/definitions/a",
                                             "maxLength": 3}}})",
                    "beside $ref");
  expect_load_error(R"({"definitions": {"a": {"allOf": [
                        {"$ref": "#/definitions/a"}]}}})",
                    "cycle");
  expect_load_error(R"({"type": "string", "pattern": "a"})", "maxLength");
  expect_load_error(R"({"type": "string", "maxLength": 9, "pattern": "("})",
                    "invalid regex");
  expect_load_error(R"({"type": "strin"})", "unknown type");
  expect_load_error(R"({"minLength": -1})", "non-negative");
  expect_load_error(R"({"exclusiveMinimum": true})", "needs minimum");
  expect_load_error(R"({"required": []})", "required");
  expect_load_error("{", "not valid JSON");
}

TEST(schema_compile, recursion_through_properties_is_fine) {
  auto s = R"({"definitions": {"tree": {"type": "object",
                 "properties": {"kids": {"type": "array",
                   "items": {"$ref": "#/definitions/tree"}}},
                 "additionalProperties": false}},
               "$ref": "#/definitions/tree"})";
  EXPECT_TRUE(check(s, R"({"kids": [{"kids": []}, {}]})").empty());
  EXPECT_TRUE(has(check(s, R"({"kids": [{"kids": [{"x": 1}]}]})"),
                  "/kids/0/kids/0/x", "additionalProperties"));
}
