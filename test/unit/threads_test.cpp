// The pure logic of the thread API: thread ids, turn bodies, SSE frames.

#include <gtest/gtest.h>

#include "runtime/threads.hpp"

namespace butlers {
namespace {

TEST(ThreadId, AllowsTheDocumentedCharactersOnly) {
  EXPECT_TRUE(valid_thread_id("chat-9"));
  EXPECT_TRUE(valid_thread_id("telegram:bot.1_x"));
  EXPECT_TRUE(valid_thread_id(std::string(128, 'a')));
  EXPECT_FALSE(valid_thread_id(""));
  EXPECT_FALSE(valid_thread_id(std::string(129, 'a')));
  EXPECT_FALSE(valid_thread_id("a b"));
  EXPECT_FALSE(valid_thread_id("a/b"));
  EXPECT_FALSE(valid_thread_id("a%20b"));
}

TEST(TurnBody, ReadsEveryFieldAndDefaultsTheMode) {
  thread_turn t;
  EXPECT_EQ(parse_turn_body(R"({"message_id":"m1","text":"hi"})", t), "");
  EXPECT_EQ(t.message_id, "m1");
  EXPECT_EQ(t.text, "hi");
  EXPECT_EQ(t.mode, "steer");
  thread_turn u;
  EXPECT_EQ(parse_turn_body(R"({"message_id":"m1","text":"hi","mode":)"
                            R"("interrupt","expected_run_id":"r","butler":)"
                            R"("health"})",
                            u),
            "");
  EXPECT_EQ(u.mode, "interrupt");
  EXPECT_EQ(u.expected_run_id, "r");
  EXPECT_EQ(u.butler, "health");
}

TEST(TurnBody, NamesTheFieldThatIsWrong) {
  auto err = [](const char* body) {
    thread_turn t;
    return parse_turn_body(body, t);
  };
  EXPECT_NE(err(R"({"text":"hi"})").find("'message_id'"), std::string::npos);
  EXPECT_NE(err(R"({"message_id":"m"})").find("'text'"), std::string::npos);
  EXPECT_NE(err(R"({"message_id":"m","text":""})").find("'text'"),
            std::string::npos);
  EXPECT_NE(err(R"({"message_id":"m","text":"x","mode":"soon"})")
              .find("'mode'"),
            std::string::npos);
  EXPECT_NE(err(R"({"message_id":1,"text":"x"})").find("'message_id'"),
            std::string::npos);
  EXPECT_NE(err(R"({"message_id":"m","text":"x","extra":true})")
              .find("'extra'"),
            std::string::npos);
  EXPECT_NE(err("[1]").find("object"), std::string::npos);
  EXPECT_NE(err("{").find("JSON"), std::string::npos);
}

TEST(TurnBody, ReadsTheRunsModelMaxStepsAndSender) {
  thread_turn t;
  EXPECT_EQ(parse_turn_body(R"({"message_id":"m1","text":"hi","model":)"
                            R"("claude-3-5-haiku@2024","sender":"web:ab12",)"
                            R"("options":{"max_steps":7,"mode":"queue"}})",
                            t),
            "");
  EXPECT_EQ(t.model, "claude-3-5-haiku@2024");
  EXPECT_EQ(t.max_steps, 7u);
  EXPECT_EQ(t.sender, "web:ab12");
  EXPECT_EQ(t.mode, "queue") << "options.mode is the spec's place for it";
  thread_turn u;
  EXPECT_EQ(parse_turn_body(R"({"message_id":"m1","text":"hi"})", u), "");
  EXPECT_EQ(u.model, "");
  EXPECT_EQ(u.max_steps, 0u);
  EXPECT_EQ(u.sender, "");
}

TEST(TurnBody, RefusesABadModelOrMaxStepsNamingTheField) {
  auto err = [](const std::string& extra) {
    thread_turn t;
    return parse_turn_body(R"({"message_id":"m","text":"x",)" + extra + "}", t);
  };
  auto names = [&](const std::string& extra, const std::string& field) {
    auto e = err(extra);
    EXPECT_NE(e.find("'" + field + "'"), std::string::npos) << extra << e;
  };
  names(R"("model":"two words")", "model");
  names(R"("model":7)", "model");
  names(R"("model":")" + std::string(129, 'm') + R"(")", "model");
  names(R"("options":{"max_steps":0})", "options.max_steps");
  names(R"("options":{"max_steps":1001})", "options.max_steps");
  names(R"("options":{"max_steps":2.5})", "options.max_steps");
  names(R"("options":{"max_steps":"3"})", "options.max_steps");
  names(R"("options":{"temperature":1})", "options.temperature");
  names(R"("options":[1])", "options");
  names(R"("mode":"steer","options":{"mode":"queue"})", "options.mode");
  names(R"("sender":")" + std::string(129, 's') + R"(")", "sender");
  EXPECT_EQ(err(R"("options":{"max_steps":1000})"), "");
  EXPECT_EQ(err(R"("model":"")"), "") << "empty: the butler's model";
}

TEST(SseFrame, OneEventPerFrame) {
  EXPECT_EQ(sse_frame("run", R"({"a":1})"), "event: run\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(sse_frame("transcript", "{}", "7"),
            "id: 7\nevent: transcript\ndata: {}\n\n");
}

} // namespace
} // namespace butlers
