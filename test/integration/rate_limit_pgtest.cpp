// Rate limits at ingest (runtime/rate_limit.md) against the real node, the
// real PostgreSQL and real HTTP over loopback: one sender far over its
// limit is answered 429 with a Retry-After from its bucket while another
// sender's messages are all accepted and reach their work items; a
// Telegram sender over its limit (the real poll connector against the fake
// Bot API) is told once, its refused messages are not stored, and it is
// taken again after the wait the note named.

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/fake_telegram.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// The value of the series `series` (name and labels) in a /metrics text;
/// 0 when absent.
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return 0;
  return std::stod(text.substr(pos + series.size() + 2));
}

std::string envelope(const std::string& sender, int i,
                     const std::string& endpoint = "tests") {
  auto key = sender + "-" + std::to_string(i);
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":")"
         + endpoint
         + R"("},)"
           R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":")"
         + sender
         + R"("},)"
           R"("payload":{"raw":{},"normalized_text":"hello"},)"
           R"("control":{"idempotency_key":")"
         + key + R"("}})";
}

class RateLimits : public node_fixture {
 protected:
  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<int64_t>();
  }

  /// Rows of `sender` in the inbox; of them, how many have a work item.
  int64_t stored(const std::string& sender) {
    return count("SELECT count(*) FROM message_inbox WHERE "
                 "source_sender_identity = '"
                 + sender + "'");
  }
  int64_t with_work_item(const std::string& sender) {
    return count("SELECT count(DISTINCT w.request_id) FROM route_work w JOIN "
                 "message_inbox m USING (request_id) WHERE "
                 "m.source_sender_identity = '"
                 + sender + "'");
  }
};

TEST_F(RateLimits, ASenderAtTenTimesItsLimitGets429sWhileAnotherIsServed) {
  use_database("rate_limits");
  use_files("rate_limits");
  // 6 a minute (one token every 10 s), 5 at once.
  ASSERT_TRUE(
    start_node(node_head("rate-limit-test", 5)
               + "[rate_limits]\nper_sender_per_minute = 6\nsender_burst = 5\n"
                 "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
                 "[butler.runtime]\nturn_ms = 1\n"
                 "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
               + dir_ + "/outbox.jsonl\"\n"));
  constexpr int flood = 50; // ten times the burst
  constexpr int calm = 5;
  int flood_accepted = 0;
  int refused = 0;
  int calm_accepted = 0;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < flood; ++i) {
    auto r = http_->post("/v1/ingest", envelope("flood", i));
    if (r.status == 202) {
      ++flood_accepted;
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      ++refused;
      // Retry-After comes from the bucket: at most the 10 s one token
      // takes at 6 a minute, at least 1; the body names the limit.
      ASSERT_TRUE(r.headers.count("retry-after"));
      auto after = std::stoi(r.headers["retry-after"]);
      EXPECT_GE(after, 1);
      EXPECT_LE(after, 10);
      if (refused == 1) {
        EXPECT_GE(after, 9) << "the bucket was just emptied";
      }
      EXPECT_NE(r.body.find(R"("code":"sender_rate_limited")"),
                std::string::npos)
        << r.body;
      EXPECT_NE(r.body.find(R"("class":"overload_rejected")"),
                std::string::npos);
      EXPECT_NE(r.body.find("rate_limits.per_sender_per_minute"),
                std::string::npos)
        << r.body;
      EXPECT_NE(r.body.find(R"("retry_after_s":)" + std::to_string(after)),
                std::string::npos)
        << r.body;
    }
    if (i % 10 == 5) {
      auto c = http_->post("/v1/ingest", envelope("calm", i / 10));
      EXPECT_EQ(c.status, 202) << c.body;
      calm_accepted += c.status == 202;
    }
  }
  auto elapsed_s = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  // The burst, plus a token for every 10 s the posting took.
  EXPECT_GE(flood_accepted, 5);
  EXPECT_LE(flood_accepted, 5 + 1 + elapsed_s / 10);
  EXPECT_EQ(refused, flood - flood_accepted);
  EXPECT_EQ(calm_accepted, calm);
  // The other sender's messages are claimed and reach their work items.
  ASSERT_TRUE(eventually(
    [&] {
      return with_work_item("calm") == calm;
    },
    60s, 100ms))
    << node_->log();
  EXPECT_EQ(count("SELECT count(DISTINCT t.request_id) FROM "
                  "inbox_transitions t JOIN message_inbox m USING "
                  "(request_id) WHERE t.to_state = 'progress' AND "
                  "m.source_sender_identity = 'calm'"),
            calm);
  // Nothing refused was stored.
  EXPECT_EQ(stored("flood"), flood_accepted);
  auto metrics = http_->get("/metrics").body;
  EXPECT_EQ(metric(metrics, R"(butlers_rate_limited_total{scope="sender",)"
                            R"(channel="api"})"),
            refused);
  // The HTTP caller reads its 429: no note is sent on the api channel.
  EXPECT_EQ(metric(metrics,
                   R"(butlers_rate_limit_notes_total{outcome="handed"})"),
            0);
}

TEST_F(RateLimits, AConnectorOverItsLimitGets429sWhileAnotherIsServed) {
  use_database("rate_limits_conn");
  // 1 a second per connector, 10 at once; senders are not limited.
  ASSERT_TRUE(start_node(node_head("rate-limit-conn", 5)
                         + "[rate_limits]\nper_connector_per_second = 1\n"
                           "connector_burst = 10\n"));
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = http_->post("/v1/ingest",
                         envelope("s" + std::to_string(i), i, "leaky"));
    if (r.status == 202) {
      ++accepted;
      continue;
    }
    ASSERT_EQ(r.status, 429) << r.body;
    ++refused;
    EXPECT_EQ(r.headers["retry-after"], "1");
    EXPECT_NE(r.body.find(R"("code":"connector_rate_limited")"),
              std::string::npos)
      << r.body;
    EXPECT_NE(r.body.find("connector api:leaky"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("rate_limits.per_connector_per_second"),
              std::string::npos)
      << r.body;
  }
  EXPECT_GE(accepted, 10);
  EXPECT_GE(refused, 20);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(http_->post("/v1/ingest", envelope("other", i, "healthy")).status,
              202);
  EXPECT_EQ(metric(http_->get("/metrics").body,
                   R"(butlers_rate_limited_total{scope="connector",)"
                   R"(channel="api"})"),
            refused);
}

class TelegramRateLimits : public RateLimits {
 protected:
  fake_telegram tg;
  int64_t chat = 5550777;
  int64_t next_message = 300;
  int64_t next_update = 7000;

  void push(const std::string& text) {
    telegram::message_spec m;
    m.message_id = next_message++;
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    tg.push_update(telegram::message_update(m, next_update++));
  }

  /// An Update with `text` from the test chat.
  std::string update(const std::string& text) {
    telegram::message_spec m;
    m.message_id = next_message++;
    m.chat_id = chat;
    m.from.id = chat;
    m.text = text;
    auto u = telegram::message_update(m, next_update++);
    tg.remember_update(u);
    return u;
  }

  /// What the bot sent the chat that is a rate-limit note.
  std::vector<std::string> notes() {
    std::vector<std::string> out;
    for (auto& m : tg.messages_to(chat))
      if (m.text.find("pick up again in") != std::string::npos)
        out.push_back(m.text);
    return out;
  }

  /// Every text the bot sent the chat, one a line (for failures).
  std::string sent() {
    std::string out;
    for (auto& m : tg.messages_to(chat))
      out += m.text + "\n";
    return out;
  }

  size_t replies() {
    size_t n = 0;
    for (auto& m : tg.messages_to(chat))
      n += m.text.rfind("health: ", 0) == 0;
    return n;
  }
};

TEST_F(TelegramRateLimits, ASenderOverItsLimitIsToldOnceAndTakenAgainAfter) {
  use_database("rate_limits_tg");
  // 60 a minute (a token a second), 2 at once.
  ASSERT_TRUE(
    start_node(node_head("rate-limit-tg", 5)
                 + "[rate_limits]\nper_sender_per_minute = 60\nsender_burst = "
                   "2\n"
                   "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
                   "[butler.runtime]\nturn_ms = 1\n"
                   "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
                   "endpoint_identity = \"butlers_test_bot\"\nmode = \"poll\"\n"
                   "poll_timeout_s = 1\napi_base = \""
                 + tg.base_url()
                 + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
                   "connector = \"bot\"\n",
               {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  // Six messages at once: one getUpdates, one batch at the switchboard.
  for (int i = 0; i < 6; ++i)
    push("pill question " + std::to_string(i));
  // Every Update is settled (confirmed to Telegram): none is redelivered.
  ASSERT_TRUE(eventually(
    [&] {
      return tg.pending_updates() == 0 && tg.confirmed_offset() >= next_update;
    },
    30s))
    << node_->log();
  ASSERT_TRUE(eventually(
    [&] {
      return replies() == 2 && notes().size() == 1;
    },
    30s))
    << sent();
  auto sender = std::to_string(chat);
  EXPECT_EQ(stored(sender), 2) << "the refused four are not stored";
  auto note = notes()[0];
  auto at = note.find("again in ");
  ASSERT_NE(at, std::string::npos) << note;
  auto after = std::atoi(note.c_str() + at + 9);
  EXPECT_GE(after, 1);
  EXPECT_LE(after, 1); // a token a second
  EXPECT_NE(note.find("60 a minute, burst 2"), std::string::npos) << note;
  auto metrics = http_->get("/metrics").body;
  EXPECT_EQ(metric(metrics, R"(butlers_rate_limited_total{scope="sender",)"
                            R"(channel="telegram"})"),
            4);
  EXPECT_EQ(metric(metrics,
                   R"(butlers_rate_limit_notes_total{outcome="handed"})"),
            1);
  // The note promised a token after `after` seconds: the limit is a clock,
  // so the test waits that long, then the next message is taken.
  std::this_thread::sleep_for(std::chrono::seconds{after});
  push("pill question after the wait");
  ASSERT_TRUE(eventually(
    [&] {
      return replies() == 3;
    },
    30s))
    << sent();
  EXPECT_EQ(stored(sender), 3);
  EXPECT_EQ(notes().size(), 1u) << "one note per limited period";
}

TEST_F(TelegramRateLimits,
       AtTheWebhookALimitedSenderIsAcknowledgedAndToldOnce) {
  use_database("rate_limits_hook");
  const std::string secret = "hook-Secret_9";
  ASSERT_TRUE(start_node(
    node_head("rate-limit-hook", 5)
      + "[rate_limits]\nper_sender_per_minute = 1\nsender_burst = 1\n"
        "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
        "[butler.runtime]\nturn_ms = 1\n"
        "[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
        "endpoint_identity = \"butlers_test_bot\"\nmode = \"webhook\"\n"
        "api_base = \""
      + tg.base_url()
      + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
        "connector = \"bot\"\n",
    {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()},
     {"BUTLERS_CONNECTOR_BOT_SECRET_TOKEN", secret}}));
  std::vector<std::string> statuses;
  for (int i = 0; i < 4; ++i) {
    auto body = update("pill at the webhook " + std::to_string(i));
    auto r = http_->raw("POST /v1/connectors/bot/webhook HTTP/1.1\r\n"
                        "Host: 127.0.0.1\r\nConnection: close\r\n"
                        "Content-Type: application/json\r\n"
                        "X-Telegram-Bot-Api-Secret-Token: "
                        + secret + "\r\nContent-Length: "
                        + std::to_string(body.size()) + "\r\n\r\n" + body);
    // 200 either way: a refused Update redelivered would only be refused
    // again; the sender is told instead.
    ASSERT_EQ(r.status, 200) << r.body;
    statuses.push_back(r.body);
  }
  EXPECT_NE(statuses[0].find(R"("status":"accepted")"), std::string::npos);
  for (int i = 1; i < 4; ++i)
    EXPECT_NE(statuses[i].find(R"("status":"rate_limited")"), std::string::npos)
      << statuses[i];
  ASSERT_TRUE(eventually(
    [&] {
      return replies() == 1 && notes().size() == 1;
    },
    30s))
    << sent();
  EXPECT_NE(notes()[0].find("again in 60 s"), std::string::npos) << sent();
  EXPECT_EQ(stored(std::to_string(chat)), 1);
}

} // namespace
} // namespace butlers::test
