// Tool approvals as plain functions (runtime/approvals.hpp) and the codex
// conversation's side of them (runtime/codex_app_server.hpp): policy and
// globs, summaries, who may answer, the POST body, the Telegram bodies and
// callback data, and an approval request handed out and answered.

#include <gtest/gtest.h>

#include "runtime/approvals.hpp"
#include "runtime/codex_app_server.hpp"
#include "runtime/json.hpp"

namespace butlers {
namespace {

TEST(ApprovalPolicy, DenyPatternsWinOverAllowPatternsOverTheMode) {
  approval_policy p;
  p.mode = approval_mode::ask;
  p.allow = {"shell*"};
  p.deny = {"shell_rm"};
  EXPECT_EQ(p.decide("shell"), approval_mode::allow);
  EXPECT_EQ(p.decide("shell_rm"), approval_mode::deny);
  EXPECT_EQ(p.decide("apply_patch"), approval_mode::ask);
  EXPECT_TRUE(p.active());
  approval_policy off;
  EXPECT_EQ(off.decide("shell"), approval_mode::deny);
  EXPECT_FALSE(off.active());
}

TEST(ApprovalPolicy, GlobsMatchWholeNames) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*c", "abbbc"));
  EXPECT_TRUE(glob_match("*patch", "apply_patch"));
  EXPECT_FALSE(glob_match("shell", "shell2"));
  EXPECT_FALSE(glob_match("a*c", "abcd"));
}

TEST(ApprovalSummary, IsCutAtACodePointWithControlCharactersAsSpaces) {
  EXPECT_EQ(approval_summary("rm\n-rf"), "rm -rf");
  EXPECT_EQ(approval_summary("h\xc3\xa9llo", 2), "h\xc3\xa9\xe2\x80\xa6");
  EXPECT_EQ(approval_summary(std::string(500, 'x')).size(), 200u + 3u);
}

TEST(ApprovalCaller, OnlyTheStarterMayAnswer) {
  EXPECT_TRUE(approval_caller_matches("telegram", "42", "telegram:42"));
  EXPECT_TRUE(approval_caller_matches("api", "api", "api"));
  EXPECT_FALSE(approval_caller_matches("telegram", "42", "telegram:43"));
  EXPECT_FALSE(approval_caller_matches("telegram", "42", "slack:42"));
  EXPECT_FALSE(approval_caller_matches("telegram", "", ""));
  EXPECT_EQ(api_caller_identity(""), "api");
}

TEST(ApprovalPost, TheBodyNamesTheBadField) {
  std::string why;
  auto ok = parse_approval_post(R"({"decision":"approve","sender":"u1"})", why);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->approve);
  EXPECT_EQ(ok->sender, "u1");
  EXPECT_EQ(parse_approval_post(R"({"decision":"deny"})", why)->sender, "api");
  EXPECT_FALSE(parse_approval_post(R"({"decision":"maybe"})", why));
  EXPECT_EQ(why.rfind("decision:", 0), 0u);
  EXPECT_FALSE(parse_approval_post(R"({"decision":"deny","sender":7})", why));
  EXPECT_EQ(why.rfind("sender:", 0), 0u);
  EXPECT_FALSE(parse_approval_post("[]", why));
}

TEST(ApprovalTelegram, TheQuestionCarriesButtonsAndAPressIsRead) {
  std::string id = "01890f2e-7b3c-7def-8123-456789abcdef";
  auto body = approval_question_body("42", "ok?", id);
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(body, doc));
  EXPECT_EQ(doc["chat_id"].GetInt64(), 42);
  auto& row = doc["reply_markup"]["inline_keyboard"][0];
  EXPECT_STREQ(row[0]["callback_data"].GetString(),
               ("ap:" + id + ":y").c_str());
  EXPECT_STREQ(row[1]["callback_data"].GetString(),
               ("ap:" + id + ":n").c_str());
  auto press = parse_approval_callback(
    R"({"update_id":1,"callback_query":{"id":"cb7","from":{"id":42},)"
    R"("data":"ap:)"
    + id + R"(:n"}})");
  ASSERT_TRUE(press);
  EXPECT_EQ(press->callback_id, "cb7");
  EXPECT_EQ(press->approval_id, id);
  EXPECT_EQ(press->from, "42");
  EXPECT_FALSE(press->approve);
  EXPECT_FALSE(parse_approval_callback(
    R"({"callback_query":{"id":"c","from":{"id":1},"data":"other"}})"));
  EXPECT_FALSE(parse_approval_callback(R"({"message":{}})"));
}

TEST(CodexApprovals, ARequestIsHandedOutAndTheAnswerWritten) {
  codex_conversation conv{"hi", "0.1.0", true};
  codex_step s;
  conv.start(s);
  conv.on_line(R"({"id":1,"result":{}})", s);
  ASSERT_NE(s.writes.back().find(R"("approvalPolicy":"on-request")"),
            std::string::npos);
  codex_step asked;
  conv.on_line(R"({"method":"item/commandExecution/requestApproval","id":7,)"
               R"("params":{"command":"rm -rf build","cwd":"/w"}})",
               asked);
  EXPECT_TRUE(asked.writes.empty()) << "not declined";
  ASSERT_EQ(asked.approvals.size(), 1u);
  EXPECT_EQ(asked.approvals[0].tool, "shell");
  EXPECT_EQ(asked.approvals[0].summary, "rm -rf build (in /w)");
  codex_step answered;
  conv.answer_approval(asked.approvals[0].key, false, answered);
  ASSERT_EQ(answered.writes.size(), 1u);
  EXPECT_EQ(answered.writes[0], R"({"id":7,"result":{"decision":"decline"}})");
  codex_step again;
  conv.answer_approval(asked.approvals[0].key, true, again);
  EXPECT_TRUE(again.writes.empty()) << "answered once";
  codex_step legacy;
  conv.on_line(R"({"method":"applyPatchApproval","id":"x",)"
               R"("params":{"fileChanges":{"a.txt":{}}}})",
               legacy);
  ASSERT_EQ(legacy.approvals.size(), 1u);
  EXPECT_EQ(legacy.approvals[0].tool, "apply_patch");
  EXPECT_EQ(legacy.approvals[0].summary, "a.txt");
  codex_step yes;
  conv.answer_approval(legacy.approvals[0].key, true, yes);
  EXPECT_EQ(yes.writes[0], R"({"id":"x","result":{"decision":"approved"}})");
}

TEST(CodexApprovals, WithoutApprovalsRequestsAreDeclinedAtOnce) {
  codex_conversation conv{"hi", "0.1.0"};
  codex_step s;
  conv.on_line(R"({"method":"item/fileChange/requestApproval","id":3,)"
               R"("params":{}})",
               s);
  EXPECT_TRUE(s.approvals.empty());
  ASSERT_EQ(s.writes.size(), 1u);
  EXPECT_NE(s.writes[0].find("decline"), std::string::npos);
}

TEST(ApprovalMail, TheFirstNonEmptyLineDecidesWhateverIsQuotedBelow) {
  EXPECT_EQ(mail_approval_decision("approve"), true);
  EXPECT_EQ(mail_approval_decision("\r\n  \n\tApprove \r\n\n> Approve?\n"),
            true);
  EXPECT_EQ(mail_approval_decision("DENY\nOn Sunday, Butlers wrote:\n> x"),
            false);
  EXPECT_EQ(mail_approval_decision("Deny\n-- \nAlice"), false);
  // Anything else on that line is an ordinary message.
  EXPECT_EQ(mail_approval_decision("approved"), std::nullopt);
  EXPECT_EQ(mail_approval_decision("approve it"), std::nullopt);
  EXPECT_EQ(mail_approval_decision("> approve\napprove"), std::nullopt);
  EXPECT_EQ(mail_approval_decision("What would this delete?\napprove"),
            std::nullopt);
  EXPECT_EQ(mail_approval_decision(""), std::nullopt);
  EXPECT_EQ(mail_approval_decision(" \n\n"), std::nullopt);
}

TEST(ApprovalMail, TheQuestionSaysHowToAnswer) {
  auto text = approval_mail_text("health", "shell", "rm -rf build", 60);
  EXPECT_NE(text.find("health asks to use shell: rm -rf build"),
            std::string::npos);
  EXPECT_NE(text.find(R"(reply to this mail with "approve" or "deny" on the )"
                      "first line"),
            std::string::npos)
    << text;
  EXPECT_EQ(approval_mail_notice("q1@example.net"), "email:q1@example.net");
}

} // namespace
} // namespace butlers
