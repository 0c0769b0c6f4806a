// Connector health and statistics (actors/README.md "Connector health and
// statistics") against a real node process, real PostgreSQL and real HTTP
// over loopback: heartbeats posted to POST /v1/connectors/heartbeat,
// liveness derived by the real query, counter deltas across a restart,
// rollups run twice giving the same rows, a week-old heartbeat partition
// dropped (and logged) by the retention job, bad bodies refused naming the
// field, and the 202 that does not wait for the write.
//
// Liveness ages: heartbeats arrive now, then a test-only SQL UPDATE
// backdates `connector_registry.last_heartbeat_at` to 30 s, 3 min and
// 10 min ago; what /api/connectors says is the node's real read.

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A connector.heartbeat.v1 body.
std::string heartbeat(const std::string& type, const std::string& identity,
                      const std::string& instance, int64_t ingested,
                      const std::string& state = "healthy",
                      int64_t failed = 0) {
  return R"({"schema_version":"connector.heartbeat.v1",)"
         R"("connector":{"connector_type":")"
         + type + R"(","endpoint_identity":")" + identity
         + R"(","instance_id":")" + instance
         + R"(","version":"1.0.0"},"status":{"state":")" + state
         + R"(","error_message":null,"uptime_s":60},)"
           R"("counters":{"messages_ingested":)"
         + std::to_string(ingested) + R"(,"messages_failed":)"
         + std::to_string(failed)
         + R"(,"source_api_calls":3,"checkpoint_saves":1,)"
           R"("dedupe_accepted":0},)"
           R"("checkpoint":{"cursor":"42","updated_at":"2026-11-26T09:00:00Z"},)"
           R"("sent_at":"2026-11-26T09:00:00Z"})";
}

std::string str(const rapidjson::Value& v, const char* key) {
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

class ConnectorStats : public node_fixture {
 protected:
  void start(const std::string& extra = {}) {
    use_database("connstats");
    ASSERT_TRUE(start_node(
      node_head("connstats-test", 5, "request_timeout_ms = 10000\n") + extra));
  }

  /// One SQL value (first column of the first row; "" for none or NULL).
  std::string sql1(const std::string& q) {
    pqxx::connection c{url_};
    pqxx::work tx{c};
    auto r = tx.exec(q);
    tx.commit();
    if (r.empty() || r[0][0].is_null())
      return {};
    return r[0][0].c_str();
  }

  void sql(const std::string& q) {
    pqxx::connection c{url_};
    pqxx::work tx{c};
    tx.exec(q);
    tx.commit();
  }

  /// Every row of `table` as text, in a stable order.
  std::vector<std::string> rows_of(const std::string& table) {
    pqxx::connection c{url_};
    pqxx::work tx{c};
    std::vector<std::string> out;
    for (auto row :
         tx.exec("SELECT t::text FROM " + table + " t ORDER BY t::text"))
      out.emplace_back(row[0].c_str());
    return out;
  }

  /// Posts a heartbeat and expects 202.
  void beat(const std::string& body) {
    auto r = http_->post("/v1/connectors/heartbeat", body);
    ASSERT_EQ(r.status, 202) << r.body;
  }

  /// Waits until `n` heartbeats of `identity` are in the log.
  bool logged(const std::string& identity, int n) {
    return eventually(
      [&] {
        return sql1("SELECT count(*) FROM connector_heartbeat_log WHERE "
                    "endpoint_identity = '"
                    + identity + "'")
               == std::to_string(n);
      },
      10s);
  }

  rapidjson::Document get_json(const std::string& path, int status = 200) {
    auto r = http_->get(path);
    EXPECT_EQ(r.status, status) << path << ": " << r.body;
    rapidjson::Document d;
    EXPECT_FALSE(json::parse(r.body, d)) << r.body;
    return d;
  }

  /// Runs a rollup through the operator endpoint; returns its body.
  std::string rollup(const std::string& kind, const std::string& at = {}) {
    auto body = R"({"kind":")" + kind + "\""
                + (at.empty() ? std::string{} : R"(,"at":")" + at + "\"") + "}";
    auto r = http_->post("/v1/connectors/rollup", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  }
};

TEST_F(ConnectorStats, ListsConnectorsOnlineStaleAndOfflineByHeartbeatAge) {
  start();
  for (auto id : {"bot-fresh", "bot-quiet", "bot-gone"})
    beat(heartbeat("telegram_bot", id, "i-1", 1));
  for (auto id : {"bot-fresh", "bot-quiet", "bot-gone"})
    ASSERT_TRUE(logged(id, 1));
  // Test-only backdating of the last heartbeat; liveness is the node's read.
  sql("UPDATE connector_registry SET last_heartbeat_at = now() - "
      "CASE endpoint_identity WHEN 'bot-fresh' THEN interval '30 seconds' "
      "WHEN 'bot-quiet' THEN interval '3 minutes' "
      "ELSE interval '10 minutes' END");
  auto d = get_json("/api/connectors");
  ASSERT_TRUE(d.IsObject() && d.HasMember("data") && d["data"].IsArray());
  ASSERT_EQ(d["data"].Size(), 3u);
  EXPECT_EQ(d["meta"]["total"].GetInt(), 3);
  EXPECT_EQ(d["meta"]["offset"].GetInt(), 0);
  EXPECT_FALSE(d["meta"]["has_more"].GetBool());
  std::map<std::string, std::string> liveness;
  for (auto& c : d["data"].GetArray()) {
    liveness[str(c, "endpoint_identity")] = str(c, "liveness");
    EXPECT_EQ(str(c, "state"), "healthy");
    EXPECT_TRUE(c["today"].IsObject());
  }
  EXPECT_EQ(liveness["bot-fresh"], "online");
  EXPECT_EQ(liveness["bot-quiet"], "stale");
  EXPECT_EQ(liveness["bot-gone"], "offline");
  // Paging: the second of three.
  auto page = get_json("/api/connectors?offset=1&limit=1");
  ASSERT_EQ(page["data"].Size(), 1u);
  EXPECT_TRUE(page["meta"]["has_more"].GetBool());
  // Detail, summary, and an unknown connector.
  auto one = get_json("/api/connectors/telegram_bot/bot-quiet");
  EXPECT_EQ(str(one["data"], "liveness"), "stale");
  EXPECT_EQ(str(one["data"], "instance_id"), "i-1");
  EXPECT_EQ(str(one["data"]["checkpoint"], "cursor"), "42");
  auto sum = get_json("/api/connectors/summary?period=24h");
  EXPECT_EQ(sum["data"]["total_connectors"].GetInt(), 3);
  EXPECT_EQ(sum["data"]["connectors_online"].GetInt(), 1);
  EXPECT_EQ(sum["data"]["connectors_stale"].GetInt(), 1);
  EXPECT_EQ(sum["data"]["connectors_offline"].GetInt(), 1);
  get_json("/api/connectors/telegram_bot/nobody", 404);
  // Never deregistered: still three after all this.
  EXPECT_EQ(sql1("SELECT count(*) FROM connector_registry"), "3");
}

TEST_F(ConnectorStats, CounterDeltasSurviveARestartOfTheConnector) {
  start();
  beat(heartbeat("gmail", "me@example.com", "i-1", 10));
  ASSERT_TRUE(logged("me@example.com", 1));
  beat(heartbeat("gmail", "me@example.com", "i-1", 25));
  ASSERT_TRUE(logged("me@example.com", 2));
  // The counter went down: the process restarted and counts from zero.
  beat(heartbeat("gmail", "me@example.com", "i-1", 5));
  ASSERT_TRUE(logged("me@example.com", 3));
  // A new instance with a larger value: all of it is new too.
  beat(heartbeat("gmail", "me@example.com", "i-2", 7));
  ASSERT_TRUE(logged("me@example.com", 4));
  EXPECT_EQ(sql1("SELECT string_agg(delta_messages_ingested::text, ',' "
                 "ORDER BY received_at) FROM connector_heartbeat_log"),
            "10,15,5,7");
  EXPECT_EQ(sql1("SELECT counter_messages_ingested FROM connector_registry"),
            "7");
}

TEST_F(ConnectorStats, RollupsRunTwiceGiveTheSameRows) {
  start();
  beat(heartbeat("imap", "box-1", "i-1", 4));
  ASSERT_TRUE(logged("box-1", 1));
  beat(heartbeat("imap", "box-1", "i-1", 9, "degraded", 2));
  ASSERT_TRUE(logged("box-1", 2));
  beat(heartbeat("imap", "box-2", "i-1", 3));
  ASSERT_TRUE(logged("box-2", 1));
  // A request from connector (api, tests) routed to general, for fanout.
  auto ingest = http_->post(
    "/v1/ingest",
    R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
    R"("provider":"internal","endpoint_identity":"tests"},)"
    R"("event":{"external_event_id":"e-1","observed_at":"2026-11-26T09:00:00Z"},)"
    R"("sender":{"identity":"u-1"},"payload":{"raw":{},)"
    R"("normalized_text":"hello"},"control":{"idempotency_key":"e-1"}})");
  ASSERT_EQ(ingest.status, 202) << ingest.body;
  ASSERT_TRUE(eventually(
    [&] {
      return sql1("SELECT count(*) FROM fanout_execution_log WHERE state IN "
                  "('dispatched', 'ok', 'error')")
             != "0";
    },
    30s));
  auto run_all = [&] {
    rollup("hourly");
    rollup("daily");
    rollup("fanout");
  };
  run_all();
  auto hourly = rows_of("connector_stats_hourly");
  auto daily = rows_of("connector_stats_daily");
  auto fanout = rows_of("connector_fanout_daily");
  ASSERT_EQ(hourly.size(), 2u);
  ASSERT_EQ(daily.size(), 2u);
  ASSERT_EQ(fanout.size(), 1u);
  EXPECT_EQ(sql1("SELECT messages_ingested || '/' || messages_failed || '/' "
                 "|| heartbeat_count || '/' || healthy_count || '/' || "
                 "degraded_count FROM connector_stats_hourly WHERE "
                 "endpoint_identity = 'box-1'"),
            "9/2/2/1/1");
  EXPECT_NE(fanout[0].find("general"), std::string::npos) << fanout[0];
  run_all();
  EXPECT_EQ(rows_of("connector_stats_hourly"), hourly);
  EXPECT_EQ(rows_of("connector_stats_daily"), daily);
  EXPECT_EQ(rows_of("connector_fanout_daily"), fanout);
  // The API reads the rollups.
  auto stats = get_json("/api/connectors/imap/box-1/stats?period=24h");
  EXPECT_EQ(stats["data"]["summary"]["messages_ingested"].GetInt(), 9);
  EXPECT_EQ(stats["data"]["timeseries"].Size(), 1u);
  auto week = get_json("/api/connectors/imap/box-1/stats?period=7d");
  EXPECT_EQ(str(week["data"], "granularity"), "day");
  EXPECT_EQ(week["data"]["timeseries"].Size(), 1u);
  auto fan = get_json("/api/connectors/fanout?period=7d");
  ASSERT_EQ(fan["data"]["matrix"].Size(), 1u);
  EXPECT_EQ(fan["data"]["matrix"][0]["targets"]["general"].GetInt(), 1);
}

TEST_F(ConnectorStats, RetentionDropsAWeekOldPartitionAndLogsIt) {
  start();
  // A partition for a month long past, with one old heartbeat in it.
  sql("CREATE TABLE connector_heartbeat_log_202001 PARTITION OF "
      "connector_heartbeat_log FOR VALUES FROM ('2020-01-01 00:00+00') TO "
      "('2020-02-01 00:00+00')");
  sql("INSERT INTO connector_heartbeat_log (connector_type, "
      "endpoint_identity, state, counter_messages_ingested, "
      "counter_messages_failed, counter_source_api_calls, "
      "counter_checkpoint_saves, counter_dedupe_accepted, "
      "delta_messages_ingested, delta_messages_failed, "
      "delta_source_api_calls, delta_checkpoint_saves, "
      "delta_dedupe_accepted, received_at) VALUES ('old', 'x', 'healthy', "
      "1, 0, 0, 0, 0, 1, 0, 0, 0, 0, '2020-01-15 12:00+00')");
  // And an hourly row past its 30 days.
  sql("INSERT INTO connector_stats_hourly (connector_type, endpoint_identity, "
      "hour) VALUES ('old', 'x', now() - interval '40 days')");
  beat(heartbeat("imap", "box-now", "i-1", 1));
  ASSERT_TRUE(logged("box-now", 1));
  auto body = rollup("retention");
  EXPECT_NE(body.find("connector_heartbeat_log_202001"), std::string::npos)
    << body;
  EXPECT_EQ(sql1("SELECT to_regclass('connector_heartbeat_log_202001')"), "");
  EXPECT_EQ(sql1("SELECT count(*) FROM connector_stats_hourly"), "0");
  // This month's heartbeat is kept.
  EXPECT_EQ(sql1("SELECT count(*) FROM connector_heartbeat_log"), "1");
  EXPECT_TRUE(eventually(
    [&] {
      auto log = node_->log();
      return log.find("connector retention: drop_partition "
                      "connector_heartbeat_log_202001 removed 1 row(s)")
               != std::string::npos
             && log.find("connector retention: delete_rows "
                         "connector_stats_hourly removed 1 row(s)")
                  != std::string::npos;
    },
    5s))
    << node_->log();
  // Safe to re-run: nothing left to remove.
  auto again = rollup("retention");
  EXPECT_EQ(again.find("drop_partition"), std::string::npos) << again;
}

TEST_F(ConnectorStats, BadBodiesAreRefusedNamingTheField) {
  start();
  auto missing = http_->post("/v1/connectors/heartbeat",
                             R"({"schema_version":"connector.heartbeat.v1",)"
                             R"("connector":{"connector_type":"x",)"
                             R"("instance_id":"i"},"status":{"state":)"
                             R"("healthy"},"counters":{"messages_ingested":)"
                             R"(1,"messages_failed":0},)"
                             R"("sent_at":"2026-11-26T09:00:00Z"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("endpoint_identity"), std::string::npos)
    << missing.body;
  EXPECT_NE(missing.body.find("/connector"), std::string::npos) << missing.body;
  auto negative = heartbeat("x", "y", "i", -1);
  auto r = http_->post("/v1/connectors/heartbeat", negative);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("/counters/messages_ingested"), std::string::npos)
    << r.body;
  auto bad_state = heartbeat("x", "y", "i", 1, "fine");
  r = http_->post("/v1/connectors/heartbeat", bad_state);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("/status/state"), std::string::npos) << r.body;
  r = http_->post("/v1/connectors/heartbeat", "{not json");
  EXPECT_EQ(r.status, 400);
  r = http_->get("/api/connectors/summary?period=1y");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("period"), std::string::npos) << r.body;
  r = http_->get("/api/connectors/fanout?period=24h");
  EXPECT_EQ(r.status, 400);
  r = http_->get("/api/connectors?limit=0");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(sql1("SELECT count(*) FROM connector_registry"), "0");
}

TEST_F(ConnectorStats, HeartbeatIsAnsweredBeforeItsWriteAndTheQueueIsBounded) {
  start("[connectors]\nheartbeat_queue = 2\n");
  beat(heartbeat("imap", "box-locked", "i-1", 1));
  ASSERT_TRUE(logged("box-locked", 1));
  // Hold the connector's registry row: its next writes wait for the lock.
  pqxx::connection c{url_};
  pqxx::work tx{c};
  tx.exec("SELECT 1 FROM connector_registry WHERE endpoint_identity = "
          "'box-locked' FOR UPDATE");
  auto t0 = std::chrono::steady_clock::now();
  beat(heartbeat("imap", "box-locked", "i-1", 2));
  beat(heartbeat("imap", "box-locked", "i-1", 3));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  // Both answered while neither is written.
  EXPECT_EQ(sql1("SELECT count(*) FROM connector_heartbeat_log"), "1");
  // The queue (2) is full: the third is refused, counted, retry later.
  auto full = http_->post("/v1/connectors/heartbeat",
                          heartbeat("imap", "box-locked", "i-1", 4));
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.headers["retry-after"], "1");
  tx.abort();
  EXPECT_TRUE(logged("box-locked", 3));
  EXPECT_TRUE(eventually(
    [&] {
      auto m = http_->get("/metrics").body;
      return m.find("butlers_connector_heartbeats_dropped_total 1")
               != std::string::npos
             && m.find("butlers_connector_heartbeats_received_total 3")
                  != std::string::npos;
    },
    5s));
}

TEST_F(ConnectorStats, InProcessConnectorsHeartbeatThroughTheSameQueue) {
  use_files("connstats");
  auto path = dir_ + "/replay.jsonl";
  {
    std::ofstream out{path};
    out << R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
           R"("provider":"internal","endpoint_identity":"replay-file"},)"
           R"("event":{"external_event_id":"e1",)"
           R"("observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":"one line"}})"
        << "\n";
  }
  start("[connectors]\nheartbeat_s = 1\n[[connector]]\nname = \"replay\"\n"
        "type = \"jsonl\"\nendpoint_identity = \"replay-file\"\npath = \""
        + path + "\"\npoll_ms = 50\n");
  // Registered by its first heartbeat; counts the line it stored.
  ASSERT_TRUE(eventually(
    [&] {
      return sql1("SELECT counter_messages_ingested FROM connector_registry "
                  "WHERE connector_type = 'jsonl' AND endpoint_identity = "
                  "'replay-file'")
             == "1";
    },
    20s))
    << node_->log();
  auto one = get_json("/api/connectors/jsonl/replay-file");
  EXPECT_EQ(str(one["data"], "liveness"), "online");
  EXPECT_EQ(str(one["data"], "state"), "healthy");
  // Every heartbeat_s another one.
  EXPECT_TRUE(eventually(
    [&] {
      return std::atoi(sql1("SELECT count(*) FROM connector_heartbeat_log "
                            "WHERE connector_type = 'jsonl'")
                         .c_str())
             >= 3;
    },
    20s));
}

} // namespace
} // namespace butlers::test
