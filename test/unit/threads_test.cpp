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

TEST(SseFrame, OneEventPerFrame) {
  EXPECT_EQ(sse_frame("run", R"({"a":1})"), "event: run\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(sse_frame("transcript", "{}", "7"),
            "id: 7\nevent: transcript\ndata: {}\n\n");
}

} // namespace
} // namespace butlers
