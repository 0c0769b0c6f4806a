#pragma once

// Connector health and statistics (spec 001 §17.5–§17.7; actors/README.md
// "Connector health and statistics"), the parts without actors: liveness from
// heartbeat age, the stats periods, the rollup kinds and their named
// statements, and the `connector.heartbeat.v1` envelope turned into the
// statement that stores it. The counter deltas are computed in SQL
// (`connector_counter_delta`, sql/0011), under the registry row's lock.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/http_render.hpp"
#include "runtime/messages.hpp"

namespace butlers {

// -- liveness -----------------------------------------------------------------

/// How recently a connector was heard from: `online` under 2 minutes since
/// its last heartbeat, `stale` from 2 to 4 minutes, `offline` beyond (and
/// when it never sent one). Derived when read, never stored; a connector
/// is never deregistered for it.
enum class connector_liveness : uint8_t { online, stale, offline };

/// "online", "stale" or "offline".
const char* to_string(connector_liveness x);

/// The liveness of a connector last heard from `age_s` seconds ago;
/// nullopt (never heard from) is `offline`.
connector_liveness liveness_of(std::optional<double> age_s);

/// Reads the age column of a connector read ("" = NULL = never).
std::optional<double> parse_age(const std::string& text);

/// `{"liveness":"<x>",...object}`: `object` (a JSON object's text) with the
/// liveness as its first member.
std::string with_liveness(connector_liveness x, std::string_view object);

// -- periods ------------------------------------------------------------------

/// The `period` of the stats, summary and fanout endpoints.
enum class stats_period : uint8_t { h24, d7, d30 };

/// "24h", "7d" or "30d".
const char* to_string(stats_period x);

/// Parses "24h", "7d" or "30d"; an absent parameter is `fallback`. Nullopt
/// for anything else, or for a period not in `allowed`.
std::optional<stats_period> parse_stats_period(
  std::optional<std::string_view> text, stats_period fallback,
  bool allow_24h = true);

// -- rollups ------------------------------------------------------------------

/// What a rollup run does (actors/README.md "Connector health and
/// statistics").
enum class rollup_kind : uint8_t {
  /// connector_stats_hourly for the hour containing `at` (partitions of the
  /// heartbeat log are ensured first).
  hourly,
  /// connector_stats_daily for the UTC day containing `at`.
  daily,
  /// connector_fanout_daily for the UTC day containing `at`.
  fanout,
  /// Retention relative to `at`: heartbeat log 7 days (partitions dropped
  /// whole), hourly stats 30 days, daily and fanout stats one year.
  retention,
};

/// "hourly", "daily", "fanout" or "retention".
const char* to_string(rollup_kind x);

/// Parses a rollup kind's name.
std::optional<rollup_kind> parse_rollup_kind(std::string_view text);

/// The named statements of one rollup run at `at` (RFC 3339 text), in the
/// order they must run.
std::vector<named_statement> rollup_statements(rollup_kind kind,
                                               const std::string& at);

/// Logs what one statement of a rollup run returned (spdlog info: the
/// bucket and the rows upserted, each partition dropped and each table
/// pruned, with counts) and returns the same facts as a JSON object.
std::string log_rollup_result(rollup_kind kind, const std::string& at,
                              const named_statement& stmt,
                              const named_result& res);

// -- heartbeats ---------------------------------------------------------------

/// What a heartbeat body became: the statement storing it, or the 4xx
/// that refuses it.
struct heartbeat_parse {
  std::optional<named_statement> stmt;
  http_reply refusal;
};

/// Parses and checks a `connector.heartbeat.v1` body: 400 naming the JSON
/// pointer of each violation (and the first in the message), else the
/// `connector_heartbeat` statement with `received_us` (Unix microseconds)
/// as its arrival time, keyed by the connector so one connector's
/// heartbeats commit in order.
heartbeat_parse parse_heartbeat(std::string_view body, int64_t received_us,
                                size_t max_bytes = 64 * 1024);

/// What an in-process connector reports in its heartbeat.
struct heartbeat_report {
  std::string connector_type;
  std::string endpoint_identity;
  std::string instance_id;
  std::string version;
  /// healthy, degraded or error.
  std::string state = "healthy";
  std::string error_message;
  double uptime_s = 0;
  /// Cumulative counters since the instance started, by name.
  std::vector<std::pair<std::string, uint64_t>> counters;
  /// Unix microseconds.
  int64_t sent_us = 0;
};

/// The `connector.heartbeat.v1` envelope of `r` (what an out-of-process
/// connector would POST).
std::string heartbeat_json(const heartbeat_report& r);

/// 202 for a heartbeat queued for its write, with the server's time (for
/// the connector's clock-drift check).
http_reply heartbeat_accepted_reply(int64_t now_us);

/// 429 (`Retry-After`) when the heartbeat queue is full.
http_reply heartbeat_queue_full_reply();

} // namespace butlers
