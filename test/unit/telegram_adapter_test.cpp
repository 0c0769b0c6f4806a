// The messenger's telegram adapter against the fake Telegram Bot API over
// real HTTP on loopback, with an in-memory fake of its delivery services
// (source messages, outbound ledger): where replies and reactions go, how
// long texts are split, what a re-run sends again, how 429s, 5xx, lost
// answers and refusals end, and that concurrent reactions end on the latest
// state.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/lifecycle.hpp"
#include "runtime/reaction_gate.hpp"
#include "runtime/route.hpp"
#include "runtime/telegram_adapter.hpp"
#include "runtime/typing_ticker.hpp"
#include "runtime/uuid.hpp"
#include "test/support/fake_delivery_services.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/poll.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
namespace tgu = test::telegram;

const std::string eyes = "\xf0\x9f\x91\x80";
const std::string thumbs_up = "\xf0\x9f\x91\x8d";
const std::string invader = "\xf0\x9f\x91\xbe";
const std::string sleeping = "\xf0\x9f\x98\xb4";

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

/// An ingest.v1 body as the connector stores it, with `update` as
/// payload.raw.
std::string ingest_with(const std::string& update) {
  return R"({"schema_version":"ingest.v1","source":{"channel":"telegram",)"
         R"("provider":"telegram","endpoint_identity":"bot"},"event":{)"
         R"("external_event_id":"1","observed_at":"2026-01-01T00:00:00Z"},)"
         R"("sender":{"identity":"7"},"payload":{"raw":)"
         + update + R"(,"normalized_text":"hi"}})";
}

/// A delivery as the messenger runs it: the notify, read, and its lineage.
struct delivery {
  std::string notify;
  notify_view view;
  std::string request_id;
  std::string segment_id;
};

struct TelegramAdapter : ::testing::Test {
  test::fake_telegram tg;
  test::fake_delivery_services services;
  int64_t chat = 4242;
  int64_t message = 77;

  /// The adapter (retries and timeout as given), pointed at the fake.
  telegram_adapter adapter(uint32_t retries = 3, uint32_t timeout_ms = 3000,
                           reaction_config reactions = {}) {
    delivery_adapter_config cfg;
    cfg.kind = adapter_kind::telegram;
    cfg.channels = {"telegram"};
    cfg.retries = retries;
    cfg.timeout_ms = timeout_ms;
    cfg.reactions = std::move(reactions);
    telegram_timing t;
    t.backoff_base = 10ms;
    t.backoff_cap = 50ms;
    t.max_retry_after = 5s;
    return telegram_adapter{cfg, {tg.base_url(), tg.token()}, t};
  }

  /// A request from Telegram whose source message the services know.
  route_envelope request() {
    route_envelope env;
    env.request_id = make_uuid_v7().to_string();
    env.received_at = "2026-11-23T04:00:00Z";
    env.source_channel = "telegram";
    env.source_endpoint_identity = "butlers_test_bot";
    env.source_sender_identity = "7";
    tgu::message_spec m;
    m.message_id = message;
    m.chat_id = chat;
    services.set_source(env.request_id, ingest_with(tgu::message_update(m, 1)));
    return env;
  }

  static delivery of(std::string notify, const std::string& request_id) {
    delivery d;
    d.notify = std::move(notify);
    d.view = *read_notify(d.notify);
    d.request_id = request_id;
    std::string route;
    route_envelope env;
    EXPECT_FALSE(make_delivery_route(d.notify, make_uuid_v7().to_string(), 0,
                                     route, &env));
    d.segment_id = env.segment_id;
    return d;
  }

  static delivery reply(const route_envelope& env, const std::string& text) {
    return of(make_notify_json(env, "health", text, "work-1"), env.request_id);
  }

  static delivery react(const route_envelope& env, lifecycle_state x,
                        int64_t at_us) {
    return of(make_react_notify(env, x, at_us), env.request_id);
  }

  delivery_attempt run(const telegram_adapter& ad, const delivery& d) {
    return ad.deliver(
      {d.view, d.notify, d.request_id, d.segment_id, services, nullptr});
  }

  outbound_key key(const delivery& d, const std::string& part) {
    return {d.request_id, d.segment_id, part};
  }
};

// -- replies -----------------------------------------------------------------

TEST_F(TelegramAdapter, AReplyGoesToTheSourceChatReplyingToTheSourceMessage) {
  auto ad = adapter();
  auto d = reply(request(), "Your pills are at 9.");
  auto a = run(ad, d);
  ASSERT_EQ(a.error, "");
  auto sent = tg.messages_to(chat);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].text, "Your pills are at 9.");
  ASSERT_TRUE(sent[0].reply_to_message_id);
  EXPECT_EQ(*sent[0].reply_to_message_id, message);
  auto row = services.find(key(d, "chunk:0"));
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, ledger_state::sent);
  EXPECT_EQ(row->provider_id, std::to_string(sent[0].message_id));
}

TEST_F(TelegramAdapter, ALongReplyIsSentInChunksEachUnderItsOwnKey) {
  auto ad = adapter();
  auto text = repeat("0123456789", 900); // 9000 characters
  auto d = reply(request(), text);
  ASSERT_EQ(run(ad, d).error, "");
  auto sent = tg.messages_to(chat);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].text + sent[1].text + sent[2].text, text);
  for (size_t i = 0; i < 3; ++i) {
    auto row = services.find(key(d, "chunk:" + std::to_string(i)));
    ASSERT_TRUE(row) << i;
    EXPECT_EQ(row->state, ledger_state::sent);
    EXPECT_EQ(row->provider_id, std::to_string(sent[i].message_id));
  }
}

TEST_F(TelegramAdapter, AReRunSkipsWhatWasSentAndResendsWhatWasInFlight) {
  auto ad = adapter();
  auto text = repeat("0123456789", 900);
  auto d = reply(request(), text);
  // The earlier run sent chunk 0 and died after sending chunk 1, before
  // recording it.
  test::fake_delivery_services::row sent0;
  sent0.state = ledger_state::sent;
  sent0.provider_id = "11";
  services.preload(key(d, "chunk:0"), sent0);
  test::fake_delivery_services::row sending1;
  sending1.state = ledger_state::sending;
  services.preload(key(d, "chunk:1"), sending1);
  ASSERT_EQ(run(ad, d).error, "");
  auto sent = tg.messages_to(chat);
  ASSERT_EQ(sent.size(), 2u) << "chunk 0 is not sent again";
  EXPECT_EQ(sent[0].text, text.substr(4096, 4096));
  EXPECT_EQ(services.redelivered(), 1u) << "chunk 1: the counted window";
  EXPECT_EQ(services.find(key(d, "chunk:0"))->provider_id, "11");
  // And a third run sends nothing at all.
  ASSERT_EQ(run(ad, d).error, "");
  EXPECT_EQ(tg.messages_to(chat).size(), 2u);
}

TEST_F(TelegramAdapter, ASendGoesToItsRecipientAsChatId) {
  auto ad = adapter();
  auto notify = std::string{
    R"({"schema_version":"notify.v1","origin_butler":"health",)"
    R"("delivery":{"intent":"send","channel":"telegram","recipient":"555",)"
    R"("message":"Time for your pills."},"idempotency_key":"rem-1"})"};
  auto d = of(notify, make_uuid_v7().to_string());
  ASSERT_EQ(run(ad, d).error, "");
  auto sent = tg.messages_to(555);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].reply_to_message_id);
}

TEST_F(TelegramAdapter, WithoutASourceMessageAReplyGoesToTheSender) {
  auto ad = adapter();
  auto env = request();
  services.set_source(env.request_id, R"({"payload":{"raw":{}}})");
  ASSERT_EQ(run(ad, reply(env, "hi")).error, "");
  auto sent = tg.messages_to(7);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].reply_to_message_id);
}

TEST_F(TelegramAdapter, NothingIsSentWhileTheDatabaseIsAway) {
  auto ad = adapter();
  auto d = reply(request(), "hi");
  services.set_unavailable(true);
  auto a = run(ad, d);
  EXPECT_NE(a.error, "");
  EXPECT_TRUE(a.retryable);
  EXPECT_EQ(tg.count("sendMessage"), 0u);
}

// -- failures ----------------------------------------------------------------

TEST_F(TelegramAdapter, TooManyRequestsWaitsTheRetryAfterTelegramAsksFor) {
  auto ad = adapter();
  tg.inject("sendMessage", test::telegram_fault::too_many_requests(1));
  auto d = reply(request(), "hi");
  ASSERT_EQ(run(ad, d).error, "");
  auto calls = tg.calls("sendMessage");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_GE(calls[1].at - calls[0].at, 1s);
  EXPECT_EQ(tg.messages_to(chat).size(), 1u);
  EXPECT_EQ(services.redelivered(), 0u) << "a 429 sent nothing";
}

TEST_F(TelegramAdapter, ServerErrorsAreRetriedAndFailForGoodAfterTheRetries) {
  auto ad = adapter(2);
  tg.inject("sendMessage", test::telegram_fault::server_error(500), 2);
  ASSERT_EQ(run(ad, reply(request(), "hi")).error, "");
  EXPECT_EQ(tg.count("sendMessage"), 3u);
  EXPECT_EQ(tg.messages_to(chat).size(), 1u);
  // Three more 500s than two retries allow: dead, as target_unavailable.
  tg.inject("sendMessage", test::telegram_fault::server_error(500), 3);
  auto d = reply(request(), "again");
  auto a = run(ad, d);
  EXPECT_EQ(a.error_class, "target_unavailable");
  EXPECT_EQ(services.find(key(d, "chunk:0"))->state, ledger_state::dead);
  ASSERT_EQ(services.dead_letters().size(), 1u);
  EXPECT_EQ(services.dead_letters()[0].segment_id, d.segment_id);
}

TEST_F(TelegramAdapter, ABadRequestIsADeadLetterAtOnce) {
  auto ad = adapter();
  tg.inject("sendMessage",
            test::telegram_fault::bad_request("Bad Request: chat not found"));
  auto d = reply(request(), "hi");
  auto a = run(ad, d);
  EXPECT_EQ(a.error_class, "validation_error");
  EXPECT_FALSE(a.retryable);
  EXPECT_NE(a.error.find("chat not found"), std::string::npos) << a.error;
  EXPECT_EQ(tg.count("sendMessage"), 1u) << "not retried";
  ASSERT_EQ(services.dead_letters().size(), 1u);
  EXPECT_EQ(services.dead_letters()[0].error_class, "validation_error");
  EXPECT_EQ(services.dead_letters()[0].request_id, d.request_id);
}

TEST_F(TelegramAdapter, ABlockedBotIsTargetUnavailableForGood) {
  auto ad = adapter();
  tg.block_chat(chat);
  auto a = run(ad, reply(request(), "hi"));
  EXPECT_EQ(a.error_class, "target_unavailable");
  EXPECT_EQ(tg.count("sendMessage"), 1u);
}

TEST_F(TelegramAdapter, ALostAnswerIsRetriedAndItsDuplicateCounted) {
  // Telegram sends the message but the answer never comes: the adapter
  // cannot know, sends again, and counts the possible duplicate.
  auto ad = adapter(3, 400);
  tg.inject("sendMessage", test::telegram_fault::lost_reply(2s));
  auto d = reply(request(), "hi");
  ASSERT_EQ(run(ad, d).error, "");
  EXPECT_EQ(tg.messages_to(chat).size(), 2u);
  EXPECT_EQ(services.redelivered(), 1u);
  EXPECT_EQ(services.find(key(d, "chunk:0"))->state, ledger_state::sent);
}

// -- reactions ---------------------------------------------------------------

TEST_F(TelegramAdapter, AReactionIsSetOnTheSourceMessage) {
  reaction_config custom;
  custom.progress = "\xf0\x9f\xa4\x94"; // 🤔
  auto ad = adapter(3, 3000, custom);
  auto env = request();
  ASSERT_EQ(run(ad, react(env, lifecycle_state::progress, 100)).error, "");
  ASSERT_EQ(run(ad, react(env, lifecycle_state::parsed, 200)).error, "");
  EXPECT_EQ(tg.reactions_of(chat, message),
            (std::vector<std::string>{"\xf0\x9f\xa4\x94", thumbs_up}));
  EXPECT_EQ(tg.count("sendMessage"), 0u);
}

TEST_F(TelegramAdapter, AStateOutrankedBeforeItGoesOutIsNeverSet) {
  auto ad = adapter();
  auto env = request();
  ASSERT_EQ(run(ad, react(env, lifecycle_state::errored, 300)).error, "");
  // Later in time, but not terminal: the terminal state stays.
  auto late = react(env, lifecycle_state::queued, 400);
  ASSERT_EQ(run(ad, late).error, "");
  EXPECT_EQ(tg.reactions_of(chat, message), std::vector<std::string>{invader});
  EXPECT_EQ(services.find(key(late, "reaction"))->state, ledger_state::skipped);
}

TEST_F(TelegramAdapter, ALaterStateIsSetAgainAfterAnEarlierOneThatOvertookIt) {
  auto ad = adapter();
  auto env = request();
  auto progress = react(env, lifecycle_state::progress, 100);
  auto parsed = react(env, lifecycle_state::parsed, 200);
  // While progress is recorded and on its way, parsed is recorded and set.
  std::atomic<bool> once{false};
  services.on_begin([&](const outbound_send& s) {
    if (s.value == eyes && !once.exchange(true)) {
      EXPECT_EQ(run(ad, parsed).error, "");
    }
  });
  ASSERT_EQ(run(ad, progress).error, "");
  EXPECT_EQ(tg.reactions_of(chat, message),
            (std::vector<std::string>{thumbs_up, eyes, thumbs_up}))
    << "the terminal state is set again after the late progress";
}

TEST_F(TelegramAdapter, ConcurrentSignalsEndOnTheTerminalState) {
  auto ad = adapter();
  for (int round = 0; round < 8; ++round) {
    ++message;
    auto env = request();
    std::vector<delivery> ds{react(env, lifecycle_state::progress, 100),
                             react(env, lifecycle_state::queued, 200),
                             react(env, lifecycle_state::progress, 300),
                             react(env, lifecycle_state::errored, 400)};
    std::vector<std::thread> threads;
    for (auto& d : ds)
      threads.emplace_back([&, d] {
        EXPECT_EQ(run(ad, d).error, "");
      });
    for (auto& t : threads)
      t.join();
    auto seen = tg.reactions_of(chat, message);
    ASSERT_FALSE(seen.empty()) << round;
    EXPECT_EQ(seen.back(), invader) << "round " << round;
  }
}

TEST_F(TelegramAdapter, AReRunOfASetReactionSendsNothing) {
  auto ad = adapter();
  auto env = request();
  auto d = react(env, lifecycle_state::queued, 100);
  ASSERT_EQ(run(ad, d).error, "");
  ASSERT_EQ(run(ad, d).error, "");
  EXPECT_EQ(tg.reactions_of(chat, message), std::vector<std::string>{sleeping});
  EXPECT_EQ(services.redelivered(), 0u);
}

TEST_F(TelegramAdapter, ARequestWithoutATelegramMessageGetsNoReaction) {
  auto ad = adapter();
  auto env = request();
  services.set_source(env.request_id, R"({"payload":{"raw":{}}})");
  EXPECT_EQ(run(ad, react(env, lifecycle_state::progress, 1)).error, "");
  EXPECT_EQ(tg.count("setMessageReaction"), 0u);
}

// -- the messenger's order and typing ---------------------------------------

TEST_F(TelegramAdapter, WithTheMessengersGateReactionsNeverGoBackwards) {
  auto ad = adapter();
  reaction_gate gate;
  services.use_gate(&gate);
  for (int round = 0; round < 8; ++round) {
    ++message;
    auto env = request();
    auto progress = react(env, lifecycle_state::progress, 100);
    auto parsed = react(env, lifecycle_state::parsed, 200);
    // Handed over in this order; the later one's delivery may run first.
    ASSERT_TRUE(gate.announce(env.request_id,
                              reaction_rank(lifecycle_state::progress, 100)));
    ASSERT_TRUE(gate.announce(env.request_id,
                              reaction_rank(lifecycle_state::parsed, 200)));
    std::thread later{[&] {
      EXPECT_EQ(run(ad, parsed).error, "");
    }};
    EXPECT_EQ(run(ad, progress).error, "");
    later.join();
    EXPECT_EQ(tg.reactions_of(chat, message),
              (std::vector<std::string>{eyes, thumbs_up}))
      << "round " << round;
    // A 😴 signalled after the end is dropped, unsent and unrecorded.
    auto late = react(env, lifecycle_state::queued, 300);
    EXPECT_FALSE(gate.announce(env.request_id,
                               reaction_rank(lifecycle_state::queued, 300)));
    EXPECT_EQ(run(ad, late).error, "");
    EXPECT_EQ(tg.reactions_of(chat, message).size(), 2u);
    EXPECT_FALSE(services.find(key(late, "reaction")));
  }
  EXPECT_EQ(services.overtaken(), 8);
  EXPECT_EQ(tg.count("setMessageReaction"), 16u) << "nothing corrected";
}

TEST_F(TelegramAdapter, ProgressShowsTypingUntilTheTerminalState) {
  delivery_adapter_config cfg;
  cfg.kind = adapter_kind::telegram;
  cfg.channels = {"telegram"};
  cfg.typing_interval_ms = 500;
  telegram_adapter ad{cfg, {tg.base_url(), tg.token()}};
  typing_ticker ticker;
  services.use_typing(&ticker);
  auto env = request();
  ASSERT_EQ(run(ad, react(env, lifecycle_state::progress, 100)).error, "");
  ASSERT_TRUE(test::eventually(
    [&] {
      return tg.count("sendChatAction") >= 3;
    },
    10s));
  for (auto& c : tg.calls("sendChatAction")) {
    EXPECT_EQ(c.int_param("chat_id"), chat);
    EXPECT_EQ(c.string_param("action").value_or(""), "typing");
    EXPECT_EQ(c.status, 200) << c.response;
  }
  EXPECT_EQ(ticker.size(), 1u);
  ASSERT_EQ(run(ad, react(env, lifecycle_state::parsed, 200)).error, "");
  EXPECT_EQ(ticker.size(), 0u);
}

TEST_F(TelegramAdapter, NoTypingWhenItIsTurnedOff) {
  delivery_adapter_config cfg;
  cfg.kind = adapter_kind::telegram;
  cfg.channels = {"telegram"};
  cfg.typing_max_s = 0;
  telegram_adapter ad{cfg, {tg.base_url(), tg.token()}};
  typing_ticker ticker;
  services.use_typing(&ticker);
  auto env = request();
  ASSERT_EQ(run(ad, react(env, lifecycle_state::progress, 100)).error, "");
  EXPECT_EQ(ticker.size(), 0u);
  EXPECT_EQ(tg.count("sendChatAction"), 0u);
}

} // namespace
} // namespace butlers
