#include "runtime/connector_stats.hpp"

#include <cstdlib>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/schema.hpp"

namespace butlers {

// -- liveness -----------------------------------------------------------------

const char* to_string(connector_liveness x) {
  switch (x) {
    case connector_liveness::online: return "online";
    case connector_liveness::stale: return "stale";
    default: return "offline";
  }
}

connector_liveness liveness_of(std::optional<double> age_s) {
  if (!age_s)
    return connector_liveness::offline;
  if (*age_s < 120)
    return connector_liveness::online;
  if (*age_s <= 240)
    return connector_liveness::stale;
  return connector_liveness::offline;
}

std::optional<double> parse_age(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  char* end = nullptr;
  auto x = std::strtod(text.c_str(), &end);
  if (end == text.c_str())
    return std::nullopt;
  return x;
}

std::string with_liveness(connector_liveness x, std::string_view object) {
  std::string out = R"({"liveness":")";
  out += to_string(x);
  out += '"';
  if (object.size() > 2) {
    out += ',';
    out += object.substr(1);
  } else {
    out += '}';
  }
  return out;
}

// -- periods ------------------------------------------------------------------

const char* to_string(stats_period x) {
  switch (x) {
    case stats_period::h24: return "24h";
    case stats_period::d7: return "7d";
    default: return "30d";
  }
}

std::optional<stats_period> parse_stats_period(
  std::optional<std::string_view> text, stats_period fallback, bool allow_24h) {
  if (!text)
    return fallback;
  if (*text == "24h" && allow_24h)
    return stats_period::h24;
  if (*text == "7d")
    return stats_period::d7;
  if (*text == "30d")
    return stats_period::d30;
  return std::nullopt;
}

// -- rollups ------------------------------------------------------------------

const char* to_string(rollup_kind x) {
  switch (x) {
    case rollup_kind::hourly: return "hourly";
    case rollup_kind::daily: return "daily";
    case rollup_kind::fanout: return "fanout";
    default: return "retention";
  }
}

std::optional<rollup_kind> parse_rollup_kind(std::string_view text) {
  for (auto k : {rollup_kind::hourly, rollup_kind::daily, rollup_kind::fanout,
                 rollup_kind::retention})
    if (text == to_string(k))
      return k;
  return std::nullopt;
}

std::vector<named_statement> rollup_statements(rollup_kind kind,
                                               const std::string& at) {
  // One key for every rollup statement: a node's runs commit in order.
  const std::string key = "connector_stats";
  switch (kind) {
    case rollup_kind::hourly:
      return {named_statement{"connector_partitions_ensure", {at}, key},
              named_statement{"connector_rollup_hourly", {at}, key}};
    case rollup_kind::daily:
      return {named_statement{"connector_rollup_daily", {at}, key}};
    case rollup_kind::fanout:
      return {named_statement{"connector_rollup_fanout", {at}, key}};
    default:
      return {named_statement{"connector_partitions_ensure", {at}, key},
              named_statement{"connector_stats_prune", {at}, key}};
  }
}

std::string log_rollup_result(rollup_kind kind, const std::string& at,
                              const named_statement& stmt,
                              const named_result& res) {
  auto q = json::quote;
  if (!res.ok) {
    spdlog::warn("connector rollup {} at {}: {} failed", to_string(kind), at,
                 stmt.query);
    return R"({"statement":)" + q(stmt.query) + R"(,"ok":false})";
  }
  std::string rows = "[";
  for (auto& row : res.rows) {
    if (stmt.query == "connector_stats_prune" && row.size() >= 3) {
      spdlog::info("connector retention: {} {} removed {} row(s)", row[0],
                   row[1], row[2]);
      if (rows.size() > 1)
        rows += ',';
      rows += R"({"action":)" + q(row[0]) + R"(,"relation":)" + q(row[1])
              + R"(,"removed":)" + row[2] + "}";
    } else if (stmt.query == "connector_partitions_ensure" && !row.empty()) {
      spdlog::info("connector heartbeat log: created partition {}", row[0]);
      if (rows.size() > 1)
        rows += ',';
      rows += R"({"created":)" + q(row[0]) + "}";
    } else if (row.size() >= 2) {
      spdlog::info("connector rollup {}: bucket {} upserted {} row(s)",
                   to_string(kind), row[0], row[1]);
      if (rows.size() > 1)
        rows += ',';
      rows += R"({"bucket":)" + q(row[0]) + R"(,"rows":)" + row[1] + "}";
    }
  }
  if (stmt.query == "connector_stats_prune" && res.rows.empty())
    spdlog::info("connector retention at {}: nothing to remove", at);
  return R"({"statement":)" + q(stmt.query) + R"(,"ok":true,"rows":)" + rows
         + "]}";
}

// -- heartbeats ---------------------------------------------------------------

namespace {

std::string string_at(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject())
    return {};
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsString())
    return {};
  return std::string{i->value.GetString(), i->value.GetStringLength()};
}

const rapidjson::Value& member(const rapidjson::Value& obj, const char* key) {
  static const rapidjson::Value null_value;
  if (!obj.IsObject())
    return null_value;
  auto i = obj.FindMember(key);
  return i == obj.MemberEnd() ? null_value : i->value;
}

std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  v.Accept(w);
  return std::string{buf.GetString(), buf.GetSize()};
}

std::string number_text(const rapidjson::Value& v) {
  if (v.IsUint64())
    return std::to_string(v.GetUint64());
  if (v.IsNumber())
    return to_json(v);
  return {};
}

} // namespace

heartbeat_parse parse_heartbeat(std::string_view body, int64_t received_us,
                                size_t max_bytes) {
  heartbeat_parse out;
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = max_bytes;
  if (auto err = json::parse(body, doc, limits)) {
    out.refusal = validation_reply("body is not valid JSON: " + err->message);
    return out;
  }
  auto xs = schema::get("connector.heartbeat.v1").validate(doc);
  if (!xs.empty()) {
    auto& first = xs.front();
    out.refusal = error_reply(butlers_errc::validation_error,
                              "connector.heartbeat.v1: "
                                + (first.pointer.empty() ? std::string{"/"}
                                                         : first.pointer)
                                + ": " + first.message,
                              violations_json(xs));
    return out;
  }
  auto& conn = member(doc, "connector");
  auto& status = member(doc, "status");
  auto& checkpoint = member(doc, "checkpoint");
  auto type = string_at(conn, "connector_type");
  auto ident = string_at(conn, "endpoint_identity");
  auto key = "heartbeat:" + type + "/" + ident;
  out.stmt = named_statement{"connector_heartbeat",
                             {type, ident, string_at(conn, "instance_id"),
                              string_at(conn, "version"),
                              string_at(status, "state"),
                              string_at(status, "error_message"),
                              number_text(member(status, "uptime_s")),
                              to_json(member(doc, "counters")),
                              string_at(checkpoint, "cursor"),
                              string_at(checkpoint, "updated_at"),
                              string_at(doc, "sent_at"),
                              std::to_string(received_us)},
                             std::move(key)};
  return out;
}

std::string heartbeat_json(const heartbeat_report& r) {
  auto q = json::quote;
  std::string counters = "{";
  for (auto& [name, value] : r.counters) {
    if (counters.size() > 1)
      counters += ',';
    counters += q(name) + ":" + std::to_string(value);
  }
  counters += '}';
  std::string out = R"({"schema_version":"connector.heartbeat.v1",)"
                    R"("connector":{"connector_type":)"
                    + q(r.connector_type) + R"(,"endpoint_identity":)"
                    + q(r.endpoint_identity) + R"(,"instance_id":)"
                    + q(r.instance_id);
  if (!r.version.empty())
    out += R"(,"version":)" + q(r.version);
  out += R"(},"status":{"state":)" + q(r.state) + R"(,"error_message":)"
         + (r.error_message.empty() ? std::string{"null"} : q(r.error_message))
         + R"(,"uptime_s":)" + std::to_string(static_cast<int64_t>(r.uptime_s))
         + R"(},"counters":)" + counters + R"(,"sent_at":)"
         + q(rfc3339_utc(r.sent_us)) + "}";
  return out;
}

http_reply heartbeat_accepted_reply(int64_t now_us) {
  return json_reply(202, R"({"status":"accepted","server_time":)"
                           + json::quote(rfc3339_utc(now_us)) + "}");
}

http_reply heartbeat_queue_full_reply() {
  return error_reply(butlers_errc::overload_rejected,
                     "heartbeat queue is full (connector_stats."
                     "heartbeat_queue); retry later");
}

} // namespace butlers
