// Telegram manners, end to end: a real node and PostgreSQL, requests posted
// to POST /v1/ingest as the Telegram connector submits them, and the fake
// Bot API over loopback HTTP. The reaction a person sees never goes
// backwards — 👀 then 👍 (or 👾) for every request of a fast, no-op butler,
// nothing after the terminal state — and the chat shows "typing"
// (sendChatAction) while a slow session runs, and not after it ended.

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
namespace tgu = telegram;

const std::string eyes = "\xf0\x9f\x91\x80";
const std::string thumbs_up = "\xf0\x9f\x91\x8d";
const std::string invader = "\xf0\x9f\x91\xbe";

double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return 0;
  return std::stod(text.substr(pos + series.size() + 2));
}

class TelegramManners : public node_fixture {
 protected:
  fake_telegram tg;
  int64_t next_message = 100;
  int64_t next_update = 9000;

  /// A `health` butler (keyword "pill") with `runtime` and `health`
  /// settings, replying through a telegram adapter with `adapter` settings.
  std::string config(const std::string& runtime, const std::string& health,
                     const std::string& adapter = "") {
    return node_head("telegram-manners", 5)
           + "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n" + health
           + "[butler.runtime]\n" + runtime
           + "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
             "endpoint_identity = \"butlers_test_bot\"\nenabled = false\n"
             "api_base = \""
           + tg.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
             "connector = \"bot\"\n"
           + adapter;
  }

  void start(const std::string& cfg) {
    use_database("telegram_manners");
    ASSERT_TRUE(start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  }

  /// Posts a Telegram message with `text` in `chat` to /v1/ingest as the
  /// connector would; returns its message_id.
  int64_t send(int64_t chat, const std::string& text) {
    tgu::message_spec m;
    m.message_id = next_message++;
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    auto update_id = next_update++;
    auto update = tgu::message_update(m, update_id);
    auto body = R"({"schema_version":"ingest.v1","source":{"channel":)"
                R"("telegram","provider":"telegram","endpoint_identity":)"
                R"("butlers_test_bot"},"event":{"external_event_id":")"
                + std::to_string(update_id) + R"(","external_thread_id":")"
                + std::to_string(chat)
                + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
                  R"("sender":{"identity":")"
                + std::to_string(chat) + R"("},"payload":{"raw":)" + update
                + R"(,"normalized_text":)" + json::quote(text) + "}}";
    auto r = http_->post("/v1/ingest", body);
    EXPECT_EQ(r.status, 202) << r.body;
    return m.message_id;
  }

  bool ends_with(int64_t chat, int64_t message, const std::string& emoji,
                 std::chrono::milliseconds timeout = 60s) {
    return eventually(
      [&] {
        auto seen = tg.reactions_of(chat, message);
        return !seen.empty() && seen.back() == emoji;
      },
      timeout);
  }

  /// Sends `rounds` rounds of `per_round` requests at once (a chat each),
  /// waits for each round's terminal reaction `last`, and expects every
  /// message's reactions to be exactly 👀 then `last`.
  void expect_every_request_shows(int rounds, int per_round,
                                  const std::string& last) {
    int64_t chat = 7000001;
    int shown = 0;
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::pair<int64_t, int64_t>> sent;
      for (int i = 0; i < per_round; ++i, ++chat)
        sent.emplace_back(chat,
                          send(chat, "a pill, round " + std::to_string(round)));
      for (auto& [c, msg] : sent) {
        ASSERT_TRUE(ends_with(c, msg, last)) << node_->log();
        auto seen = tg.reactions_of(c, msg);
        EXPECT_EQ(seen, (std::vector<std::string>{eyes, last}))
          << "chat " << c << ", round " << round;
        shown += seen == std::vector<std::string>{eyes, last};
      }
    }
    EXPECT_EQ(shown, rounds * per_round);
  }
};

TEST_F(TelegramManners, EveryFastRequestShowsEyesThenThumbsUpNeverBackwards) {
  // A no-op butler: no turn time, no reply, so the terminal 👍 is handed
  // over right behind the 👀.
  start(
    config("turn_ms = 0\nreply = \"\"\n", "max_concurrent_sessions = 16\n"));
  expect_every_request_shows(10, 10, thumbs_up);
  // Nothing more arrives for any of them: after each 👍 the node still
  // answers a new request, whose own reactions come after the others'.
  auto probe_chat = int64_t{7999999};
  auto probe = send(probe_chat, "one more pill");
  ASSERT_TRUE(ends_with(probe_chat, probe, thumbs_up)) << node_->log();
  for (auto& c : tg.calls("setMessageReaction"))
    EXPECT_EQ(c.status, 200) << c.params_json;
  EXPECT_EQ(tg.count("setMessageReaction"), 202u)
    << "two reactions per request, none sent and then corrected";
}

TEST_F(TelegramManners, EveryFailingRequestShowsEyesThenTheErrorState) {
  start(config("turn_ms = 0\nfail_rate = 1.0\n"
               "fail_class = \"validation_error\"\n",
               "max_concurrent_sessions = 16\n"));
  expect_every_request_shows(10, 10, invader);
}

TEST_F(TelegramManners, TheChatShowsTypingWhileASlowSessionRunsAndNotAfter) {
  start(config("turn_ms = 3000\nreply = \"noted\"\n", "",
               "typing_interval_ms = 500\n"));
  int64_t chat = 5550001;
  auto msg = send(chat, "my pill at nine");
  ASSERT_TRUE(ends_with(chat, msg, thumbs_up)) << node_->log();
  auto actions = [&](int64_t c) {
    std::vector<telegram_call> out;
    for (auto& call : tg.calls("sendChatAction"))
      if (call.int_param("chat_id") == c)
        out.push_back(call);
    return out;
  };
  auto typing = actions(chat);
  // One at 👀, then one every 500 ms of a 3 s session.
  ASSERT_GE(typing.size(), 3u) << node_->log();
  for (auto& call : typing) {
    EXPECT_EQ(call.string_param("action").value_or(""), "typing");
    EXPECT_EQ(call.status, 200) << call.response;
  }
  // The end stops it: a second request (another chat, as slow) runs to its
  // end, and meanwhile the first chat got at most the action that was on
  // its way when its 👍 was set.
  std::chrono::steady_clock::time_point done_at;
  for (auto& call : tg.calls("setMessageReaction"))
    if (call.int_param("chat_id") == chat)
      done_at = call.at;
  int64_t other = 5550002;
  auto second = send(other, "my pill at ten");
  ASSERT_TRUE(ends_with(other, second, thumbs_up)) << node_->log();
  EXPECT_GE(actions(other).size(), 3u);
  auto all = actions(chat);
  auto after = std::count_if(all.begin(), all.end(), [&](auto& c) {
    return c.at > done_at;
  });
  EXPECT_LE(after, 1) << "typing went on after the request ended";
  EXPECT_GE(metric(http_->get("/metrics").body,
                   "butlers_messenger_chat_actions_total{outcome=\"sent\"}"),
            6);
}

} // namespace
} // namespace butlers::test
