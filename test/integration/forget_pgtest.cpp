// Forgetting one person (runtime/forget.md) against a real node process,
// real PostgreSQL, real HTTP and the fake Bot API: markers go through the
// real pipeline (a Telegram photo with a caption, an HTTP ingest, a thread
// turn; a scripted butler that keeps the text in its state through its
// tools and replies through the ledger), then a forget — from the command
// line for the Telegram sender, over the operator API for the API sender —
// and a search of EVERY text, json, jsonb, bytea and array column of EVERY
// table (read from information_schema, so a table added later is searched
// too) finds neither their markers nor their identities, while another
// sender's stay where they were. A second forget erases nothing and changes
// nothing. A run in flight when its person is forgotten sends nothing and
// stores nothing through its tools. The API's refusals name the field.

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/inbox_store.hpp"
#include "runtime/json.hpp"
#include "runtime/migrations.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string random_hex(size_t n) {
  std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  while (out.size() < n) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(rng()));
    out += buf;
  }
  return out.substr(0, n);
}

/// Where `needle` occurs: "table.column" → rows, over every searchable
/// column of every table of the schema.
std::map<std::string, int64_t> where(const std::string& url,
                                     const std::string& needle) {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  auto cols = tx.exec(
    "SELECT c.table_name, c.column_name, c.data_type "
    "FROM information_schema.columns c "
    "JOIN information_schema.tables t "
    "  ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
    "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
    "  AND c.data_type IN ('text', 'character varying', 'character', 'json', "
    "                      'jsonb', 'bytea', 'ARRAY', 'USER-DEFINED') "
    "ORDER BY 1, 2");
  std::map<std::string, int64_t> out;
  for (auto row : cols) {
    auto table = row[0].as<std::string>();
    auto column = row[1].as<std::string>();
    auto type = row[2].as<std::string>();
    auto col = tx.quote_name(column);
    auto test = type == "bytea"
                  ? "position(convert_to($1, 'UTF8') in " + col + ") > 0"
                  : "strpos(" + col + "::text, $1) > 0";
    auto n = tx.exec_params1("SELECT count(*) FROM " + tx.quote_name(table)
                               + " WHERE " + test,
                             needle)[0]
               .as<int64_t>();
    if (n > 0)
      out[table + "." + column] = n;
  }
  return out;
}

/// Every row of every table but the forget's audit, hashed: what a forget
/// that erases nothing must leave as it was.
std::string fingerprint(const std::string& url) {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  auto tables = tx.exec(
    "SELECT table_name FROM information_schema.tables "
    "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
    "  AND table_name NOT IN ('forget_audit') ORDER BY 1");
  std::string out;
  for (auto row : tables) {
    auto t = tx.quote_name(row[0].as<std::string>());
    out += row[0].as<std::string>() + "="
           + tx.exec1("SELECT coalesce(md5(string_agg(x::text, '|' ORDER BY "
                      "x::text)), '') FROM "
                      + t + " x")[0]
               .as<std::string>()
           + "\n";
  }
  return out;
}

std::string describe(const std::map<std::string, int64_t>& m) {
  std::string out;
  for (auto& [k, v] : m)
    out += k + "=" + std::to_string(v) + " ";
  return out.empty() ? "(nowhere)" : out;
}

rapidjson::Document parse(const std::string& body) {
  rapidjson::Document d;
  EXPECT_FALSE(json::parse(body, d)) << body;
  return d;
}

class Forget : public node_fixture {
 protected:
  fake_telegram tg;
  std::string run_id = random_hex(8);
  // Markers: the Telegram sender's and the API sender's (to be
  // forgotten), and the other people's (to stay).
  std::string tg_marker = "tgmark" + random_hex(12);
  std::string api_marker = "apimark" + random_hex(12);
  std::string other_tg_marker = "othertg" + random_hex(12);
  std::string other_api_marker = "otherapi" + random_hex(12);
  int64_t tg_user = 8800000000 + (std::random_device{}() % 99999);
  int64_t other_tg_user = tg_user + 100000;
  std::string api_user = "alice-" + random_hex(10);
  std::string other_api_user = "bob-" + random_hex(10);
  int64_t next_update = 51000;

  void SetUp() override {
    use_database("forget");
    use_files("forget");
  }

  std::string config(int turn_ms = 10, int sessions = 4) {
    // The butler keeps what it was asked in its per-sender state, through
    // the tool server, and says it back.
    auto tool = json::quote(R"({"name":"state_put","arguments":)"
                            R"({"key":"note","value":"{prompt}",)"
                            R"("scope":"sender"}})");
    return node_head("forget-test", 5, "request_timeout_ms = 20000\n")
           + "[tools]\nrecord_arguments = true\n"
             "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = "
           + std::to_string(sessions)
           + "\n[butler.runtime]\nkind = \"scripted\"\nturn_ms = "
           + std::to_string(turn_ms) + "\ntool_calls = [" + tool
           + "]\n[[connector]]\nname = \"bot\"\ntype = \"telegram\"\n"
             "endpoint_identity = \"forget_test_bot\"\nmode = \"poll\"\n"
             "poll_timeout_s = 1\napi_base = \""
           + tg.base_url()
           + "\"\n[[messenger.adapter]]\nkind = \"telegram\"\n"
             "connector = \"bot\"\n"
             "[[messenger.adapter]]\nkind = \"outbox\"\nchannels = [\"api\"]\n"
             "path = \""
           + dir_ + "/outbox.jsonl\"\n";
  }

  void start(int turn_ms = 10, int sessions = 4) {
    ASSERT_TRUE(start_node(config(turn_ms, sessions),
                           {{"BUTLERS_CONNECTOR_BOT_TOKEN", tg.token()}}));
  }

  /// A Telegram message from `user`: a photo whose bytes hold `marker`,
  /// with `marker` in its caption. Waits for the reply that quotes it.
  void telegram_photo(int64_t user, const std::string& marker,
                      bool wait_reply = true) {
    auto id = next_update++;
    auto file = "photo-" + std::to_string(id);
    std::string bytes = "\xff\xd8 jpeg bytes " + marker + " " + random_hex(64);
    tg.add_file(file, bytes);
    tg.push_update(
      R"({"update_id":)" + std::to_string(id) + R"(,"message":{"message_id":)"
      + std::to_string(id) + R"(,"from":{"id":)" + std::to_string(user)
      + R"(,"is_bot":false,"first_name":"P"},"chat":{"id":)"
      + std::to_string(user)
      + R"(,"type":"private"},"date":1795000000,"caption":")" + marker
      + R"(","photo":[{"file_id":")" + file
      + R"(","file_unique_id":"u","width":640,"height":480,"file_size":)"
      + std::to_string(bytes.size()) + "}]}}");
    if (wait_reply) {
      EXPECT_TRUE(sent(marker)) << node_->log();
    }
  }

  /// Waits until a message quoting `marker` went to Telegram.
  bool sent(const std::string& marker) {
    return tg.wait_for(
      [&](const std::vector<telegram_call>& calls) {
        for (auto& c : calls)
          if (c.method == "sendMessage"
              && c.params_json.find(marker) != std::string::npos)
            return true;
        return false;
      },
      stretched(30s));
  }

  /// Messages to Telegram quoting `marker`, so far.
  size_t sent_now(const std::string& marker) {
    size_t n = 0;
    for (auto& c : tg.calls("sendMessage"))
      n += c.params_json.find(marker) != std::string::npos ? 1 : 0;
    return n;
  }

  /// An HTTP ingest from `user` on the api channel; waits until parsed.
  void api_message(const std::string& user, const std::string& marker) {
    auto r = http_->post(
      "/v1/ingest",
      R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
      R"("provider":"internal","endpoint_identity":"forget-test"},)"
      R"("event":{"external_event_id":")"
        + random_hex(16)
        + R"(","observed_at":"2026-11-29T12:00:00Z"},"sender":{"identity":")"
        + user + R"("},"payload":{"raw":{},"normalized_text":"please note )"
        + marker + R"("}})");
    ASSERT_EQ(r.status, 202) << r.body;
    auto id = std::string{parse(r.body)["request_id"].GetString()};
    EXPECT_TRUE(eventually(
      [&] {
        return scalar("SELECT count(*) FROM message_inbox WHERE request_id = '"
                      + id + "' AND lifecycle_state = 'parsed'")
               == 1;
      },
      stretched(30s)))
      << node_->log();
  }

  /// A thread turn from `user`; waits for the run's answer.
  void thread_turn(const std::string& user, const std::string& marker) {
    auto thread = "t-" + user;
    auto r = http_->post("/v1/threads/" + thread + "/turns",
                         R"({"message_id":"m1","text":"thread )" + marker
                           + R"(","sender":")" + user + R"("})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(eventually(
      [&] {
        return scalar("SELECT count(*) FROM thread_transcript WHERE "
                      "thread_id = '"
                      + thread + "' AND role = 'assistant'")
               == 1;
      },
      stretched(30s)))
      << node_->log();
  }

  int64_t scalar(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int64_t>();
  }

  /// `butlers-node forget` for `sender`, on this test's database.
  process_result cli_forget(const std::string& sender) {
    auto path = dir_ + "/cli.toml";
    std::ofstream{path} << "[node]\nname = \"forget-cli\"\n";
    return run_process({BUTLERS_NODE_BINARY, "forget", "--config", path,
                        "--sender", sender, "--who", "test-operator", "--why",
                        "the person asked to be forgotten", "--batch", "2"},
                       {{"BUTLERS_DATABASE_URL", url_}}, stretched(60s));
  }

  http_response api_forget(const std::string& body) {
    return http_->post("/v1/operator/forget", body);
  }

  /// Puts every marker through the pipeline.
  void feed() {
    telegram_photo(tg_user, tg_marker);
    telegram_photo(other_tg_user, other_tg_marker);
    api_message(api_user, api_marker);
    api_message(other_api_user, other_api_marker);
    thread_turn(api_user, api_marker);
    thread_turn(other_api_user, other_api_marker);
  }
};

TEST_F(Forget, LeavesNoTextOfTheSenderInAnyTableAndKeepsEveryoneElses) {
  start();
  feed();
  // Before: the markers are where the pipeline put them.
  auto tg_before = where(url_, tg_marker);
  for (auto t :
       {"message_inbox.raw_payload", "message_inbox.normalized_text",
        "route_work.envelope", "butler_state.value", "tool_calls.arguments",
        "attachments.data", "fanout_execution_log.prompt"})
    EXPECT_TRUE(tg_before.count(t)) << t << ": " << describe(tg_before);
  auto api_before = where(url_, api_marker);
  for (auto t : {"message_inbox.normalized_text", "thread_transcript.body",
                 "route_work.envelope", "butler_state.value"})
    EXPECT_TRUE(api_before.count(t)) << t << ": " << describe(api_before);
  auto other_tg = where(url_, other_tg_marker);
  auto other_api = where(url_, other_api_marker);
  EXPECT_TRUE(other_tg.count("attachments.data")) << describe(other_tg);
  EXPECT_TRUE(other_api.count("thread_transcript.body")) << describe(other_api);

  // The Telegram sender from the command line, while the node runs, in
  // transactions of two requests.
  auto cli = cli_forget("telegram:" + std::to_string(tg_user));
  ASSERT_EQ(cli.exit_code, 0) << cli.out << cli.err;
  auto report = parse(cli.out);
  EXPECT_GE(report["requests"].GetInt64(), 1) << cli.out;
  EXPECT_GE(report["counts"]["message_inbox"].GetInt64(), 1) << cli.out;
  EXPECT_EQ(report["counts"]["attachments"].GetInt64(), 1) << cli.out;
  EXPECT_GE(report["counts"]["butler_state"].GetInt64(), 1) << cli.out;
  EXPECT_GE(report["counts"]["outbound_ledger"].GetInt64(), 1) << cli.out;

  // The API sender over the operator API.
  auto r = api_forget(R"({"sender":"api:)" + api_user
                      + R"(","who":"test-operator","why":"erasure request"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto api_report = parse(r.body);
  EXPECT_GE(api_report["counts"]["thread_transcript"].GetInt64(), 2) << r.body;
  EXPECT_EQ(api_report["counts"]["threads"].GetInt64(), 1) << r.body;

  // After: nothing of theirs, anywhere; the others' exactly as before.
  EXPECT_EQ(describe(where(url_, tg_marker)), "(nowhere)");
  EXPECT_EQ(describe(where(url_, api_marker)), "(nowhere)");
  EXPECT_EQ(describe(where(url_, std::to_string(tg_user))), "(nowhere)");
  EXPECT_EQ(describe(where(url_, api_user)), "(nowhere)");
  EXPECT_EQ(where(url_, other_tg_marker), other_tg);
  EXPECT_EQ(where(url_, other_api_marker), other_api);

  // Audited without the text or the identity; counted.
  EXPECT_EQ(scalar("SELECT count(*) FROM forget_audit WHERE state = 'done' "
                   "AND total > 0 AND counts ? 'message_inbox' "
                   "AND who = 'test-operator'"),
            2);
  auto metrics = http_->get("/metrics").body;
  EXPECT_NE(metrics.find("butlers_forget_total{outcome=\"done\"} 1"),
            std::string::npos)
    << metrics;
  EXPECT_NE(metrics.find("butlers_forget_rows_total{table=\"message_inbox\"}"),
            std::string::npos);

  // Again: nothing found, nothing erased, nothing changed but the audit.
  auto before = fingerprint(url_);
  auto again = cli_forget("telegram:" + std::to_string(tg_user));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(parse(again.out)["total"].GetInt64(), 0) << again.out;
  EXPECT_EQ(parse(again.out)["requests"].GetInt64(), 0) << again.out;
  auto r2 = api_forget(R"({"sender":"api:)" + api_user
                       + R"(","who":"test-operator","why":"again"})");
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(parse(r2.body)["total"].GetInt64(), 0) << r2.body;
  EXPECT_EQ(fingerprint(url_), before);
  EXPECT_EQ(scalar("SELECT count(*) FROM forget_audit WHERE state = 'done' "
                   "AND total = 0 AND counts = '{}'"),
            2);

  // The node still serves the others, and the forgotten may come back.
  api_message(other_api_user, other_api_marker + "-later");
  telegram_photo(tg_user, tg_marker + "-later");
}

TEST_F(Forget, TheOperatorApiNamesWhatIsWrong) {
  start();
  auto expect_400 = [&](const std::string& body, const std::string& field) {
    auto r = api_forget(body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
  };
  expect_400(R"({"sender":"telegram-123","who":"op","why":"w"})", "sender:");
  expect_400(R"({"sender":"fax:123","who":"op","why":"w"})", "unknown channel");
  expect_400(R"({"sender":"telegram:","who":"op","why":"w"})", "sender:");
  expect_400(R"({"who":"op","why":"w"})", "sender: required");
  expect_400(R"({"sender":"telegram:1","why":"w"})", "who:");
  expect_400(R"({"sender":"telegram:1","who":"op","why":""})", "why:");
  expect_400(R"({"sender":"telegram:1","who":"op","why":"w","x":1})",
             "unknown field 'x'");
  expect_400(R"({"sender":"telegram:1","who":"op","why":"w","batch":0})",
             "batch:");
  expect_400("[1]", "JSON object");
  EXPECT_EQ(http_->get("/v1/operator/forget").status, 404);
  EXPECT_EQ(scalar("SELECT count(*) FROM forget_audit"), 0);
  // The command line refuses the same with exit code 2.
  auto cli = cli_forget("nochannel");
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_NE(cli.err.find("sender:"), std::string::npos) << cli.err;
}

// A run in flight when its person is forgotten is let finish, but its
// reply is not sent and its tools store nothing; what its end stored (the
// delivery of the reply) goes with the next forget, which then leaves
// nothing of the person anywhere.
TEST_F(Forget, ARunInFlightSendsNothingAndTheNextForgetLeavesNothing) {
  // One session at a time: the other person's message runs only once the
  // forgotten person's session has ended.
  start(2000, 1);
  telegram_photo(tg_user, tg_marker, false);
  ASSERT_TRUE(eventually(
    [&] {
      return scalar("SELECT count(*) FROM route_work w JOIN message_inbox m "
                    "ON m.request_id = w.request_id WHERE w.state = "
                    "'running' AND m.source_sender_identity = '"
                    + std::to_string(tg_user) + "'")
             == 1;
    },
    stretched(30s)))
    << node_->log();
  auto cli = cli_forget("telegram:" + std::to_string(tg_user));
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(parse(cli.out)["in_flight"].GetInt64(), 1) << cli.out;
  telegram_photo(other_tg_user, other_tg_marker);
  EXPECT_EQ(sent_now(tg_marker), 0u);
  EXPECT_TRUE(where(url_, other_tg_marker).count("butler_state.value"));
  // The forgotten run's tools stored nothing.
  EXPECT_FALSE(where(url_, tg_marker).count("butler_state.value"))
    << describe(where(url_, tg_marker));
  EXPECT_FALSE(where(url_, tg_marker).count("tool_calls.arguments"));
  auto again = cli_forget("telegram:" + std::to_string(tg_user));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(describe(where(url_, tg_marker)), "(nowhere)") << again.out;
  EXPECT_EQ(describe(where(url_, std::to_string(tg_user))), "(nowhere)");
  EXPECT_EQ(sent_now(tg_marker), 0u);
}

// A reply still owed when its request was forgotten is not sent: the
// ledger answers 'skipped' and records nothing; a run whose thread was
// forgotten stores no answer (and does not fail its batch); its tools
// store nothing.
TEST(ForgetGuards, TheLedgerTranscriptAndToolsRefuseForgottenRequests) {
  auto url = fresh_database("forget_guards");
  pqxx::connection conn{url};
  apply_migrations(conn);
  pqxx::work tx{conn};
  auto id = std::string{"0190a0a0-0000-7000-8000-000000000001"};
  tx.exec_params("INSERT INTO forget_tombstones (request_id) VALUES ($1)", id);
  auto r = run_named(tx, named_statement{"outbound_ledger_begin",
                                         {id, "notify", "0", "telegram",
                                          "message", "0", ""}});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], "skipped");
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM outbound_ledger")[0].as<int>(), 0);
  auto other = std::string{"0190a0a0-0000-7000-8000-000000000002"};
  r = run_named(tx, named_statement{"outbound_ledger_begin",
                                    {other, "notify", "0", "telegram",
                                     "message", "0", ""}});
  EXPECT_EQ(r.rows[0][0], "");
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM outbound_ledger")[0].as<int>(), 1);
  r = run_named(tx, named_statement{"thread_reply_insert",
                                    {"gone-thread", id, "general", "reply",
                                     "text", "", "ok", ""}});
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM thread_transcript")[0].as<int>(), 0);
  // Its session's tools store nothing: state, tool calls, reminders.
  auto work = std::string{"0190a0a0-0000-7000-8000-000000000003"};
  r = run_named(tx, named_statement{"state_put",
                                    {"general", "sender:telegram:1", "k",
                                     R"("v")", "-1", id}});
  EXPECT_EQ(r.rows.at(0).at(0), "0");
  run_named(tx, named_statement{"tool_call_insert",
                                {id, work, "general", "state_put", "ok", "1",
                                 "{}"}});
  r = run_named(tx, named_statement{"reminder_insert",
                                    {work, "general", "1795000000000", "p",
                                     "telegram", "bot", "1", "", id, work}});
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(tx.exec1("SELECT (SELECT count(*) FROM butler_state) + (SELECT "
                     "count(*) FROM tool_calls) + (SELECT count(*) FROM "
                     "butler_reminders)")[0]
              .as<int>(),
            0);
  // Another request's do.
  r = run_named(tx, named_statement{"state_put",
                                    {"general", "sender:telegram:1", "k",
                                     R"("v")", "-1", other}});
  EXPECT_EQ(r.rows.at(0).at(0), "1");
}

} // namespace
} // namespace butlers::test
