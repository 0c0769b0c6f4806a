// Forgetting a person (runtime/forget.md): what an order must say, and the
// catalogue of tables, which must name the same tables as the retention's. The
// erasure itself runs against PostgreSQL in test/integration/forget_pgtest.cpp.

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/forget.hpp"
#include "runtime/retention.hpp"
#include "runtime/scripted.hpp"

namespace butlers {
namespace {

TEST(ForgetOrder, ASenderIsAChannelAndAnIdentitySplitAtTheFirstColon) {
  forget_order o;
  EXPECT_EQ(parse_forget_sender("email:a:b@example.org", o), "");
  EXPECT_EQ(o.channel, "email");
  EXPECT_EQ(o.identity, "a:b@example.org");
  EXPECT_EQ(parse_forget_sender("telegram:123456", o), "");
  EXPECT_EQ(o.channel, "telegram");
  EXPECT_EQ(o.identity, "123456");
}

TEST(ForgetOrder, ABadSenderIsRefusedNamingTheField) {
  forget_order o;
  for (auto bad : {"", "telegram", "telegram:", ":123", "fax:1"})
    EXPECT_EQ(parse_forget_sender(bad, o).rfind("sender:", 0), 0u) << bad;
  EXPECT_NE(parse_forget_sender("fax:1", o).find("unknown channel 'fax'"),
            std::string::npos);
  EXPECT_NE(parse_forget_sender(std::string{"api:a\nb"}, o), "");
  EXPECT_NE(parse_forget_sender("api:" + std::string(257, 'x'), o), "");
}

TEST(ForgetOrder, TheBodyNeedsSenderWhoAndWhyAndNothingElse) {
  forget_order o;
  EXPECT_EQ(parse_forget_body(
              R"({"sender":"api:bob","who":"op","why":"asked","batch":7})", o),
            "");
  EXPECT_EQ(o.identity, "bob");
  EXPECT_EQ(o.who, "op");
  EXPECT_EQ(o.why, "asked");
  EXPECT_EQ(o.batch, 7);
  auto refusal = [](const char* body) {
    forget_order x;
    return parse_forget_body(body, x);
  };
  EXPECT_EQ(refusal(R"({"who":"op","why":"w"})").rfind("sender: required", 0),
            0u);
  EXPECT_EQ(refusal(R"({"sender":"api:b","why":"w"})").rfind("who:", 0), 0u);
  EXPECT_EQ(refusal(R"({"sender":"api:b","who":"op"})").rfind("why:", 0), 0u);
  EXPECT_EQ(refusal(R"({"sender":1,"who":"op","why":"w"})"),
            "sender: must be a string");
  EXPECT_EQ(refusal(R"({"sender":"api:b","who":"op","why":"w","y":1})"),
            "unknown field 'y'");
  EXPECT_EQ(refusal(R"({"sender":"api:b","who":"op","why":"w","batch":0})")
              .rfind("batch:", 0),
            0u);
  EXPECT_NE(refusal("nope"), "");
}

TEST(ForgetOrder, TheAuditKeepsAHashOfTheSenderNotTheSender) {
  forget_order o;
  parse_forget_sender("telegram:123456", o);
  auto h = forget_sender_hash(o);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find("123456"), std::string::npos);
  forget_report r;
  r.audit_id = 3;
  r.counts["message_inbox"] = 2;
  r.total = 2;
  auto js = forget_report_json(r, h);
  EXPECT_EQ(js.find("123456"), std::string::npos);
  EXPECT_NE(js.find(R"("counts":{"message_inbox":2})"), std::string::npos)
    << js;
}

TEST(ForgetCatalogue, NamesEachStatementOnceAndErasesTheInboxAfterItsChildren) {
  std::set<std::string> queries;
  size_t inbox = 0, work = 0, transcript = 0, threads = 0, i = 0;
  for (auto& s : forget_catalogue()) {
    EXPECT_TRUE(queries.insert(s.query).second) << s.query;
    EXPECT_EQ(std::string{s.query}.rfind("forget_", 0), 0u);
    std::string t = s.table;
    if (t == "message_inbox")
      inbox = i;
    if (t == "route_work")
      work = i;
    if (t == "thread_transcript")
      transcript = i;
    if (t == "threads")
      threads = i;
    ++i;
  }
  EXPECT_LT(work, inbox);
  EXPECT_LT(transcript, threads);
}

// The retention's catalogue (runtime/retention.cpp) is the list of every
// table that holds people's text or metadata, checked against the schema
// by test/integration/retention_pgtest.cpp; forgetting one person must
// erase from exactly those tables, so a table added to one list and not
// the other fails here.
TEST(ForgetCatalogue, ErasesFromEveryTableOfTheRetentionCatalogueAndNoOther) {
  std::set<std::string> people;
  for (auto& t : people_tables())
    people.insert(t.table);
  std::set<std::string> erased;
  for (auto& s : forget_catalogue())
    erased.insert(s.table);
  std::set<std::string> only_retention, only_forget;
  for (auto& t : people)
    if (!erased.count(t))
      only_retention.insert(t);
  for (auto& t : erased)
    if (!people.count(t))
      only_forget.insert(t);
  auto join = [](const std::set<std::string>& xs) {
    std::string out;
    for (auto& x : xs)
      out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  EXPECT_TRUE(only_retention.empty())
    << "in people_tables() but never erased by forget_catalogue(): "
    << join(only_retention);
  EXPECT_TRUE(only_forget.empty())
    << "erased by forget_catalogue() but not in people_tables(): "
    << join(only_forget);
  for (auto& [table, why] : system_tables())
    EXPECT_FALSE(erased.count(table)) << table << ": " << why;
}

TEST(ScriptedToolCalls, PromptIsEscapedIntoTheCallsJson) {
  EXPECT_EQ(render_tool_call(R"({"a":"{prompt}","b":"{prompt}!"})",
                             "say \"hi\"\n"),
            R"({"a":"say \"hi\"\n","b":"say \"hi\"\n!"})");
  EXPECT_EQ(render_tool_call(R"({"a":"{other}"})", "x"), R"({"a":"{other}"})");
}

} // namespace
} // namespace butlers
