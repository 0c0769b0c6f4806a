// Connectors against real node processes, the real PostgreSQL and real
// HTTP: a Telegram webhook (secret token, malformed Updates, a SIGKILL
// between the commit and the 200), Telegram polling against the fake Bot
// API (the offset follows the commits, a SIGKILL mid-batch), a JSONL
// replay killed halfway, and the http connector's limit and identity.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/cluster_harness.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"
#include "test/support/telegram_updates.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* secret = "s3cret-Token_1";
constexpr const char* bot = "butlers_test_bot";

/// Reads one sample (`name` or `name{labels}`) from Prometheus text; -1
/// when absent.
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return -1;
  return std::stod(text.substr(pos + series.size() + 2));
}

std::string series(const std::string& name, const std::string& connector) {
  return name + "{connector=\"" + connector + "\"}";
}

/// A JSON string member `"key":"..."` of `body`, or "".
std::string string_member(const std::string& body, const std::string& key) {
  auto at = body.find("\"" + key + "\":\"");
  if (at == std::string::npos)
    return {};
  at += key.size() + 4;
  return body.substr(at, body.find('"', at) - at);
}

/// An Update POSTed to the webhook of connector `name` as Telegram does.
http_response post_update(const http_client& http, const std::string& update,
                          const std::string& token = secret,
                          const std::string& name = "tg") {
  std::string req = "POST /v1/connectors/" + name
                    + "/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: "
                    + std::to_string(update.size()) + "\r\n";
  if (!token.empty())
    req += "X-Telegram-Bot-Api-Secret-Token: " + token + "\r\n";
  return http.raw(req + "\r\n" + update);
}

telegram::message_spec msg(int64_t message_id, const std::string& text,
                           int64_t chat_id = 1111111) {
  telegram::message_spec m;
  m.message_id = message_id;
  m.chat_id = chat_id;
  m.from.id = chat_id;
  m.text = text;
  return m;
}

class Connectors : public node_fixture {
 protected:
  /// As the fixture's, and the node (its connectors' threads included)
  /// must exit cleanly on SIGTERM.
  void TearDown() override {
    if (node_) {
      auto exit = stop_node();
      EXPECT_TRUE(exit) << "node did not exit after SIGTERM";
      if (exit) {
        EXPECT_EQ(exit->exit_code, 0) << exit->err;
      }
      node_.reset();
    }
    node_fixture::TearDown();
  }

  /// A butler that answers at once and an outbox in the test's directory.
  std::string butlers_toml() {
    use_files("connectors");
    return "[[butler]]\nname = \"general\"\n[butler.runtime]\nturn_ms = 0\n"
           "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
           + dir_ + "/outbox.jsonl\"\n";
  }

  std::string config(const std::string& connectors,
                     const std::string& http_extra = "") {
    use_database("connectors");
    // What a killed node committed and never routed waits for the cold
    // path of the next start: sweep every second.
    // Tests hold the writer with a table lock for as long as they need:
    // no lock deadline.
    return node_head("connector-test", 5, http_extra)
           + "[database]\nlock_timeout_ms = 0\n"
           + "[switchboard]\nscanner_interval_s = 1\nscanner_grace_s = 1\n"
           + butlers_toml() + connectors;
  }

  static std::string webhook_connector() {
    return std::string{"[[connector]]\nname = \"tg\"\ntype = \"telegram\"\n"
                       "mode = \"webhook\"\nendpoint_identity = \""}
           + bot + "\"\n";
  }

  /// The webhook's secret from the environment, as runtime/telegram.md
  /// suggests.
  static std::map<std::string, std::string> webhook_env() {
    return {{"BUTLERS_CONNECTOR_TG_SECRET_TOKEN", secret}};
  }

  /// POSTs an Update to this node's webhook of `name`.
  http_response post_update(const std::string& update,
                            const std::string& token = secret,
                            const std::string& name = "tg") {
    return test::post_update(http_client{"127.0.0.1", port_}, update, token,
                             name);
  }

  std::string metrics() {
    return http_->get("/metrics").body;
  }

  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<int64_t>();
  }

  std::string text(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<std::string>();
  }

  bool rows(int64_t n, const std::string& where = "true") {
    return eventually(
      [&] {
        return count("SELECT count(*) FROM message_inbox WHERE " + where) == n;
      },
      30s);
  }

  /// Replies in the outbox mentioning `needle`.
  size_t replies_with(const std::string& needle) {
    std::ifstream in{dir_ + "/outbox.jsonl"};
    std::string line;
    size_t n = 0;
    while (std::getline(in, line))
      n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }

  /// Starts a node that is expected to die by the fault point, perhaps
  /// before it even listens.
  void launch_doomed(const std::string& cfg,
                     std::map<std::string, std::string> env) {
    env.emplace("BUTLERS_DATABASE_URL", url_);
    node_ = std::make_unique<node_process>(cfg, std::move(env));
  }

  /// Waits for the node to die by its own SIGKILL (the fault point).
  ::testing::AssertionResult died_by_fault() {
    auto exit = node_->wait_exit(20s);
    if (!exit)
      return ::testing::AssertionFailure() << "the node did not die";
    if (exit->signal != SIGKILL)
      return ::testing::AssertionFailure()
             << "exit code " << exit->exit_code << ", signal " << exit->signal
             << "\n"
             << node_->log();
    node_.reset();
    return ::testing::AssertionSuccess();
  }
};

// -- webhook ------------------------------------------------------------------

TEST_F(Connectors, ATelegramUpdatePostedToTheWebhookReachesAButler) {
  ASSERT_TRUE(start_node(config(webhook_connector()), webhook_env()));
  auto update = telegram::message_update(msg(1365, "remind me of the dentist"),
                                         50001);
  auto r = post_update(update);
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(string_member(r.body, "status"), "accepted") << r.body;
  auto id = string_member(r.body, "request_id");
  ASSERT_EQ(id.size(), 36u) << r.body;
  // Stored before the 200, as Telegram sent it.
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE request_id = '" + id
                  + "'"),
            1);
  EXPECT_EQ(text("SELECT dedupe_key FROM inbox_dedupe LIMIT 1"),
            std::string{"tg:"} + std::to_string(std::string{bot}.size()) + ":"
              + bot + ":50001");
  EXPECT_EQ(text("SELECT raw_payload::json->'payload'->'raw'->'message'->"
                 "'chat'->>'id' FROM message_inbox"),
            "1111111");
  // The request as inspected.
  auto inspected = http_->get("/v1/requests/" + id);
  ASSERT_EQ(inspected.status, 200) << inspected.body;
  EXPECT_NE(inspected.body.find(R"("source_channel": "telegram")"),
            std::string::npos)
    << inspected.body;
  EXPECT_NE(inspected.body.find(R"("source_thread_identity": "1111111")"),
            std::string::npos);
  EXPECT_NE(inspected.body.find(R"("source_sender_identity": "1111111")"),
            std::string::npos);
  EXPECT_NE(inspected.body.find(R"("normalized_text": "remind me of the )"
                                R"(dentist")"),
            std::string::npos);
  // It reaches the butler, whose reply goes to the outbox.
  ASSERT_TRUE(rows(1, "lifecycle_state = 'parsed'"));
  ASSERT_TRUE(eventually(
    [&] {
      return replies_with(id) == 1;
    },
    20s));
  // Telegram retrying the same Update: 200, the same request.
  auto again = post_update(update);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(string_member(again.body, "status"), "deduped");
  EXPECT_EQ(string_member(again.body, "request_id"), id);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_received_total", "tg")), 2);
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total", "tg")), 1);
  EXPECT_EQ(metric(m, series("butlers_connector_deduped_total", "tg")), 1);
  EXPECT_EQ(metric(m, series("butlers_connector_in_flight", "tg")), 0);
  EXPECT_EQ(metric(m, series("butlers_connector_up", "tg")), 1);
}

TEST_F(Connectors, AWrongSecretTokenIsRefusedAndNothingIsStored) {
  // A node with a bearer token: the webhook takes none (Telegram cannot
  // send one), its secret token guards it instead.
  ASSERT_TRUE(start_node(config(webhook_connector(), "token = \"bearer-1\"\n"),
                         webhook_env()));
  http_->token("bearer-1");
  auto update = telegram::message_update(msg(1, "hello"), 60001);
  for (auto& wrong : {std::string{"s3cret-Token_2"}, std::string{"s3cret"},
                      std::string{}, std::string{"bearer-1"}}) {
    auto r = post_update(update, wrong);
    EXPECT_EQ(r.status, 401) << wrong << ": " << r.body;
  }
  EXPECT_EQ(post_update(update, secret, "nope").status, 404);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe"), 0);
  EXPECT_EQ(metric(metrics(), series("butlers_connector_received_total", "tg")),
            0);
  // The right secret, no bearer token: stored.
  auto r = post_update(update);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(Connectors, MalformedUpdatesAreAnsweredCountedAndTheNodeKeepsServing) {
  ASSERT_TRUE(start_node(config(webhook_connector()), webhook_env()));
  const std::string invalid[] = {
    "",
    "not json at all",
    "[1,2,3]",
    std::string(5000, '['),
    R"({"message":{"text":"no update_id"}})",
    R"({"update_id":"7","message":{}})",
    telegram::fixture("malformed_message_without_chat"),
    telegram::fixture("malformed_text_not_string"),
    "{\"update_id\":9,\"message\":{\"chat\":{\"id\":1},\"date\":1,"
    "\"text\":\"\xc3\x28\"}}",
  };
  for (auto& body : invalid) {
    auto r = post_update(body);
    EXPECT_EQ(r.status, 200) << body.substr(0, 60) << ": " << r.body;
    EXPECT_EQ(string_member(r.body, "status"), "invalid") << r.body;
  }
  // A button press goes to the approvals (runtime/approvals.md), neither
  // ingested nor counted as ignored.
  auto press = post_update(telegram::fixture("callback_query"));
  EXPECT_EQ(press.status, 200) << press.body;
  EXPECT_EQ(string_member(press.body, "status"), "callback") << press.body;
  const std::string ignored[] = {
    telegram::fixture("my_chat_member"),
    R"({"update_id":70001,"message":{"message_id":3,"chat":{"id":5,)"
    R"("type":"private"},"date":1441645532,"sticker":{"file_id":"x"}}})",
  };
  for (auto& body : ignored) {
    auto r = post_update(body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(string_member(r.body, "status"), "ignored") << r.body;
  }
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_invalid_total", "tg")),
            std::size(invalid));
  EXPECT_EQ(metric(m, series("butlers_connector_ignored_total", "tg")),
            std::size(ignored));
  // Still serving, and a good Update after all that is stored.
  EXPECT_EQ(http_->get("/healthz").status, 200);
  auto r = post_update(telegram::fixture("message_text"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(string_member(r.body, "status"), "accepted");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(Connectors, KilledBetweenTheCommitAndThe200TheRetryIsOneRequest) {
  auto env = webhook_env();
  env["BUTLERS_FAULT"] = "connector_after_commit";
  auto cfg = config(webhook_connector());
  ASSERT_TRUE(start_node(cfg, env));
  auto update = telegram::message_update(msg(7, "buy milk"), 80001);
  auto r = post_update(update);
  EXPECT_NE(r.status, 200) << "the node died before answering: " << r.body;
  ASSERT_TRUE(died_by_fault());
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1)
    << "committed before the process died";
  // Telegram saw no 200 and sends the Update again, to the restarted node.
  ASSERT_TRUE(start_node(cfg, webhook_env()));
  auto retry = post_update(update);
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(string_member(retry.body, "status"), "deduped");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  ASSERT_TRUE(rows(1, "lifecycle_state = 'parsed'"));
  auto id = text("SELECT request_id::text FROM message_inbox");
  EXPECT_EQ(string_member(retry.body, "request_id"), id);
  ASSERT_TRUE(eventually(
    [&] {
      return replies_with(id) >= 1;
    },
    20s));
  EXPECT_EQ(replies_with("buy milk"), 1u) << "one request, one reply";
}

TEST(ConnectorNodes, OnlyNodesThatRunTheSwitchboardRunConnectors) {
  auto common = std::string{"[[butler]]\nname = \"general\"\n"
                            "[butler.runtime]\nturn_ms = 0\n"
                            "[[connector]]\nname = \"tg\"\n"
                            "type = \"telegram\"\nendpoint_identity = \""}
                + bot + "\"\nsecret_token = \"" + secret + "\"\n";
  cluster_harness h{fresh_database("connector_nodes"), common};
  cluster_node_spec sb;
  sb.name = "node-s";
  cluster_node_spec only;
  only.name = "node-b";
  only.switchboard = false;
  only.peers = {"node-s"};
  auto s = h.add(sb);
  auto b = h.add(only);
  std::string why;
  ASSERT_TRUE(h.start_all(&why)) << why;
  auto update = telegram::message_update(msg(3, "hello"), 90001);
  auto refused = post_update(h.http(b), update);
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_EQ(h.http(b).get("/metrics").body.find("butlers_connector_"),
            std::string::npos);
  auto taken = post_update(h.http(s), update);
  EXPECT_EQ(taken.status, 200) << taken.body;
  EXPECT_EQ(h.metric(s, series("butlers_connector_up", "tg")), 1);
}

// -- poll ---------------------------------------------------------------------

class TelegramPolling : public Connectors {
 protected:
  std::string poll_connector(int max_in_flight = 8) {
    return std::string{"[[connector]]\nname = \"tgpoll\"\ntype = "
                       "\"telegram\"\nmode = \"poll\"\nendpoint_identity = \""}
           + bot + "\"\napi_base = \"" + fake_.base_url()
           + "\"\npoll_timeout_s = 2\nmax_in_flight = "
           + std::to_string(max_in_flight) + "\n";
  }

  std::map<std::string, std::string> poll_env() {
    return {{"BUTLERS_CONNECTOR_TGPOLL_TOKEN", fake_.token()}};
  }

  fake_telegram fake_;
};

TEST_F(TelegramPolling, UpdatesPushedToTheFakeReachButlers) {
  ASSERT_TRUE(start_node(config(poll_connector()), poll_env()));
  auto a = fake_.push_update(telegram::message_update(msg(10, "first one")));
  auto b = fake_.push_update(
    telegram::edited_message_update(msg(10, "first one, edited")));
  auto c = fake_.push_update(
    telegram::channel_post_update(msg(11, "a channel post", -100200)));
  auto no_text = msg(12, "");
  no_text.text.reset();
  fake_.push_update(telegram::message_update(no_text));
  ASSERT_TRUE(rows(3, "lifecycle_state = 'parsed'"));
  ASSERT_TRUE(eventually(
    [&] {
      return fake_.confirmed_offset() > c + 1;
    },
    20s));
  for (auto id : {a, b, c})
    EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe WHERE dedupe_key LIKE "
                    "'tg:%:"
                    + std::to_string(id) + "'"),
              1);
  EXPECT_EQ(replies_with("first one, edited"), 1u);
  EXPECT_EQ(replies_with("a channel post"), 1u);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total", "tgpoll")), 3);
  EXPECT_EQ(metric(m, series("butlers_connector_ignored_total", "tgpoll")), 1);
  auto polls = fake_.calls("getUpdates");
  ASSERT_FALSE(polls.empty());
  auto allowed = polls.back().param("allowed_updates");
  ASSERT_NE(allowed, nullptr);
  // message, edited_message, channel_post and callback_query (approvals).
  EXPECT_EQ(allowed->Size(), 4u);
}

TEST_F(TelegramPolling, TheOffsetIsConfirmedOnlyAfterTheCommit) {
  ASSERT_TRUE(start_node(config(poll_connector()), poll_env()));
  ASSERT_TRUE(fake_.wait_for_calls_arrived("getUpdates", 1, 20s));
  // Hold the writer: the Update's append cannot commit.
  pqxx::connection locker{url_};
  pqxx::work lock{locker};
  lock.exec("LOCK TABLE inbox_dedupe IN EXCLUSIVE MODE");
  auto id = fake_.push_update(telegram::message_update(msg(20, "held")));
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(), series("butlers_connector_in_flight", "tgpoll"))
             == 1;
    },
    20s));
  // Submitted and not committed: nothing confirms it yet.
  EXPECT_LE(fake_.confirmed_offset(), id);
  for (auto& call : fake_.calls("getUpdates"))
    EXPECT_NE(call.int_param("offset"), id + 1);
  lock.commit();
  ASSERT_TRUE(eventually(
    [&] {
      return fake_.confirmed_offset() == id + 1;
    },
    20s));
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(TelegramPolling, KilledMidBatchEachUpdateBecomesExactlyOneRequest) {
  auto cfg = config(poll_connector(2));
  auto env = poll_env();
  env["BUTLERS_FAULT"] = "connector_after_commit";
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(fake_.push_update(telegram::message_update(
      msg(30 + i, "update number " + std::to_string(i)))));
  launch_doomed(cfg, env);
  // The first two of six are committed, then the process dies: nothing of
  // the batch is confirmed.
  ASSERT_TRUE(died_by_fault());
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 2);
  EXPECT_LT(fake_.confirmed_offset(), ids.front() + 1);
  ASSERT_TRUE(start_node(cfg, poll_env()));
  ASSERT_TRUE(eventually(
    [&] {
      return fake_.confirmed_offset() == ids.back() + 1;
    },
    30s));
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 6);
  for (auto id : ids)
    EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe WHERE dedupe_key LIKE "
                    "'tg:%:"
                    + std::to_string(id) + "'"),
              1);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_deduped_total", "tgpoll")), 2);
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total", "tgpoll")), 4);
  ASSERT_TRUE(rows(6, "lifecycle_state = 'parsed'"));
}

TEST_F(TelegramPolling, ARefusedTokenStopsTheConnectorAndSaysSo) {
  ASSERT_TRUE(start_node(config(poll_connector()),
                         {{"BUTLERS_CONNECTOR_TGPOLL_TOKEN", "1:wrong"}}));
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(), series("butlers_connector_up", "tgpoll")) == 0;
    },
    20s));
  EXPECT_EQ(fake_.count("getUpdates"), 1u) << "no tight loop";
  EXPECT_NE(node_->log().find("Telegram refused the bot token"),
            std::string::npos);
  EXPECT_EQ(node_->log().find("1:wrong"), std::string::npos)
    << "the token is never logged";
  EXPECT_EQ(http_->get("/healthz").status, 200);
}

// -- jsonl --------------------------------------------------------------------

TEST_F(Connectors, AJsonlReplayKilledHalfwayResumesWithEachLineOnce) {
  use_files("connectors");
  auto path = dir_ + "/replay.jsonl";
  std::string file;
  std::vector<size_t> ends; // offset after each line
  for (int i = 1; i <= 20; ++i) {
    // No idempotency key: each line's identity is its place in the file.
    file += R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
            R"("provider":"internal","endpoint_identity":"replay"},)"
            R"("event":{"external_event_id":"e)"
            + std::to_string(i)
            + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
              R"("sender":{"identity":"user-1"},)"
              R"("payload":{"raw":{},"normalized_text":"line )"
            + std::to_string(i) + R"( of the replay"}})" + "\n";
    ends.push_back(file.size());
  }
  write_file(path, file);
  auto cfg = config("[[connector]]\nname = \"replay\"\ntype = \"jsonl\"\n"
                    "path = \""
                    + path + "\"\nmax_in_flight = 2\npoll_ms = 50\n");
  // Ten commits of two lines; the fifth one is the last.
  launch_doomed(cfg, {{"BUTLERS_FAULT", "connector_after_commit=5"}});
  ASSERT_TRUE(died_by_fault());
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 10);
  EXPECT_EQ(text("SELECT value FROM connector_checkpoints WHERE connector = "
                 "'replay'"),
            R"({"line":8,"offset":)" + std::to_string(ends[7]) + "}")
    << "stored after the fourth commit, not the fifth";
  ASSERT_TRUE(start_node(cfg));
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM connector_checkpoints WHERE value = "
                   "'{\"line\":20,\"offset\":"
                   + std::to_string(file.size()) + "}'")
             == 1;
    },
    30s));
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 20);
  EXPECT_EQ(count("SELECT count(DISTINCT normalized_text) FROM message_inbox"),
            20);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_deduped_total", "replay")), 2)
    << "resumed at line 9: the fifth commit's two lines are found, no more";
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total", "replay")),
            10);
  // Appended lines follow, an invalid one is skipped.
  std::ofstream{path, std::ios::app}
    << "{\"not\":\"an envelope\"}\n"
    << R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
       R"("provider":"internal","endpoint_identity":"replay"},)"
       R"("event":{"external_event_id":"e21","observed_at":)"
       R"("2026-11-23T12:00:00Z"},"sender":{"identity":"user-1"},)"
       R"("payload":{"raw":{},"normalized_text":"line 22"}})"
    << "\n";
  ASSERT_TRUE(rows(21));
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(),
                    series("butlers_connector_invalid_total", "replay"))
             == 1;
    },
    20s));
  // Counted when refused, logged once the lines before it are settled.
  EXPECT_TRUE(eventually(
    [&] {
      return node_->log().find("line 21 is not a valid envelope")
             != std::string::npos;
    },
    20s))
    << node_->log();
}

// -- http ---------------------------------------------------------------------

TEST_F(Connectors, TheHttpConnectorHasItsOwnIdentityAndLimit) {
  ASSERT_TRUE(start_node(config("[[connector]]\nname = \"api\"\ntype = "
                                "\"http\"\nendpoint_identity = \"client-7\"\n"
                                "max_in_flight = 1\n")));
  auto envelope = [](const std::string& identity, const std::string& key) {
    return R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
           R"("provider":"internal","endpoint_identity":")"
           + identity + R"("},"event":{"external_event_id":")" + key
           + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
             R"("sender":{"identity":"u"},"payload":{"raw":{},)"
             R"("normalized_text":"hi"},"control":{"idempotency_key":")"
           + key + R"("}})";
  };
  auto ok = http_->post("/v1/connectors/api/ingest",
                        envelope("client-7", "k1"));
  ASSERT_EQ(ok.status, 202) << ok.body;
  auto other = http_->post("/v1/connectors/api/ingest",
                           envelope("someone-else", "k2"));
  EXPECT_EQ(other.status, 400) << other.body;
  EXPECT_NE(other.body.find("/source/endpoint_identity"), std::string::npos);
  EXPECT_EQ(http_->post("/v1/connectors/nope/ingest", envelope("x", "k3"))
              .status,
            404);
  // One in flight at most: hold the writer, the second waits for nothing.
  pqxx::connection locker{url_};
  pqxx::work lock{locker};
  lock.exec("LOCK TABLE inbox_dedupe IN EXCLUSIVE MODE");
  http_response held;
  std::thread first{[&] {
    held = http_client{"127.0.0.1", port_}.post("/v1/connectors/api/ingest",
                                                envelope("client-7", "k4"));
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(), series("butlers_connector_in_flight", "api"))
             == 1;
    },
    20s));
  auto refused = http_->post("/v1/connectors/api/ingest",
                             envelope("client-7", "k5"));
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "1");
  // POST /v1/ingest has its own limit and takes any identity.
  lock.commit();
  first.join();
  EXPECT_EQ(held.status, 202) << held.body;
  EXPECT_EQ(http_->post("/v1/ingest", envelope("someone-else", "k6")).status,
            202);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_refused_total", "api")), 1);
  EXPECT_EQ(metric(m, series("butlers_connector_invalid_total", "api")), 1);
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total", "api")), 2);
}

} // namespace
} // namespace butlers::test
