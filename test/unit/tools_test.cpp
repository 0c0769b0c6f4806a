// The tool layer without I/O: tokens, the catalogue and its argument
// checks, notify's target rules, reminder times, derived ids, and the MCP
// messages and sessions (runtime/tools.hpp, runtime/mcp.hpp).

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "runtime/mcp.hpp"
#include "runtime/schema.hpp"
#include "runtime/tools.hpp"
#include "runtime/uuid.hpp"

using namespace butlers;

namespace {

tool_scope asker() {
  tool_scope s;
  s.butler = "health";
  s.work_id = "0193c0de-0000-7000-8000-000000000001";
  s.request_id = "0193c0de-0000-7000-8000-000000000002";
  s.received_at = "2026-11-28T20:00:00Z";
  s.channel = "telegram";
  s.endpoint = "my_bot";
  s.sender = "4242";
  s.recipients = {"telegram:777", "email:ops@example.org"};
  return s;
}

rapidjson::Document args_of(const std::string& text) {
  rapidjson::Document d;
  EXPECT_FALSE(json::parse(text, d));
  return d;
}

} // namespace

TEST(ToolTokens, AMintedTokenFindsItsScopeUntilRevoked) {
  tool_tokens tokens;
  auto t = tokens.mint(asker());
  ASSERT_EQ(t.size(), 3u + 64u);
  EXPECT_EQ(t.rfind("bt_", 0), 0u);
  auto g = tokens.find(t);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->scope.butler, "health");
  tokens.revoke(t);
  EXPECT_FALSE(tokens.find(t));
  EXPECT_FALSE(tokens.find(""));
  EXPECT_FALSE(tokens.find("bt_" + std::string(64, '0')));
}

TEST(ToolTokens, TokensAreDistinctAcrossThreads) {
  tool_tokens tokens;
  std::vector<std::vector<std::string>> minted(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < 250; ++j)
        minted[i].push_back(tokens.mint(asker()));
    });
  for (auto& th : threads)
    th.join();
  std::set<std::string> all;
  for (auto& v : minted)
    all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(tokens.size(), 1000u);
}

TEST(ToolCatalogue, EverySchemaCompilesAndEveryToolIsFound) {
  ASSERT_EQ(tool_catalogue().size(), 11u);
  for (auto& t : tool_catalogue()) {
    EXPECT_NO_THROW(schema::compile(t.name, t.input_schema)) << t.name;
    EXPECT_NO_THROW(schema::compile(t.name, t.output_schema)) << t.name;
    EXPECT_EQ(find_tool(t.name), &t);
  }
  EXPECT_EQ(find_tool("nope"), nullptr);
}

TEST(ToolCatalogue, BadArgumentsAreNamed) {
  auto* put = find_tool("state_put");
  rapidjson::Document d;
  EXPECT_EQ(check_arguments(*put, R"({"key":"a","value":1})", d), "");
  auto missing = check_arguments(*put, R"({"key":"a"})", d);
  EXPECT_NE(missing.find("value"), std::string::npos) << missing;
  auto extra = check_arguments(*put, R"({"key":"a","value":1,"x":2})", d);
  EXPECT_NE(extra.find("additionalProperties"), std::string::npos) << extra;
  auto type = check_arguments(*put, R"({"key":7,"value":1})", d);
  EXPECT_NE(type.find("/key"), std::string::npos) << type;
  EXPECT_NE(check_arguments(*put, "{", d).find("not JSON"), std::string::npos);
  EXPECT_NE(check_arguments(*put, "[1]", d).find("object"), std::string::npos);
}

TEST(NotifyTarget, TheAskerIsTheDefaultAndGetsAReply) {
  auto t = std::get<notify_target>(
    decide_notify_target(asker(), args_of(R"({"message":"hi"})")));
  EXPECT_EQ(t.channel, "telegram");
  EXPECT_EQ(t.recipient, "4242");
  EXPECT_EQ(t.intent, "reply");
}

TEST(NotifyTarget, AnAllowedRecipientGetsASend) {
  auto t = std::get<notify_target>(
    decide_notify_target(asker(),
                         args_of(R"({"message":"hi","channel":"email",)"
                                 R"("recipient":"ops@example.org"})")));
  EXPECT_EQ(t.channel, "email");
  EXPECT_EQ(t.intent, "send");
}

TEST(NotifyTarget, ARecipientOffTheAllowlistIsRefusedWithWhoMayBeReached) {
  auto r = decide_notify_target(asker(),
                                args_of(
                                  R"({"message":"hi","recipient":"999"})"));
  auto* refused = std::get_if<tool_result>(&r);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, tool_status::tool_error);
  EXPECT_EQ(refused->reason, "recipient_refused");
  EXPECT_NE(refused->text.find("telegram:999"), std::string::npos);
  EXPECT_NE(refused->text.find("telegram:777"), std::string::npos);
}

TEST(NotifyTarget, AReactionTakesNoAddress) {
  auto ok = decide_notify_target(asker(), args_of(R"({"intent":"react",)"
                                                  R"("reaction":"parsed"})"));
  EXPECT_EQ(std::get<notify_target>(ok).intent, "react");
  auto bad = decide_notify_target(asker(), args_of(R"({"intent":"react",)"
                                                   R"("recipient":"777"})"));
  EXPECT_TRUE(std::holds_alternative<tool_result>(bad));
}

TEST(NotifyTarget, TheNotifyIsValidAndKeyedByWorkAndSequence) {
  auto s = asker();
  auto args = args_of(R"({"message":"take your pill"})");
  auto t = std::get<notify_target>(decide_notify_target(s, args));
  auto doc = make_tool_notify(s, t, args, 3);
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(doc, d));
  EXPECT_TRUE(schema::get("notify.v1").validate(d).empty()) << doc;
  EXPECT_EQ(std::string{d["idempotency_key"].GetString()}, s.work_id + ":3");
  EXPECT_EQ(std::string{d["delivery"]["message"].GetString()},
            "take your pill");
}

TEST(StateScope, SenderScopeIsThePersonsOwnNamespace) {
  EXPECT_EQ(state_scope(asker(), ""), "");
  EXPECT_EQ(state_scope(asker(), "butler"), "");
  EXPECT_EQ(state_scope(asker(), "sender"), "sender:telegram:4242");
}

TEST(DerivedUuid, SameKeySameIdShapedAsVersion7) {
  auto a = derived_uuid("w:remind:0", 1764360000000);
  auto b = derived_uuid("w:remind:0", 1764360000000);
  auto c = derived_uuid("w:remind:1", 1764360000000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto u = uuid::parse(a);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->version(), 7);
  EXPECT_EQ(u->unix_ms(), 1764360000000u);
}

TEST(RemindDue, AfterOrAtButNotBoth) {
  tool_limits lim;
  int64_t now = 1764360000000; // 2025-11-28T20:00:00Z
  EXPECT_EQ(std::get<int64_t>(
              remind_due(args_of(R"({"after_s":2})"), now, lim)),
            now + 2000);
  EXPECT_EQ(std::get<int64_t>(
              remind_due(args_of(R"({"at":"2025-11-28T21:00:00+01:00"})"), now,
                         lim)),
            now);
  EXPECT_EQ(std::get<int64_t>(
              remind_due(args_of(R"({"at":"2025-11-28T21:00:00.5Z"})"), now,
                         lim)),
            now + 3600 * 1000 + 500);
  EXPECT_TRUE(std::holds_alternative<std::string>(
    remind_due(args_of(R"({"at":"tomorrow"})"), now, lim)));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    remind_due(args_of(R"({"at":"2025-11-28T21:00:00Z","after_s":1})"), now,
               lim)));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    remind_due(args_of(R"({})"), now, lim)));
  EXPECT_TRUE(std::holds_alternative<std::string>(
    remind_due(args_of(R"({"after_s":99999999999})"), now, lim)));
}

TEST(Mcp, VersionsAreNegotiatedToOneServed) {
  EXPECT_EQ(mcp::negotiate("2025-06-18"), "2025-06-18");
  EXPECT_EQ(mcp::negotiate("2025-11-25"), "2025-11-25");
  EXPECT_EQ(mcp::negotiate("2024-11-05"), "2025-11-25");
  EXPECT_FALSE(mcp::supported("1.0"));
}

TEST(Mcp, ResultsAndErrorsAreJsonRpc) {
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(mcp::result_message("7", "{}"), d));
  EXPECT_EQ(d["id"].GetInt(), 7);
  ASSERT_FALSE(
    json::parse(mcp::error_message("\"a\"", mcp::method_not_found, "x"), d));
  EXPECT_EQ(d["error"]["code"].GetInt(), -32601);
  ASSERT_FALSE(json::parse(mcp::initialize_result("2025-06-18"), d));
  EXPECT_EQ(std::string{d["protocolVersion"].GetString()}, "2025-06-18");
  EXPECT_TRUE(d["capabilities"]["tools"].IsObject());
  ASSERT_FALSE(json::parse(mcp::tools_list_result(), d));
  EXPECT_EQ(d["tools"].Size(), 11u);
  ASSERT_FALSE(
    json::parse(mcp::progress_notification("\"p\"", 1, 1, "done"), d));
  EXPECT_EQ(std::string{d["method"].GetString()}, "notifications/progress");
}

TEST(Mcp, AnErrorResultCarriesItsTextAndNoStructuredContent) {
  rapidjson::Document d;
  ASSERT_FALSE(
    json::parse(mcp::call_tool_result(tool_failed("conflict", "at 4")), d));
  EXPECT_TRUE(d["isError"].GetBool());
  EXPECT_FALSE(d.HasMember("structuredContent"));
  EXPECT_EQ(std::string{d["content"][0]["text"].GetString()}, "at 4");
  ASSERT_FALSE(json::parse(mcp::call_tool_result(tool_ok(R"({"v":1})")), d));
  EXPECT_FALSE(d["isError"].GetBool());
  EXPECT_EQ(d["structuredContent"]["v"].GetInt(), 1);
}

TEST(McpSessions, ASessionBelongsToItsTokenAndEnds) {
  tool_tokens tokens;
  auto t = tokens.mint(asker());
  mcp::sessions sessions{2};
  auto a = sessions.open(t, "2025-06-18", tokens);
  ASSERT_FALSE(a.empty());
  auto found = sessions.find(a);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->token, t);
  EXPECT_TRUE(sessions.close(a));
  EXPECT_FALSE(sessions.find(a));
  EXPECT_FALSE(sessions.close(a));
}

TEST(McpSessions, WhenFullSessionsOfEndedTokensMakeRoom) {
  tool_tokens tokens;
  auto t1 = tokens.mint(asker());
  auto t2 = tokens.mint(asker());
  mcp::sessions sessions{2};
  EXPECT_FALSE(sessions.open(t1, "2025-06-18", tokens).empty());
  EXPECT_FALSE(sessions.open(t2, "2025-06-18", tokens).empty());
  EXPECT_TRUE(sessions.open(t2, "2025-06-18", tokens).empty());
  tokens.revoke(t1);
  EXPECT_FALSE(sessions.open(t2, "2025-06-18", tokens).empty());
  EXPECT_EQ(sessions.size(), 2u);
}
