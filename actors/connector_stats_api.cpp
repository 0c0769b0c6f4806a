#include "actors/connector_stats_api.hpp"

#include <cstdio>
#include <cstdlib>

#include <rapidjson/document.h>

#include "actors/http_bridge.hpp"
#include "actors/interfaces.hpp"
#include "runtime/api_response.hpp"
#include "runtime/connector_stats.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"

namespace butlers {

namespace {

using answer_fn = std::function<void(http_reply)>;

int64_t unix_us_now() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// A path segment percent-decoded (paths reach us raw); malformed escapes
/// stay as they are.
std::string decoded(std::string_view x) {
  std::string out;
  out.reserve(x.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == '%' && i + 2 < x.size() && hex(x[i + 1]) >= 0
        && hex(x[i + 2]) >= 0) {
      out += static_cast<char>(hex(x[i + 1]) * 16 + hex(x[i + 2]));
      i += 2;
    } else {
      out += x[i];
    }
  }
  return out;
}

/// Reads `stmt` through `reader` and answers `render(result)`; a failed
/// read is answered with the failure.
template<class Render>
void read_then(caf::actor_system& sys, std::chrono::milliseconds timeout,
               db_reader_actor reader, http_responder& out,
               named_statement stmt, Render render) {
  if (!reader)
    return out.now(no_reader_reply());
  answer_fn answer = out.later();
  bridge<named_result>(
    sys, std::move(reader), timeout,
    [answer, render](named_result& r) {
      if (!r.ok)
        return answer(error_reply(butlers_errc::database_unavailable,
                                  "the connector read failed"));
      answer(render(r));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    read_atom_v, std::move(stmt));
}

std::string cell(const std::vector<std::string>& row, size_t i) {
  return i < row.size() ? row[i] : std::string{};
}

std::string connector_key(const path_params& p) {
  return decoded(p["type"]) + "/" + decoded(p["identity"]);
}

http_reply summary_reply(stats_period period, const named_result& r) {
  int64_t by[3] = {0, 0, 0};
  int64_t total_in = 0;
  int64_t total_failed = 0;
  std::string rows = "[";
  for (auto& row : r.rows) {
    auto live = liveness_of(parse_age(cell(row, 0)));
    ++by[static_cast<int>(live)];
    auto in = std::atoll(cell(row, 3).c_str());
    auto failed = std::atoll(cell(row, 4).c_str());
    total_in += in;
    total_failed += failed;
    if (rows.size() > 1)
      rows += ',';
    rows += R"({"connector_type":)" + json::quote(cell(row, 1))
            + R"(,"endpoint_identity":)" + json::quote(cell(row, 2))
            + R"(,"liveness":")" + to_string(live) + R"(","messages_ingested":)"
            + std::to_string(in) + R"(,"messages_failed":)"
            + std::to_string(failed) + "}";
  }
  rows += ']';
  auto all = total_in + total_failed;
  double rate = all == 0 ? 0.0 : 100.0 * total_failed / all;
  char rate_text[32];
  std::snprintf(rate_text, sizeof rate_text, "%.2f", rate);
  std::string data = R"({"period":")" + std::string{to_string(period)}
                     + R"(","total_connectors":)"
                     + std::to_string(r.rows.size())
                     + R"(,"connectors_online":)" + std::to_string(by[0])
                     + R"(,"connectors_stale":)" + std::to_string(by[1])
                     + R"(,"connectors_offline":)" + std::to_string(by[2])
                     + R"(,"total_messages_ingested":)"
                     + std::to_string(total_in) + R"(,"total_messages_failed":)"
                     + std::to_string(total_failed)
                     + R"(,"overall_error_rate_pct":)" + rate_text
                     + R"(,"by_connector":)" + rows + "}";
  return api_response(data);
}

} // namespace

connector_stats_api::connector_stats_api(caf::actor_system& sys,
                                         const node_settings& settings,
                                         node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)) {
  // nop
}

std::chrono::milliseconds connector_stats_api::timeout() const {
  return std::chrono::milliseconds{settings_.http.request_timeout_ms};
}

// -- heartbeats and rollups ---------------------------------------------------

void connector_stats_api::heartbeat(const http_call& call, http_responder& out,
                                    const path_params&) {
  if (auto refusal = refuse_json_body(call.content_type, call.body.size(),
                                      settings_.http.max_body_bytes))
    return out.now(std::move(*refusal));
  auto parsed = parse_heartbeat(call.body, unix_us_now(),
                                settings_.http.max_body_bytes);
  if (!parsed.stmt)
    return out.now(std::move(parsed.refusal));
  auto hdl = ctx_->connector_stats();
  if (!hdl)
    return out.now(no_switchboard_reply());
  answer_fn answer = out.later();
  bridge<bool>(
    sys_, std::move(hdl), timeout(),
    [answer](bool queued) {
      answer(queued ? heartbeat_accepted_reply(unix_us_now())
                    : heartbeat_queue_full_reply());
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    heartbeat_atom_v, std::move(*parsed.stmt));
}

void connector_stats_api::rollup(const http_call& call, http_responder& out,
                                 const path_params&) {
  if (auto refusal = refuse_json_body(call.content_type, call.body.size(),
                                      settings_.http.max_body_bytes))
    return out.now(std::move(*refusal));
  rapidjson::Document doc;
  if (json::parse(call.body, doc) || !doc.IsObject())
    return out.now(validation_reply("body: {\"kind\": \"hourly|daily|fanout|"
                                    "retention\", \"at\": RFC 3339}"));
  auto kind = doc.HasMember("kind") && doc["kind"].IsString()
                ? std::string{doc["kind"].GetString()}
                : std::string{};
  if (!parse_rollup_kind(kind))
    return out.now(validation_reply("kind: hourly, daily, fanout or "
                                    "retention"));
  std::string at;
  if (doc.HasMember("at")) {
    auto& v = doc["at"];
    // The same shape as the heartbeat's timestamps; PostgreSQL parses it.
    if (!v.IsString() || v.GetStringLength() < 20 || v.GetStringLength() > 64)
      return out.now(validation_reply("at: an RFC 3339 timestamp"));
    at = v.GetString();
  } else {
    at = rfc3339_utc(unix_us_now());
  }
  auto hdl = ctx_->connector_stats();
  if (!hdl)
    return out.now(no_switchboard_reply());
  answer_fn answer = out.later();
  bridge<std::string>(
    sys_, std::move(hdl), timeout(),
    [answer, kind, at](std::string& done) {
      answer(api_response(done, R"({"kind":)" + json::quote(kind) + R"(,"at":)"
                                  + json::quote(at) + "}"));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    rollup_atom_v, kind, at);
}

// -- the dashboard API --------------------------------------------------------

void connector_stats_api::list(const http_call& call, http_responder& out,
                               const path_params&) {
  auto page = parse_page_window(call.query);
  if (!page)
    return out.now(bad_page_reply());
  read_then(sys_, timeout(), ctx_->reader(), out,
            named_statement{"connector_list",
                            {std::to_string(page->offset),
                             std::to_string(page->limit)}},
            [w = *page](const named_result& r) {
              std::string items = "[";
              int64_t total = 0;
              for (auto& row : r.rows) {
                total = std::atoll(cell(row, 2).c_str());
                if (cell(row, 1).empty())
                  continue; // the page is past the end
                if (items.size() > 1)
                  items += ',';
                items += with_liveness(liveness_of(parse_age(cell(row, 0))),
                                       cell(row, 1));
              }
              return paginated_response(items + "]",
                                        page_meta{total, w.offset, w.limit});
            });
}

void connector_stats_api::detail(const http_call&, http_responder& out,
                                 const path_params& p) {
  auto key = connector_key(p);
  read_then(sys_, timeout(), ctx_->reader(), out,
            named_statement{"connector_detail",
                            {decoded(p["type"]), decoded(p["identity"])}},
            [key](const named_result& r) {
              if (r.rows.empty())
                return api_not_found_reply("connector", key);
              auto& row = r.rows.front();
              return api_response(
                with_liveness(liveness_of(parse_age(cell(row, 0))),
                              cell(row, 1)));
            });
}

void connector_stats_api::stats(const http_call& call, http_responder& out,
                                const path_params& p) {
  auto text = query_param(call.query, "period");
  auto period = parse_stats_period(text, stats_period::h24);
  if (!period)
    return out.now(bad_query_param_reply("period", *text, "24h, 7d or 30d"));
  auto key = connector_key(p);
  read_then(sys_, timeout(), ctx_->reader(), out,
            named_statement{"connector_stats_read",
                            {decoded(p["type"]), decoded(p["identity"]),
                             to_string(*period)}},
            [key](const named_result& r) {
              if (r.rows.empty())
                return api_not_found_reply("connector", key);
              return api_response(cell(r.rows.front(), 0));
            });
}

void connector_stats_api::summary(const http_call& call, http_responder& out,
                                  const path_params&) {
  auto text = query_param(call.query, "period");
  auto period = parse_stats_period(text, stats_period::h24);
  if (!period)
    return out.now(bad_query_param_reply("period", *text, "24h, 7d or 30d"));
  read_then(sys_, timeout(), ctx_->reader(), out,
            named_statement{"connector_summary", {to_string(*period)}},
            [p = *period](const named_result& r) {
              return summary_reply(p, r);
            });
}

void connector_stats_api::fanout(const http_call& call, http_responder& out,
                                 const path_params&) {
  auto text = query_param(call.query, "period");
  auto period = parse_stats_period(text, stats_period::d7, false);
  if (!period)
    return out.now(bad_query_param_reply("period", *text, "7d or 30d"));
  read_then(sys_, timeout(), ctx_->reader(), out,
            named_statement{"connector_fanout_read", {to_string(*period)}},
            [p = *period](const named_result& r) {
              auto matrix = r.rows.empty() ? std::string{"[]"}
                                           : cell(r.rows.front(), 0);
              return api_response(R"({"period":")" + std::string{to_string(p)}
                                  + R"(","matrix":)" + matrix + "}");
            });
}

} // namespace butlers
