// The fake Telegram Bot API (test/support/fake_telegram.hpp) answers like
// Telegram, over real HTTP on loopback: the shapes other tests rely on.

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/http_client.hpp"
#include "test/support/telegram_updates.hpp"

using namespace butlers;
using namespace butlers::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document doc;
  auto err = json::parse(text, doc);
  EXPECT_FALSE(err) << text;
  return doc;
}

class fake_telegram_test : public ::testing::Test {
 protected:
  explicit fake_telegram_test(fake_telegram_options opts = {})
    : tg(std::move(opts)), client("127.0.0.1", tg.port(), 10s) {
    // nop
  }

  std::string path(const std::string& method) const {
    return "/bot" + tg.token() + "/" + method;
  }

  http_response call(const std::string& method, const std::string& body) {
    return client.post(path(method), body);
  }

  fake_telegram tg;
  http_client client;
};

class strict_fake_telegram_test : public fake_telegram_test {
 protected:
  static fake_telegram_options strict() {
    fake_telegram_options o;
    o.strict = true;
    return o;
  }
  strict_fake_telegram_test() : fake_telegram_test(strict()) {
    // nop
  }
};

// -- envelope, token, methods
// ----------------------------------------------------

TEST_F(fake_telegram_test, get_me_answers_the_bot_user_in_the_ok_envelope) {
  auto r = client.get(path("getMe"));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  auto doc = parse(r.body);
  EXPECT_TRUE(doc["ok"].GetBool());
  EXPECT_EQ(doc["result"]["id"].GetInt64(), 123456789);
  EXPECT_TRUE(doc["result"]["is_bot"].GetBool());
  EXPECT_STREQ(doc["result"]["username"].GetString(), "butlers_test_bot");
  EXPECT_EQ(tg.count("getMe"), 1u);
}

TEST_F(fake_telegram_test, a_wrong_token_is_401_unauthorized_and_recorded) {
  auto r = client.post("/bot999:wrong/sendMessage",
                       R"({"chat_id":1,"text":"hi"})");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body,
            R"({"ok":false,"error_code":401,"description":"Unauthorized"})");
  auto calls = tg.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].token_ok);
  EXPECT_TRUE(tg.messages_to(1).empty());
}

TEST_F(fake_telegram_test, an_unknown_method_or_path_is_404_not_found) {
  auto r = call("sendTelepathy", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body,
            R"({"ok":false,"error_code":404,"description":"Not Found"})");
  EXPECT_EQ(client.get("/favicon.ico").status, 404);
}

TEST_F(fake_telegram_test, method_names_are_case_insensitive_like_telegrams) {
  EXPECT_EQ(client.get(path("getme")).status, 200);
  EXPECT_EQ(client.get(path("GETME")).status, 200);
  EXPECT_EQ(tg.count("getMe"), 2u);
}

// -- getUpdates
// ---------------------------------------------------------------------

TEST_F(fake_telegram_test,
       get_updates_returns_queued_updates_until_an_offset_confirms_them) {
  auto first = tg.push_update(telegram::message_update({}));
  auto second = tg.push_update(telegram::fixture("edited_message"));
  EXPECT_EQ(first, 100000);
  EXPECT_EQ(second, 10003); // the fixture's own update_id is kept
  auto r = call("getUpdates", "{}");
  ASSERT_EQ(r.status, 200) << r.error;
  auto doc = parse(r.body);
  ASSERT_EQ(doc["result"].Size(), 2u);
  // Ordered by update_id, whatever the push order.
  EXPECT_EQ(doc["result"][0]["update_id"].GetInt64(), second);
  EXPECT_EQ(doc["result"][1]["update_id"].GetInt64(), first);
  // Not confirmed yet: asked again, they come again.
  EXPECT_EQ(parse(call("getUpdates", "{}").body)["result"].Size(), 2u);
  // offset = last + 1 confirms both; they never come back.
  auto confirm = R"({"offset":)" + std::to_string(first + 1) + "}";
  EXPECT_EQ(parse(call("getUpdates", confirm).body)["result"].Size(), 0u);
  EXPECT_EQ(tg.pending_updates(), 0u);
  EXPECT_EQ(tg.confirmed_offset(), first + 1);
  EXPECT_EQ(parse(call("getUpdates", "{}").body)["result"].Size(), 0u);
  // An update below the confirmed offset is never delivered.
  tg.push_update(
    R"({"update_id":5,"message":{"message_id":1,"chat":{"id":1,"type":"private"},"date":1,"text":"late"}})");
  EXPECT_EQ(tg.pending_updates(), 0u);
}

TEST_F(fake_telegram_test,
       get_updates_with_an_offset_confirms_only_what_is_below_it) {
  auto a = tg.push_update(telegram::message_update({}));
  auto b = tg.push_update(telegram::message_update({}));
  auto r = call("getUpdates", R"({"offset":)" + std::to_string(b) + "}");
  auto doc = parse(r.body);
  ASSERT_EQ(doc["result"].Size(), 1u);
  EXPECT_EQ(doc["result"][0]["update_id"].GetInt64(), b);
  EXPECT_EQ(b, a + 1);
}

TEST_F(fake_telegram_test,
       a_long_poll_is_answered_as_soon_as_an_update_is_queued) {
  auto started = steady::now();
  auto poll = std::async(std::launch::async, [this] {
    return call("getUpdates", R"({"timeout":20})");
  });
  ASSERT_TRUE(tg.wait_for_calls_arrived("getUpdates", 1, 5s));
  auto id = tg.push_update(telegram::message_update({}));
  auto r = poll.get();
  EXPECT_LT(steady::now() - started, 10s);
  ASSERT_EQ(r.status, 200) << r.error;
  auto doc = parse(r.body);
  ASSERT_EQ(doc["result"].Size(), 1u);
  EXPECT_EQ(doc["result"][0]["update_id"].GetInt64(), id);
  EXPECT_STREQ(doc["result"][0]["message"]["text"].GetString(), "/start");
}

TEST_F(fake_telegram_test,
       a_long_poll_without_updates_ends_empty_after_its_timeout) {
  auto started = steady::now();
  auto r = call("getUpdates", R"({"timeout":1})");
  auto took = steady::now() - started;
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(parse(r.body)["result"].Size(), 0u);
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 5s);
}

TEST_F(fake_telegram_test, limit_and_allowed_updates_select_what_is_returned) {
  tg.push_update(telegram::callback_query_update());
  auto m1 = tg.push_update(telegram::message_update({}));
  tg.push_update(telegram::message_update({}));
  auto r = call("getUpdates", R"({"limit":1,"allowed_updates":["message"]})");
  auto doc = parse(r.body);
  ASSERT_EQ(doc["result"].Size(), 1u);
  EXPECT_EQ(doc["result"][0]["update_id"].GetInt64(), m1);
  // allowed_updates sticks for later calls that do not give it.
  doc = parse(call("getUpdates", "{}").body);
  ASSERT_EQ(doc["result"].Size(), 2u);
  EXPECT_TRUE(doc["result"][0].HasMember("message"));
}

TEST_F(fake_telegram_test, a_second_poller_ends_the_first_with_409_conflict) {
  auto first = std::async(std::launch::async, [this] {
    return call("getUpdates", R"({"timeout":20})");
  });
  ASSERT_TRUE(tg.wait_for_calls_arrived("getUpdates", 1, 5s));
  auto second = std::async(std::launch::async, [this] {
    return call("getUpdates", R"({"timeout":1})");
  });
  auto r = first.get();
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.body.find("terminated by other getUpdates request"),
            std::string::npos);
  EXPECT_EQ(second.get().status, 200);
}

TEST_F(fake_telegram_test, get_updates_is_409_while_a_webhook_is_set) {
  ASSERT_EQ(call("setWebhook",
                 R"({"url":"https://example.org/hook","secret_token":"s"})")
              .status,
            200);
  EXPECT_EQ(tg.webhook_url(), "https://example.org/hook");
  EXPECT_EQ(tg.webhook_secret(), "s");
  EXPECT_EQ(call("getUpdates", "{}").status, 409);
  EXPECT_EQ(call("deleteWebhook", "{}").status, 200);
  EXPECT_EQ(call("getUpdates", "{}").status, 200);
}

// -- sendMessage
// ----------------------------------------------------------------------

TEST_F(fake_telegram_test,
       send_message_returns_a_message_replying_to_a_known_one) {
  tg.push_update(telegram::fixture("message_text")); // chat 1111111, id 1365
  auto r = call(
    "sendMessage",
    R"({"chat_id":1111111,"text":"Good morning","reply_parameters":{"message_id":1365},"parse_mode":"HTML"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = parse(r.body);
  auto& msg = doc["result"];
  EXPECT_GT(msg["message_id"].GetInt64(), 1365);
  EXPECT_EQ(msg["chat"]["id"].GetInt64(), 1111111);
  EXPECT_STREQ(msg["chat"]["type"].GetString(), "private");
  EXPECT_TRUE(msg["from"]["is_bot"].GetBool());
  EXPECT_GT(msg["date"].GetInt64(), 1600000000);
  EXPECT_STREQ(msg["text"].GetString(), "Good morning");
  EXPECT_EQ(msg["reply_to_message"]["message_id"].GetInt64(), 1365);
  auto sent = tg.messages_to(1111111);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].text, "Good morning");
  EXPECT_EQ(sent[0].reply_to_message_id, 1365);
  EXPECT_EQ(sent[0].parse_mode, "HTML");
  EXPECT_EQ(sent[0].message_id, msg["message_id"].GetInt64());
  auto c = tg.calls("sendMessage").at(0);
  EXPECT_EQ(c.int_param("chat_id"), 1111111);
  EXPECT_EQ(c.string_param("text"), "Good morning");
  EXPECT_TRUE(c.answered);
  EXPECT_EQ(c.status, 200);
}

TEST_F(
  fake_telegram_test,
  send_message_takes_form_bodies_query_strings_and_the_legacy_reply_field) {
  auto r = client
             .post(path("sendMessage"),
                   "chat_id=42&text=caf%C3%A9+au+lait&reply_to_message_id=7",
                   "application/x-www-form-urlencoded");
  ASSERT_EQ(r.status, 200) << r.body;
  r = client.get(path("sendMessage") + "?chat_id=42&text=second"
                 + "&reply_parameters=%7B%22message_id%22%3A8%7D");
  ASSERT_EQ(r.status, 200) << r.body;
  auto sent = tg.messages_to(42);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].text, "caf\xc3\xa9 au lait");
  EXPECT_EQ(sent[0].reply_to_message_id, 7);
  EXPECT_EQ(sent[1].reply_to_message_id, 8);
  EXPECT_EQ(sent[1].message_id, sent[0].message_id + 1);
  // The users' messages and the bot's share one sequence per chat.
  EXPECT_EQ(tg.next_message_id(42), sent[1].message_id + 1);
  telegram::message_spec m;
  m.chat_id = 42;
  m.message_id = 100;
  tg.push_update(telegram::message_update(m));
  EXPECT_EQ(tg.next_message_id(42), 101);
}

TEST_F(fake_telegram_test, text_over_4096_code_points_is_too_long) {
  std::string eyes = "\xf0\x9f\x91\x80"; // 4 bytes, 1 code point, 2 UTF-16
  std::string at_limit;
  for (size_t i = 0; i < telegram_max_text; ++i)
    at_limit += eyes;
  auto body = [](const std::string& text) {
    return R"({"chat_id":5,"text":)" + json::quote(text) + "}";
  };
  EXPECT_EQ(call("sendMessage", body(at_limit)).status, 200);
  auto r = call("sendMessage", body(at_limit + "x"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(
    r.body,
    R"({"ok":false,"error_code":400,"description":"Bad Request: message is too long"})");
  EXPECT_EQ(call("sendMessage", body("  \n")).status, 400);
  EXPECT_EQ(tg.messages_to(5).size(), 1u);
}

TEST_F(fake_telegram_test, a_missing_or_non_numeric_chat_id_is_400) {
  auto r = call("sendMessage", R"({"text":"to whom?"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("chat_id is empty"), std::string::npos);
  r = call("sendMessage", R"({"chat_id":"@somechannel","text":"hi"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("chat not found"), std::string::npos);
  // A numeric string is a chat id, as Telegram takes it.
  EXPECT_EQ(call("sendMessage", R"({"chat_id":"-100123","text":"hi"})").status,
            200);
  EXPECT_EQ(tg.messages_to(-100123).size(), 1u);
}

TEST_F(fake_telegram_test, a_blocked_chat_is_403_forbidden) {
  tg.block_chat(77);
  auto r = call("sendMessage", R"({"chat_id":77,"text":"hello?"})");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(
    r.body,
    R"({"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"})");
  tg.block_chat(77, false);
  EXPECT_EQ(call("sendMessage", R"({"chat_id":77,"text":"hello?"})").status,
            200);
}

TEST_F(strict_fake_telegram_test, an_unknown_chat_is_400_chat_not_found) {
  auto r = call("sendMessage", R"({"chat_id":31337,"text":"anyone?"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(
    r.body,
    R"({"ok":false,"error_code":400,"description":"Bad Request: chat not found"})");
  tg.remember_update(telegram::fixture("message_group"));
  EXPECT_EQ(call("sendMessage", R"({"chat_id":-1001234567890,"text":"hi all"})")
              .status,
            200);
  r = call(
    "sendMessage",
    R"({"chat_id":-1001234567890,"text":"x","reply_parameters":{"message_id":9999}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("message to be replied not found"), std::string::npos);
  EXPECT_EQ(tg.pending_updates(), 0u); // remembered, not queued
}

// -- setMessageReaction
// ----------------------------------------------------------

TEST_F(fake_telegram_test,
       reactions_are_recorded_in_order_and_cleared_by_an_empty_list) {
  auto set = [this](const std::string& reaction) {
    return call("setMessageReaction",
                R"({"chat_id":1111111,"message_id":1365,"reaction":)" + reaction
                  + "}");
  };
  auto r = set(R"([{"type":"emoji","emoji":"👀"}])");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"ok":true,"result":true})");
  EXPECT_EQ(set(R"([{"type":"emoji","emoji":"👍"}])").status, 200);
  EXPECT_EQ(set("[]").status, 200);
  EXPECT_EQ(tg.reactions_of(1111111, 1365),
            (std::vector<std::string>{"👀", "👍", ""}));
}

TEST_F(fake_telegram_test,
       an_emoji_outside_telegrams_list_is_reaction_invalid) {
  auto set = [this](const std::string& reaction) {
    return call("setMessageReaction",
                R"({"chat_id":1,"message_id":2,"reaction":)" + reaction + "}");
  };
  auto r = set(R"([{"type":"emoji","emoji":"🚀"}])");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(
    r.body,
    R"({"ok":false,"error_code":400,"description":"Bad Request: REACTION_INVALID"})");
  // The heart with a variation selector is not the listed "❤".
  EXPECT_EQ(set(R"([{"type":"emoji","emoji":"❤️"}])").status, 400);
  EXPECT_EQ(set(R"([{"type":"emoji","emoji":"❤"}])").status, 200);
  auto two = set(
    R"([{"type":"emoji","emoji":"👀"},{"type":"emoji","emoji":"👍"}])");
  EXPECT_EQ(two.status, 400);
  EXPECT_NE(two.body.find("REACTIONS_TOO_MANY"), std::string::npos);
  EXPECT_EQ(tg.reactions_of(1, 2), (std::vector<std::string>{"❤"}));
}

// -- injected faults
// ---------------------------------------------------------------

TEST_F(fake_telegram_test,
       an_injected_429_carries_retry_after_then_calls_succeed) {
  tg.inject("sendMessage", telegram_fault::too_many_requests(3), 2);
  auto body = R"({"chat_id":9,"text":"hi"})";
  for (int i = 0; i < 2; ++i) {
    auto r = call("sendMessage", body);
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(
      r.body,
      R"({"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}})");
  }
  EXPECT_EQ(tg.pending_faults(), 0u);
  EXPECT_EQ(call("sendMessage", body).status, 200);
  EXPECT_EQ(tg.messages_to(9).size(), 1u); // the failed calls sent nothing
  EXPECT_EQ(tg.count("sendMessage"), 3u);
}

TEST_F(fake_telegram_test, injected_5xx_answer_like_telegrams_front_end) {
  tg.inject("*", telegram_fault::server_error(500));
  tg.inject("getMe", telegram_fault::server_error(502));
  auto r = client.get(path("getMe")); // the method's own fault goes first
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.headers["content-type"], "text/html");
  EXPECT_NE(r.body.find("502 Bad Gateway"), std::string::npos);
  r = client.get(path("getMe"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(
    r.body,
    R"({"ok":false,"error_code":500,"description":"Internal Server Error"})");
  EXPECT_EQ(client.get(path("getMe")).status, 200);
}

TEST_F(fake_telegram_test,
       a_stall_outlasts_the_clients_timeout_and_runs_nothing) {
  tg.inject("sendMessage", telegram_fault::stall(3s));
  http_client impatient{"127.0.0.1", tg.port(), 300ms};
  auto started = steady::now();
  auto r = impatient.post(path("sendMessage"), R"({"chat_id":3,"text":"x"})");
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(steady::now() - started, 2s);
  EXPECT_TRUE(tg.messages_to(3).empty());
  auto c = tg.calls("sendMessage").at(0);
  EXPECT_FALSE(c.answered);
}

TEST_F(fake_telegram_test, a_lost_reply_sends_the_message_but_answers_nothing) {
  tg.inject("sendMessage", telegram_fault::lost_reply(200ms));
  auto r = call("sendMessage", R"({"chat_id":4,"text":"did it arrive?"})");
  EXPECT_EQ(r.status, 0);
  ASSERT_EQ(tg.messages_to(4).size(), 1u);
  auto c = tg.calls("sendMessage").at(0);
  EXPECT_FALSE(c.answered);
  EXPECT_EQ(c.status, 200); // what it would have answered
}

TEST_F(fake_telegram_test, injected_400_and_403_are_answered_as_given) {
  tg.inject("setMessageReaction", telegram_fault::bad_request(
                                    "Bad Request: message to react not found"));
  tg.inject("sendMessage", telegram_fault::forbidden());
  auto r = call("setMessageReaction",
                R"({"chat_id":1,"message_id":1,"reaction":[]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("message to react not found"), std::string::npos);
  r = call("sendMessage", R"({"chat_id":1,"text":"x"})");
  EXPECT_EQ(r.status, 403);
}

// -- HTTP details
// ----------------------------------------------------------------

TEST_F(fake_telegram_test,
       keep_alive_serves_several_requests_on_one_connection) {
  auto get = "GET " + path("getMe") + " HTTP/1.1\r\nHost: x\r\n\r\n";
  auto last = "GET " + path("getMe")
              + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  auto r = client.raw(get + get + last);
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(tg.count("getMe"), 3u);
}

TEST_F(fake_telegram_test, expect_100_continue_is_answered_before_the_body) {
  std::string body = R"({"chat_id":6,"text":"long enough"})";
  auto r = client.raw("POST " + path("sendMessage")
                      + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                        "Content-Type: application/json\r\n"
                        "Expect: 100-continue\r\nContent-Length: "
                      + std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(r.status, 100);
  EXPECT_NE(r.body.find("HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_EQ(tg.messages_to(6).size(), 1u);
}

TEST(fake_telegram_lifetime, destroying_the_fake_ends_a_held_long_poll) {
  auto tg = std::make_unique<fake_telegram>();
  http_client client{"127.0.0.1", tg->port(), 20s};
  auto target = "/bot" + tg->token() + "/getUpdates";
  auto poll = std::async(std::launch::async, [&] {
    return client.post(target, R"({"timeout":30})");
  });
  ASSERT_TRUE(tg->wait_for_calls_arrived("getUpdates", 1, 5s));
  auto started = steady::now();
  tg.reset();
  auto r = poll.get();
  EXPECT_LT(steady::now() - started, 5s);
  EXPECT_TRUE(r.status == 200 || r.status == 0) << r.status;
}

// -- fixtures
// -------------------------------------------------------------------

TEST(telegram_fixtures, every_fixture_is_json_with_the_kind_its_name_says) {
  struct expect {
    const char* name;
    const char* kind;
  };
  for (auto [name, kind] :
       {expect{"message_text", "message"}, expect{"message_group", "message"},
        expect{"message_reply", "message"},
        expect{"message_document", "message"},
        expect{"edited_message", "edited_message"},
        expect{"channel_post", "channel_post"},
        expect{"callback_query", "callback_query"},
        expect{"my_chat_member", "my_chat_member"},
        expect{"malformed_no_update_id", "message"},
        expect{"malformed_message_without_chat", "message"},
        expect{"malformed_text_not_string", "message"}}) {
    auto doc = parse(telegram::fixture(name));
    ASSERT_TRUE(doc.IsObject()) << name;
    EXPECT_TRUE(doc.HasMember(kind)) << name;
    EXPECT_EQ(doc.HasMember("update_id"),
              std::string_view{name} != "malformed_no_update_id")
      << name;
  }
  EXPECT_FALSE(
    parse(telegram::fixture("malformed_message_without_chat"))["message"]
      .HasMember("chat"));
  EXPECT_FALSE(
    parse(telegram::fixture("malformed_text_not_string"))["message"]["text"]
      .IsString());
  EXPECT_THROW(telegram::fixture("no_such_fixture"), std::runtime_error);
}

TEST(telegram_fixtures, builders_make_the_documented_shapes) {
  telegram::message_spec m;
  m.chat_id = -1001234567890;
  m.chat_type = "supergroup";
  m.text = "hello \"group\"";
  m.reply_to_message_id = 40;
  auto doc = parse(telegram::message_update(m, 7));
  EXPECT_EQ(doc["update_id"].GetInt64(), 7);
  auto& msg = doc["message"];
  EXPECT_STREQ(msg["chat"]["type"].GetString(), "supergroup");
  EXPECT_STREQ(msg["chat"]["title"].GetString(), "Test Group");
  EXPECT_STREQ(msg["from"]["username"].GetString(), "Testusername");
  EXPECT_STREQ(msg["text"].GetString(), "hello \"group\"");
  EXPECT_EQ(msg["reply_to_message"]["message_id"].GetInt64(), 40);
  doc = parse(telegram::edited_message_update({}));
  EXPECT_FALSE(doc.HasMember("update_id"));
  EXPECT_EQ(doc["edited_message"]["edit_date"].GetInt64(), 1441645592);
  doc = parse(telegram::channel_post_update({}));
  EXPECT_FALSE(doc["channel_post"].HasMember("from"));
  EXPECT_STREQ(doc["channel_post"]["sender_chat"]["type"].GetString(),
               "channel");
  doc = parse(telegram::callback_query_update());
  EXPECT_TRUE(doc["callback_query"].HasMember("data"));
  doc = parse(telegram::my_chat_member_update());
  EXPECT_STREQ(doc["my_chat_member"]["new_chat_member"]["status"].GetString(),
               "kicked");
}

} // namespace
