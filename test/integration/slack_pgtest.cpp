// Slack in and out, end to end: a real node and PostgreSQL, Events API
// requests signed as Slack signs them POSTed over loopback HTTP to
// /v1/connectors/{name}/events, and the fake Slack Web API
// (test/support/fake_slack.hpp) receiving the messenger's
// chat.postMessage, reactions.add and reactions.remove. Also: refused
// signatures, Slack's retries, a SIGKILL between the commit and the 200,
// malformed and unknown events, a 429 with Retry-After, and an ok:false
// error that is not retried.

#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/fake_slack.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* signing_secret = "8f742231b10e8888abcd99yyyzzz85a5";
constexpr const char* bot_user = "U0LAN0Z89";
constexpr const char* channel = "C123ABC456";

/// One sample of Prometheus text; 0 when absent.
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return 0;
  return std::stod(text.substr(pos + series.size() + 2));
}

std::string string_member(const std::string& body, const std::string& key) {
  auto at = body.find("\"" + key + "\":\"");
  if (at == std::string::npos)
    return {};
  at += key.size() + 4;
  return body.substr(at, body.find('"', at) - at);
}

class SlackEvents : public node_fixture {
 protected:
  fake_slack slack;
  int64_t next_ts = 1732840000;

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

  /// A `general` butler with `runtime`, a slack connector pointing at the
  /// fake, and a slack adapter that replies through it.
  std::string config(const std::string& runtime = "turn_ms = 300\nreply = "
                                                  "\"noted: {prompt}\"\n") {
    use_database("slack");
    return node_head("slack-test", 5)
           + "[switchboard]\nscanner_interval_s = 1\nscanner_grace_s = 1\n"
             "[[butler]]\nname = \"general\"\n[butler.runtime]\n"
           + runtime
           + "[[connector]]\nname = \"slack\"\ntype = \"slack\"\n"
             "endpoint_identity = \""
           + bot_user + "\"\napi_base = \"" + slack.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"slack\"\n"
             "connector = \"slack\"\n";
  }

  std::map<std::string, std::string> env() {
    return {{"BUTLERS_CONNECTOR_SLACK_SIGNING_SECRET", signing_secret},
            {"BUTLERS_CONNECTOR_SLACK_TOKEN", slack.token()}};
  }

  void start() {
    ASSERT_TRUE(start_node(config(), env()));
  }

  /// A fresh message ts.
  std::string ts() {
    return std::to_string(++next_ts) + ".000200";
  }

  /// POSTs `body` to the events route, signed with `secret` at `at`.
  http_response post(const std::string& body,
                     const std::string& secret = signing_secret, int64_t at = 0,
                     int retry = 0) {
    return http_client{"127.0.0.1", port_}.raw(
      signed_slack_request("/v1/connectors/slack/events", body, secret,
                           at == 0 ? slack_now_s() : at, retry));
  }

  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<int64_t>();
  }

  std::string metrics() {
    return http_->get("/metrics").body;
  }

  std::string series(const std::string& name, const std::string& labels = {}) {
    return name + "{connector=\"slack\"" + (labels.empty() ? "" : ",") + labels
           + "}";
  }

  /// Waits until the message's reactions end with `name` alone.
  bool shows(const std::string& msg_ts, const std::string& name) {
    return slack.wait_for(
      [&] {
        return slack.reactions_now(channel, msg_ts)
               == std::vector<std::string>{name};
      },
      30s);
  }
};

// -- in and out ---------------------------------------------------------------

TEST_F(SlackEvents, AnAppMentionIsAnsweredInItsThreadWithEyesThenACheckMark) {
  start();
  auto msg = ts();
  auto r = post(slack_event_callback("app_mention", "Ev0001", channel, msg,
                                     "U061F7AUR",
                                     "<@U0LAN0Z89> my pill at nine"));
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(string_member(r.body, "status"), "accepted") << r.body;
  // Stored before the 200, as Slack sent it.
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE source_channel = "
                  "'slack' AND source_thread_identity = '"
                  + std::string{channel} + ":" + msg + "'"),
            1);
  ASSERT_TRUE(slack.wait_for(
    [&] {
      return slack.posted_to(channel).size() == 1;
    },
    30s))
    << node_->log();
  auto posted = slack.posted_to(channel)[0];
  EXPECT_EQ(posted.text, "noted: my pill at nine");
  EXPECT_EQ(posted.thread_ts, msg) << "the reply starts a thread under it";
  ASSERT_TRUE(shows(msg, "white_check_mark")) << node_->log();
  EXPECT_EQ(slack.added_reactions(channel, msg),
            (std::vector<std::string>{"eyes", "white_check_mark"}));
  // Every call carried the bot token; every send is in the ledger.
  for (auto& c : slack.calls())
    EXPECT_TRUE(c.token_ok) << c.method;
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM outbound_ledger WHERE adapter = "
                   "'slack' AND state = 'sent'")
             == 3;
    },
    10s));
  EXPECT_EQ(count("SELECT count(*) FROM outbound_ledger WHERE kind = "
                  "'message' AND provider_id = '"
                  + posted.ts + "'"),
            1);
}

TEST_F(SlackEvents, AReplyInAThreadIsAnsweredInThatThread) {
  start();
  auto parent = ts();
  auto msg = ts();
  auto r = post(slack_event_callback("message", "Ev0002", channel, msg,
                                     "U061F7AUR", "and at ten?", parent,
                                     R"(,"channel_type":"channel")"));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(slack.wait_for(
    [&] {
      return slack.posted_to(channel).size() == 1;
    },
    30s))
    << node_->log();
  EXPECT_EQ(slack.posted_to(channel)[0].thread_ts, parent);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE "
                  "source_thread_identity = '"
                  + std::string{channel} + ":" + parent + "'"),
            1);
  ASSERT_TRUE(shows(msg, "white_check_mark")) << node_->log();
}

TEST_F(SlackEvents, AFailingButlerShowsTheSpaceInvader) {
  ASSERT_TRUE(start_node(config("turn_ms = 200\nfail_rate = 1.0\n"
                                "fail_class = \"validation_error\"\n"),
                         env()));
  auto msg = ts();
  auto r = post(slack_event_callback("app_mention", "Ev0003", channel, msg,
                                     "U061F7AUR", "<@U0LAN0Z89> hello"));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(shows(msg, "space_invader")) << node_->log();
  EXPECT_EQ(slack.added_reactions(channel, msg),
            (std::vector<std::string>{"eyes", "space_invader"}));
}

// -- refusals -----------------------------------------------------------------

TEST_F(SlackEvents, ABadSignatureAStaleTimestampAndNoSignatureAre401) {
  start();
  auto body = slack_event_callback("app_mention", "Ev0004", channel, ts(),
                                   "U061F7AUR", "<@U0LAN0Z89> hi");
  EXPECT_EQ(post(body, "not-the-secret").status, 401);
  EXPECT_EQ(post(body, signing_secret, slack_now_s() - 301).status, 401);
  EXPECT_EQ(post(body, signing_secret, slack_now_s() + 400).status, 401);
  auto unsigned_request = "POST /v1/connectors/slack/events HTTP/1.1\r\n"
                          "Host: 127.0.0.1\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: "
                          + std::to_string(body.size()) + "\r\n\r\n" + body;
  auto r = http_client{"127.0.0.1", port_}.raw(unsigned_request);
  EXPECT_EQ(r.status, 401) << r.body;
  // A body changed after signing.
  auto signed_other = signed_slack_request("/v1/connectors/slack/events", body,
                                           signing_secret, slack_now_s());
  signed_other.replace(signed_other.find("hi\""), 2, "ho");
  auto changed = http_client{"127.0.0.1", port_}.raw(signed_other);
  EXPECT_EQ(changed.status, 401) << changed.body;
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe"), 0);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_received_total")), 0);
  auto refused = [&](const char* why) {
    return metric(m, series("butlers_connector_slack_unauthorized_total",
                            std::string{"reason=\""} + why + "\""));
  };
  EXPECT_EQ(refused("mismatch"), 2);
  EXPECT_EQ(refused("stale"), 2);
  EXPECT_EQ(refused("missing"), 1);
  // The signed original still passes.
  EXPECT_EQ(post(body).status, 200);
}

TEST_F(SlackEvents, AUrlVerificationIsAnsweredWithItsChallenge) {
  start();
  auto r = post(R"({"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":)"
                R"("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",)"
                R"("type":"url_verification"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(string_member(r.body, "challenge"),
            "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
}

// -- retries ------------------------------------------------------------------

TEST_F(SlackEvents, SlacksRetryOfAnEventIsOneRequest) {
  start();
  auto msg = ts();
  auto body = slack_event_callback("app_mention", "Ev0005", channel, msg,
                                   "U061F7AUR", "<@U0LAN0Z89> buy milk");
  auto first = post(body);
  ASSERT_EQ(first.status, 200) << first.body;
  auto id = string_member(first.body, "request_id");
  ASSERT_EQ(id.size(), 36u) << first.body;
  for (int retry = 1; retry <= 2; ++retry) {
    auto again = post(body, signing_secret, 0, retry);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(string_member(again.body, "status"), "deduped");
    EXPECT_EQ(string_member(again.body, "request_id"), id);
  }
  // The `message` event Slack sends beside the app_mention for the same
  // message is the same request too.
  auto twin = post(slack_event_callback("message", "Ev0006", channel, msg,
                                        "U061F7AUR", "<@U0LAN0Z89> buy milk",
                                        {}, R"(,"channel_type":"channel")"));
  EXPECT_EQ(string_member(twin.body, "status"), "deduped") << twin.body;
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  ASSERT_TRUE(shows(msg, "white_check_mark")) << node_->log();
  EXPECT_EQ(slack.posted_to(channel).size(), 1u);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_accepted_total")), 1);
  EXPECT_EQ(metric(m, series("butlers_connector_deduped_total")), 3);
}

TEST_F(SlackEvents, KilledBetweenTheCommitAndThe200SlacksRetryIsOneRequest) {
  auto cfg = config();
  auto fault_env = env();
  fault_env["BUTLERS_FAULT"] = "connector_after_commit";
  ASSERT_TRUE(start_node(cfg, fault_env));
  auto msg = ts();
  auto body = slack_event_callback("app_mention", "Ev0007", channel, msg,
                                   "U061F7AUR", "<@U0LAN0Z89> call mum");
  auto r = post(body);
  EXPECT_NE(r.status, 200) << "the node died before answering: " << r.body;
  auto exit = node_->wait_exit(20s);
  ASSERT_TRUE(exit) << "the node did not die";
  ASSERT_EQ(exit->signal, SIGKILL) << node_->log();
  node_.reset();
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1)
    << "committed before the process died";
  // Slack saw no 200 and retries, to the restarted node.
  ASSERT_TRUE(start_node(cfg, env()));
  auto retry = post(body, signing_secret, 0, 1);
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(string_member(retry.body, "status"), "deduped");
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  ASSERT_TRUE(shows(msg, "white_check_mark")) << node_->log();
  EXPECT_EQ(slack.posted_to(channel).size(), 1u);
}

// -- what is not taken
// ----------------------------------------------------------

TEST_F(SlackEvents, MalformedAndUnknownEventsAreAnsweredCountedAndHarmless) {
  start();
  const std::string invalid[] = {
    "not json at all",
    "[1,2,3]",
    R"({"type":"event_callback"})",
    R"({"type":"event_callback","event":{"type":"message","text":"x"}})",
    R"({"type":"event_callback","event":{"type":"app_mention","user":"U1",)"
    R"("channel":"C1","ts":"yesterday","text":"x"}})",
    R"({"type":"event_callback","event":{"type":"message","user":"U1",)"
    R"("channel":"C1","ts":"1.2","text":{"a":1}}})",
    R"({"type":"url_verification"})",
    std::string(70, '[') + std::string(70, ']'),
  };
  for (auto& body : invalid) {
    auto r = post(body);
    EXPECT_EQ(r.status, 200) << body << ": " << r.body;
    EXPECT_EQ(string_member(r.body, "status"), "invalid") << r.body;
  }
  auto at = ts();
  const std::pair<std::string, std::string> ignored[] = {
    {"bot", slack_event_callback("message", "Ev1", channel, at, "U999",
                                 "from a bot", {}, R"(,"bot_id":"B123")")},
    {"bot", slack_event_callback("message", "Ev2", channel, ts(), bot_user,
                                 "my own words")},
    {"edit",
     slack_event_callback("message", "Ev3", channel, ts(), "U1", "edited", {},
                          R"(,"subtype":"message_changed")")},
    {"deletion", slack_event_callback("message", "Ev4", channel, ts(), "U1", "",
                                      {}, R"(,"subtype":"message_deleted")")},
    {"other",
     slack_event_callback("reaction_added", "Ev5", channel, ts(), "U1", "")},
    {"other",
     slack_event_callback("message", "Ev6", channel, ts(), "U1", "joined", {},
                          R"(,"subtype":"channel_join")")},
    {"other", R"({"type":"app_rate_limited","minute_rate_limited":1})"},
  };
  for (auto& [why, body] : ignored) {
    auto r = post(body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(string_member(r.body, "status"), "ignored") << why << r.body;
  }
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
  auto m = metrics();
  EXPECT_EQ(metric(m, series("butlers_connector_invalid_total")),
            std::size(invalid));
  EXPECT_EQ(metric(m, series("butlers_connector_ignored_total")),
            std::size(ignored));
  auto by = [&](const char* why) {
    return metric(m, series("butlers_connector_slack_ignored_total",
                            std::string{"reason=\""} + why + "\""));
  };
  EXPECT_EQ(by("bot"), 2);
  EXPECT_EQ(by("edit"), 1);
  EXPECT_EQ(by("deletion"), 1);
  EXPECT_EQ(by("other"), 3);
  // Still serving, and a good event after all that is stored.
  EXPECT_EQ(http_->get("/healthz").status, 200);
  auto r = post(slack_event_callback("app_mention", "Ev7", channel, ts(),
                                     "U061F7AUR", "<@U0LAN0Z89> still here?"));
  EXPECT_EQ(string_member(r.body, "status"), "accepted") << r.body;
}

// -- the Web API's answers ----------------------------------------------------

TEST_F(SlackEvents, TooManyRequestsIsHonouredAndNotInChannelIsNotRetried) {
  slack.inject("chat.postMessage", slack_fault::rate_limited(1));
  start();
  auto msg = ts();
  auto sent_at = std::chrono::steady_clock::now();
  ASSERT_EQ(post(slack_event_callback("app_mention", "Ev0008", channel, msg,
                                      "U061F7AUR", "<@U0LAN0Z89> one"))
              .status,
            200);
  ASSERT_TRUE(slack.wait_for(
    [&] {
      return slack.posted_to(channel).size() == 1;
    },
    30s))
    << node_->log();
  EXPECT_GE(std::chrono::steady_clock::now() - sent_at, 1s)
    << "Retry-After: 1 was not waited for";
  EXPECT_EQ(slack.count("chat.postMessage"), 2u);
  // not_in_channel is for good: each send is tried once (never retried),
  // dead-lettered, and the request ends errored, showing the invader.
  slack.inject("chat.postMessage", slack_fault::error_of("not_in_channel"), 10);
  auto before = slack.count("chat.postMessage");
  auto other = ts();
  ASSERT_EQ(post(slack_event_callback("app_mention", "Ev0009", "C999", other,
                                      "U061F7AUR", "<@U0LAN0Z89> two"))
              .status,
            200);
  ASSERT_TRUE(slack.wait_for(
    [&] {
      return slack.reactions_now("C999", other)
             == std::vector<std::string>{"space_invader"};
    },
    30s))
    << node_->log();
  EXPECT_TRUE(slack.posted_to("C999").empty());
  // Every message send (the reply, then the error reply) ends dead after
  // exactly one call each.
  auto sends_settled = [&] {
    auto dead = count("SELECT count(*) FROM outbound_ledger WHERE kind = "
                      "'message' AND state = 'dead'");
    auto open = count("SELECT count(*) FROM outbound_ledger WHERE kind = "
                      "'message' AND state = 'sending'");
    return dead >= 1 && open == 0
           && static_cast<int64_t>(slack.count("chat.postMessage") - before)
                == dead;
  };
  EXPECT_TRUE(eventually(sends_settled, 10s)) << "one attempt per send";
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec1("SELECT lifecycle_state, coalesce(error_class, '') "
                      "FROM message_inbox WHERE source_thread_identity = "
                      "'C999:"
                      + other + "'");
  EXPECT_EQ(row[0].as<std::string>(), "errored");
  EXPECT_EQ(row[1].as<std::string>(), "target_unavailable");
}

} // namespace
} // namespace butlers::test
