// Connector health and statistics without a database: liveness from the
// heartbeat's age, the stats periods, the rollup kinds and their
// statements, and heartbeat bodies checked against connector.heartbeat.v1
// (the statement they become, the 400 naming the field). The counter
// deltas are SQL (connector_counter_delta) and are shown by
// connector_stats_pgtest.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/connector_stats.hpp"
#include "runtime/json.hpp"

namespace butlers {
namespace {

TEST(ConnectorLiveness, OnlineUnderTwoMinutesStaleToFourOfflineBeyond) {
  EXPECT_EQ(liveness_of(0.0), connector_liveness::online);
  EXPECT_EQ(liveness_of(30.0), connector_liveness::online);
  EXPECT_EQ(liveness_of(119.9), connector_liveness::online);
  EXPECT_EQ(liveness_of(120.0), connector_liveness::stale);
  EXPECT_EQ(liveness_of(180.0), connector_liveness::stale);
  EXPECT_EQ(liveness_of(240.0), connector_liveness::stale);
  EXPECT_EQ(liveness_of(240.5), connector_liveness::offline);
  EXPECT_EQ(liveness_of(600.0), connector_liveness::offline);
  EXPECT_EQ(liveness_of(std::nullopt), connector_liveness::offline);
  // A clock a little ahead of the database's: still online.
  EXPECT_EQ(liveness_of(-2.0), connector_liveness::online);
  EXPECT_STREQ(to_string(connector_liveness::stale), "stale");
}

TEST(ConnectorLiveness, AgeColumnAndTheObjectItIsAddedTo) {
  EXPECT_FALSE(parse_age(""));
  EXPECT_DOUBLE_EQ(*parse_age("12.5"), 12.5);
  EXPECT_EQ(with_liveness(connector_liveness::online, R"({"a":1})"),
            R"({"liveness":"online","a":1})");
  EXPECT_EQ(with_liveness(connector_liveness::offline, "{}"),
            R"({"liveness":"offline"})");
}

TEST(StatsPeriod, TakesTheThreePeriodsOrTheFallback) {
  EXPECT_EQ(parse_stats_period(std::nullopt, stats_period::h24),
            stats_period::h24);
  EXPECT_EQ(parse_stats_period(std::string_view{"24h"}, stats_period::d7),
            stats_period::h24);
  EXPECT_EQ(parse_stats_period(std::string_view{"7d"}, stats_period::h24),
            stats_period::d7);
  EXPECT_EQ(parse_stats_period(std::string_view{"30d"}, stats_period::h24),
            stats_period::d30);
  EXPECT_FALSE(parse_stats_period(std::string_view{"1y"}, stats_period::h24));
  EXPECT_FALSE(parse_stats_period(std::string_view{""}, stats_period::h24));
  // Fanout has no 24h.
  EXPECT_FALSE(
    parse_stats_period(std::string_view{"24h"}, stats_period::d7, false));
  EXPECT_STREQ(to_string(stats_period::d30), "30d");
}

TEST(Rollups, KindsAndTheirStatementsInOrder) {
  EXPECT_EQ(parse_rollup_kind("hourly"), rollup_kind::hourly);
  EXPECT_EQ(parse_rollup_kind("retention"), rollup_kind::retention);
  EXPECT_FALSE(parse_rollup_kind("weekly"));
  auto hourly = rollup_statements(rollup_kind::hourly, "2026-11-26T10:00:00Z");
  ASSERT_EQ(hourly.size(), 2u);
  EXPECT_EQ(hourly[0].query, "connector_partitions_ensure");
  EXPECT_EQ(hourly[1].query, "connector_rollup_hourly");
  EXPECT_EQ(hourly[1].params, std::vector<std::string>{"2026-11-26T10:00:00Z"});
  auto prune = rollup_statements(rollup_kind::retention, "x");
  EXPECT_EQ(prune.back().query, "connector_stats_prune");
  named_result res;
  res.ok = true;
  res.rows = {{"drop_partition", "connector_heartbeat_log_202001", "3"}};
  auto out = log_rollup_result(rollup_kind::retention, "x", prune.back(), res);
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(out, d)) << out;
  EXPECT_EQ(d["rows"][0]["removed"].GetInt(), 3);
}

heartbeat_report report() {
  heartbeat_report r;
  r.connector_type = "telegram";
  r.endpoint_identity = "bot-1";
  r.instance_id = "i-1";
  r.counters = {{"messages_ingested", 10}, {"messages_failed", 1}};
  r.uptime_s = 12;
  r.sent_us = 1'764'000'000'000'000;
  return r;
}

TEST(Heartbeat, AValidBodyBecomesTheStatementKeyedByConnector) {
  auto parsed = parse_heartbeat(heartbeat_json(report()), 77);
  ASSERT_TRUE(parsed.stmt) << parsed.refusal.body;
  auto& s = *parsed.stmt;
  EXPECT_EQ(s.query, "connector_heartbeat");
  ASSERT_EQ(s.params.size(), 12u);
  EXPECT_EQ(s.params[0], "telegram");
  EXPECT_EQ(s.params[1], "bot-1");
  EXPECT_EQ(s.params[2], "i-1");
  EXPECT_EQ(s.params[4], "healthy");
  EXPECT_EQ(s.params[6], "12");
  EXPECT_EQ(s.params[7], R"({"messages_ingested":10,"messages_failed":1})");
  EXPECT_EQ(s.params[11], "77");
  EXPECT_EQ(s.key, "heartbeat:telegram/bot-1");
}

TEST(Heartbeat, ABadBodyIsRefusedNamingTheField) {
  auto r = report();
  r.endpoint_identity = "";
  auto parsed = parse_heartbeat(heartbeat_json(r), 0);
  ASSERT_FALSE(parsed.stmt);
  EXPECT_EQ(parsed.refusal.status, 400);
  EXPECT_NE(parsed.refusal.body.find("/connector/endpoint_identity"),
            std::string::npos)
    << parsed.refusal.body;
  r = report();
  r.state = "fine";
  parsed = parse_heartbeat(heartbeat_json(r), 0);
  ASSERT_FALSE(parsed.stmt);
  EXPECT_NE(parsed.refusal.body.find("/status/state"), std::string::npos);
  parsed = parse_heartbeat("[1", 0);
  ASSERT_FALSE(parsed.stmt);
  EXPECT_EQ(parsed.refusal.status, 400);
  EXPECT_EQ(heartbeat_queue_full_reply().status, 429);
  EXPECT_TRUE(heartbeat_queue_full_reply().retry_after);
  EXPECT_EQ(heartbeat_accepted_reply(0).status, 202);
}

} // namespace
} // namespace butlers
