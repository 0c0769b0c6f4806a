// Replies and lifecycle reactions on Telegram, end to end on the reply
// side: a real node and PostgreSQL, a request posted to POST /v1/ingest as
// the Telegram connector would submit it (channel telegram, payload.raw the
// Update), and the fake Telegram Bot API over loopback HTTP receiving the
// messenger's sendMessage and setMessageReaction calls. Also: a 429 with
// retry_after, and a SIGKILL while a reply is on its way.

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

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
const std::string sleeping = "\xf0\x9f\x98\xb4";

/// The value of the series `series` (name and labels) in a /metrics text;
/// 0 when absent (a counter not yet touched).
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return 0;
  return std::stod(text.substr(pos + series.size() + 2));
}

class TelegramReplies : public node_fixture {
 protected:
  fake_telegram tg;
  int64_t chat = 5550001;
  int64_t next_message = 100;
  int64_t next_update = 9000;

  /// The node: a `health` butler (keyword "pill") with `runtime` settings,
  /// replies through a telegram adapter whose connector points at the fake.
  /// `connector` is the rest of the `bot` connector's table (by default a
  /// disabled one, lending the adapter its token and api_base).
  std::string config(const std::string& runtime, const std::string& health = "",
                     const std::string& adapter = "",
                     const std::string& connector = "enabled = false\n") {
    return node_head("telegram-test", 5)
           + "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n" + health
           + "[butler.runtime]\n" + runtime
           + "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
             "endpoint_identity = \"butlers_test_bot\"\n"
           + connector + "api_base = \"" + tg.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
             "connector = \"bot\"\n"
           + adapter;
  }

  void start(const std::string& cfg) {
    use_database("telegram_node");
    ASSERT_TRUE(start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()},
                                 {"BUTLERS_CONNECTOR_BOT_SECRET_TOKEN",
                                  webhook_secret}}));
  }

  static constexpr const char* webhook_secret = "e2e-Secret_7";

  /// A Telegram message Update with `text` in the test chat; its
  /// message_id is stored in `message_id`.
  std::string update_with(const std::string& text, int64_t& message_id) {
    tgu::message_spec m;
    m.message_id = message_id = next_message++;
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    return tgu::message_update(m, next_update++);
  }

  /// POSTs `update` to the bot connector's webhook as Telegram does.
  http_response post_webhook(const std::string& update) {
    return http_->raw("POST /v1/connectors/bot/webhook HTTP/1.1\r\n"
                      "Host: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\n"
                      "X-Telegram-Bot-Api-Secret-Token: "
                      + std::string{webhook_secret} + "\r\nContent-Length: "
                      + std::to_string(update.size()) + "\r\n\r\n" + update);
  }

  /// The reply to `message` arrived as sendMessage to the chat replying to
  /// it with `text`, and its reactions were `expected`, in order.
  void expect_answered(int64_t message, const std::string& text,
                       const std::vector<std::string>& expected) {
    ASSERT_TRUE(reaction_ends_with(message, expected.back())) << node_->log();
    ASSERT_TRUE(eventually(
      [&] {
        return !tg.messages_to(chat).empty();
      },
      30s))
      << node_->log();
    auto sent = tg.messages_to(chat);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_NE(sent[0].text.find(text), std::string::npos) << sent[0].text;
    ASSERT_TRUE(sent[0].reply_to_message_id);
    EXPECT_EQ(*sent[0].reply_to_message_id, message);
    EXPECT_EQ(tg.reactions_of(chat, message), expected);
  }

  /// Posts a Telegram message with `text` to /v1/ingest as the connector
  /// would; returns its message_id.
  int64_t send(const std::string& text) {
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

  bool reaction_ends_with(int64_t message, const std::string& emoji,
                          std::chrono::milliseconds timeout = 30s) {
    return eventually(
      [&] {
        auto seen = tg.reactions_of(chat, message);
        return !seen.empty() && seen.back() == emoji;
      },
      timeout);
  }

  std::string metrics() {
    return http_->get("/metrics").body;
  }

  /// Rows of the outbound ledger as "kind part state".
  std::vector<std::string> ledger() {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    std::vector<std::string> out;
    for (auto row : tx.exec("SELECT kind, part, state FROM outbound_ledger "
                            "ORDER BY kind, created_at"))
      out.push_back(row[0].as<std::string>() + " " + row[1].as<std::string>()
                    + " " + row[2].as<std::string>());
    return out;
  }
};

TEST_F(TelegramReplies, TheReplyAnswersTheMessageWhichShowsProgressThenDone) {
  start(config("turn_ms = 1500\nreply = \"noted: {prompt}\"\n"));
  auto msg = send("my pill at nine");
  ASSERT_TRUE(eventually(
    [&] {
      return tg.messages_to(chat).size() == 1;
    },
    30s))
    << node_->log();
  auto sent = tg.messages_to(chat)[0];
  EXPECT_EQ(sent.text, "noted: my pill at nine");
  ASSERT_TRUE(sent.reply_to_message_id);
  EXPECT_EQ(*sent.reply_to_message_id, msg);
  ASSERT_TRUE(reaction_ends_with(msg, thumbs_up)) << node_->log();
  EXPECT_EQ(tg.reactions_of(chat, msg),
            (std::vector<std::string>{eyes, thumbs_up}));
  // Every send is in the ledger, sent; the reply under its provider id.
  auto all_sent = std::vector<std::string>{"message chunk:0 sent",
                                           "reaction reaction sent",
                                           "reaction reaction sent"};
  ASSERT_TRUE(eventually(
    [&] {
      return ledger() == all_sent;
    },
    10s));
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  EXPECT_EQ(tx.exec1("SELECT provider_id FROM outbound_ledger "
                     "WHERE kind = 'message'")[0]
              .as<std::string>(),
            std::to_string(sent.message_id));
  // Counted just after each record commits.
  auto sends = [&](const std::string& kind) {
    return metric(metrics(), "butlers_messenger_sends_total{adapter="
                             "\"telegram\",kind=\""
                               + kind + "\",outcome=\"sent\"}");
  };
  EXPECT_TRUE(eventually(
    [&] {
      return sends("message") == 1 && sends("reaction") == 2;
    },
    5s))
    << metrics();
  EXPECT_EQ(sends("message"), 1);
  EXPECT_EQ(sends("reaction"), 2);
}

// -- end to end through the connector
// ------------------------------------------

TEST_F(TelegramReplies, AnUpdateAtTheWebhookIsAnsweredWithProgressThenDone) {
  start(config("turn_ms = 1000\nreply = \"noted: {prompt}\"\n", "", "",
               "mode = \"webhook\"\n"));
  int64_t msg = 0;
  auto r = post_webhook(update_with("my pill at nine", msg));
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  expect_answered(msg, "noted: my pill at nine", {eyes, thumbs_up});
}

TEST_F(TelegramReplies, AnUpdateAtTheWebhookForAFailingButlerShowsErrored) {
  start(config("turn_ms = 500\nfail_rate = 1.0\n"
               "fail_class = \"validation_error\"\n",
               "", "", "mode = \"webhook\"\n"));
  int64_t msg = 0;
  auto r = post_webhook(update_with("a pill question", msg));
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  expect_answered(msg, "could not be completed", {eyes, invader});
}

TEST_F(TelegramReplies,
       AnUpdateFetchedByPollingIsAnsweredWithProgressThenDone) {
  start(config("turn_ms = 1000\nreply = \"noted: {prompt}\"\n", "", "",
               "mode = \"poll\"\npoll_timeout_s = 2\n"));
  int64_t msg = 0;
  tg.push_update(update_with("my pill at ten", msg));
  expect_answered(msg, "noted: my pill at ten", {eyes, thumbs_up});
  EXPECT_TRUE(eventually(
    [&] {
      return tg.pending_updates() == 0;
    },
    10s));
}

TEST_F(TelegramReplies, AnUpdateFetchedByPollingForAFailingButlerShowsErrored) {
  start(config("turn_ms = 500\nfail_rate = 1.0\n"
               "fail_class = \"validation_error\"\n",
               "", "", "mode = \"poll\"\npoll_timeout_s = 2\n"));
  int64_t msg = 0;
  tg.push_update(update_with("a pill question", msg));
  expect_answered(msg, "could not be completed", {eyes, invader});
}

// -- the reply side -----------------------------------------------------------

TEST_F(TelegramReplies, AReplyDeadLetteredAtTheBotApiLeavesTheRequestErrored) {
  // Done means delivered: the butler succeeded, but Telegram refuses the
  // reply for good (403), so the request ends errored and shows 👾.
  start(config("turn_ms = 10\nreply = \"noted: {prompt}\"\n"));
  tg.inject("sendMessage",
            telegram_fault::error(403,
                                  "Forbidden: bot was blocked by the user"),
            10);
  auto msg = send("my pill");
  ASSERT_TRUE(reaction_ends_with(msg, invader)) << node_->log();
  EXPECT_EQ(tg.reactions_of(chat, msg),
            (std::vector<std::string>{eyes, invader}));
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec1("SELECT lifecycle_state, coalesce(error_class, ''), "
                      "coalesce(error_message, '') FROM message_inbox");
  EXPECT_EQ(row[0].as<std::string>(), "errored");
  // The class the adapter gave the refusal: the bot may not write there.
  EXPECT_EQ(row[1].as<std::string>(), "target_unavailable");
  EXPECT_NE(row[2].as<std::string>().find("reply not delivered"),
            std::string::npos)
    << row[2].as<std::string>();
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM dead_letters")[0].as<int>() > 0,
            true);
}

TEST_F(TelegramReplies, AScheduleWithNotifyToReachesTheChatOncePerCluster) {
  // catch_up "once" fires the minute that just began once the database
  // answers (no wait for the next one); a second node on the same database
  // fires it too, and the work item derived from (butler, schedule, fire
  // time) is stored once.
  auto cfg = config("turn_ms = 10\nreply = \"{butler}: {prompt}\"\n"
                    "[[butler.schedule]]\nname = \"evening\"\n"
                    "cron = \"* * * * *\"\nprompt = \"evening check\"\n"
                    "notify_to = \"telegram:"
                    + std::to_string(chat) + "\"\ncatch_up = \"once\"\n");
  start(cfg);
  node_process second{cfg,
                      {{"BUTLERS_DATABASE_URL", url_},
                       {"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}};
  ASSERT_TRUE(second.wait_listening(30s)) << second.log();
  ASSERT_TRUE(eventually(
    [&] {
      return !tg.messages_to(chat).empty();
    },
    30s))
    << node_->log();
  EXPECT_EQ(tg.messages_to(chat)[0].text, "health: evening check");
  // Each fire time (the catch-up's minute; another if a minute began
  // meanwhile) is one work item, whichever node stored it first, and one
  // message: never one per node.
  pqxx::connection conn{url_};
  auto fires = [&] {
    pqxx::nontransaction tx{conn};
    auto row = tx.exec1("SELECT count(*), count(*) FILTER (WHERE state = "
                        "'ok') FROM route_work WHERE butler = 'health' AND "
                        "segment_id = 'schedule:evening'");
    return std::make_pair(row[0].as<int>(), row[1].as<int>());
  };
  auto texts = [&] {
    int n = 0;
    for (auto& m : tg.messages_to(chat))
      n += m.text == "health: evening check";
    return n;
  };
  ASSERT_TRUE(eventually(
    [&] {
      auto [all, ok] = fires();
      return all >= 1 && all == ok && texts() == all;
    },
    30s))
    << "fires " << fires().first << ", messages " << texts() << "\n"
    << node_->log();
  EXPECT_LE(fires().first, 2);
  second.signal(SIGTERM);
  EXPECT_TRUE(second.wait_exit(15s));
}

TEST_F(TelegramReplies, AFailingButlerShowsErroredAndTheErrorReplyArrives) {
  start(config("turn_ms = 1000\nfail_rate = 1.0\n"
               "fail_class = \"validation_error\"\n"));
  auto msg = send("a pill question");
  ASSERT_TRUE(reaction_ends_with(msg, invader)) << node_->log();
  EXPECT_EQ(tg.reactions_of(chat, msg),
            (std::vector<std::string>{eyes, invader}));
  ASSERT_TRUE(eventually(
    [&] {
      return tg.messages_to(chat).size() == 1;
    },
    30s));
  auto reply = tg.messages_to(chat)[0];
  EXPECT_NE(reply.text.find("could not be completed"), std::string::npos)
    << reply.text;
  ASSERT_TRUE(reply.reply_to_message_id);
  EXPECT_EQ(*reply.reply_to_message_id, msg);
}

TEST_F(TelegramReplies, AWaitForASessionSlotShowsQueued) {
  start(config("turn_ms = 1500\n", "max_concurrent_sessions = 1\n"));
  auto first = send("first pill");
  auto second = send("second pill");
  ASSERT_TRUE(reaction_ends_with(second, thumbs_up, 40s)) << node_->log();
  auto seen = tg.reactions_of(chat, second);
  EXPECT_NE(std::find(seen.begin(), seen.end(), sleeping), seen.end())
    << "the second waited for the first's session";
  ASSERT_TRUE(reaction_ends_with(first, thumbs_up));
  auto first_seen = tg.reactions_of(chat, first);
  EXPECT_EQ(std::find(first_seen.begin(), first_seen.end(), sleeping),
            first_seen.end());
}

TEST_F(TelegramReplies, TooManyRequestsIsHonoured) {
  tg.inject("sendMessage", telegram_fault::too_many_requests(2));
  start(config("turn_ms = 10\n"));
  send("pill please");
  ASSERT_TRUE(eventually(
    [&] {
      return tg.messages_to(chat).size() == 1;
    },
    30s))
    << node_->log();
  auto calls = tg.calls("sendMessage");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].status, 429);
  EXPECT_GE(calls[1].at - calls[0].at, 2s) << "retry_after = 2";
}

// A reply that reached Telegram but whose answer never came back when the
// node died: the restarted node finds it 'sending' and sends it again. Every
// reply arrives; the duplicates are exactly the counted window.
TEST_F(TelegramReplies, SigkillDuringDeliveryLosesNothingAndCountsTheWindow) {
  // Short inbox leases: the requests, unfinished at the kill (their
  // replies were not delivered), are taken over soon after the restart.
  auto cfg = config("turn_ms = 10\nreply = \"noted: {prompt}\"\n", "",
                    "timeout_ms = 60000\n")
             + "[switchboard]\nlease_s = 3\nscanner_interval_s = 1\n";
  tg.inject("sendMessage", telegram_fault::lost_reply(60s), 2);
  start(cfg);
  auto a = send("first pill");
  auto b = send("second pill");
  // Both replies were carried out by Telegram; their answers hang.
  ASSERT_TRUE(eventually(
    [&] {
      return tg.messages_to(chat).size() == 2;
    },
    30s))
    << node_->log();
  // Done means delivered: while the sends hang, neither request is parsed.
  ASSERT_TRUE(reaction_ends_with(a, eyes));
  ASSERT_TRUE(reaction_ends_with(b, eyes));
  pqxx::connection db{url_};
  EXPECT_EQ(pqxx::nontransaction{db}
              .exec1("SELECT count(*) FROM message_inbox "
                     "WHERE lifecycle_state = 'parsed'")[0]
              .as<int>(),
            0);
  ASSERT_TRUE(kill_node());
  node_.reset();
  ASSERT_TRUE(start_node(cfg, {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  ASSERT_TRUE(eventually(
    [&] {
      pqxx::connection conn{url_};
      pqxx::nontransaction tx{conn};
      return tx.exec1("SELECT count(*) FROM outbound_ledger "
                      "WHERE kind = 'message' AND state = 'sent'")[0]
               .as<int>()
             == 2;
    },
    30s))
    << node_->log();
  auto sent = tg.messages_to(chat);
  std::map<std::string, int> copies;
  for (auto& m : sent)
    ++copies[m.text];
  EXPECT_EQ(copies.size(), 2u) << "both replies arrived";
  for (auto& [text, n] : copies)
    EXPECT_GE(n, 1) << text;
  auto duplicates = static_cast<double>(sent.size() - copies.size());
  auto counted = metric(metrics(), "butlers_messenger_redelivered_total{"
                                   "adapter=\"telegram\",kind=\"message\"}");
  EXPECT_EQ(duplicates, counted);
  EXPECT_EQ(duplicates, 2) << "both were in the window when the node died";
  // Delivered (twice, within the counted window): now both are parsed.
  EXPECT_TRUE(reaction_ends_with(a, thumbs_up)) << node_->log();
  EXPECT_TRUE(reaction_ends_with(b, thumbs_up));
}

} // namespace
} // namespace butlers::test
