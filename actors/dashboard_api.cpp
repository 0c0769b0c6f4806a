#include "actors/dashboard_api.hpp"

#include <map>

#include "actors/http_bridge.hpp"
#include "runtime/api_response.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/json.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

using answer_fn = std::function<void(http_reply)>;

/// `GET /v1/butlers`' entries with this node's numbers for each: slots in
/// use and waiting work where the butler runs here, the switchboard's
/// circuit wherever it runs.
std::string butlers_json(const std::vector<registry_entry>& xs,
                         const std::vector<metrics_registry::sample>& samples,
                         const std::string& this_node) {
  std::map<std::string, std::map<std::string, int64_t>> by_butler;
  for (auto& s : samples) {
    auto pos = s.labels.find("butler=\"");
    if (pos == std::string::npos)
      continue;
    pos += 8;
    auto name = s.labels.substr(pos, s.labels.find('"', pos) - pos);
    by_butler[name][s.name] = s.value;
  }
  auto metric = [&by_butler](const registry_entry& x, const char* name,
                             bool local) -> std::string {
    auto b = by_butler.find(x.name);
    if (!local || b == by_butler.end())
      return "null";
    auto m = b->second.find(name);
    return m == b->second.end() ? "0" : std::to_string(m->second);
  };
  std::string out = "[";
  for (auto& x : xs) {
    bool here = x.node == this_node;
    out += out.size() > 1 ? ",{" : "{";
    out += R"("name":)" + json::quote(x.name);
    out += R"(,"description":)" + json::quote(x.description);
    out += R"(,"node":)" + json::quote(x.node);
    out += R"(,"status":)" + json::quote(x.status);
    out += R"(,"max_concurrent_sessions":)"
           + std::to_string(x.max_concurrent_sessions);
    out += R"(,"active_sessions":)"
           + metric(x, "butlers_spawner_active_sessions", here);
    out += R"(,"waiting_for_slot":)"
           + metric(x, "butlers_spawner_queued_triggers", here);
    out += R"(,"queue_depth":)" + metric(x, "butlers_route_queue_depth", here);
    out += R"(,"circuit_open":)"
           + std::string{metric(x, "butlers_switchboard_circuit_open", true)
                             == "1"
                           ? "true"
                           : "false"};
    out += "}";
  }
  return out + "]";
}

} // namespace

dashboard_api::dashboard_api(caf::actor_system& sys,
                             const node_settings& settings,
                             node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)),
    overview_(std::make_unique<dashboard_overview>(unix_now_ms())) {
  // nop
}

std::chrono::milliseconds dashboard_api::timeout() const {
  return std::chrono::milliseconds{settings_.http.request_timeout_ms};
}

void dashboard_api::file(const http_call& call, http_responder& out,
                         const path_params&) {
  auto r = dashboard_file(call.path, call.header_value("If-None-Match"));
  out.now(r ? std::move(*r) : no_route_reply(call.method, call.path));
}

void dashboard_api::overview(const http_call&, http_responder& out,
                             const path_params&) {
  out.now(api_response(overview_->render(ctx_->metrics.samples(),
                                         settings_.node.name, unix_now_ms())));
}

void dashboard_api::read_page(http_responder& out, named_statement stmt,
                              const dashboard_page_query& q) {
  auto hdl = ctx_->reader();
  if (!hdl)
    return out.now(no_reader_reply());
  auto answer = out.later();
  bridge<named_result>(
    sys_, hdl, timeout(),
    [answer, offset = q.offset, limit = q.limit](named_result& r) {
      auto body = r.ok && !r.rows.empty() && !r.rows[0].empty()
                    ? api_page_from_read(r.rows[0][0], offset, limit)
                    : std::nullopt;
      answer(body ? json_reply(200, std::move(*body))
                  : error_reply(butlers_errc::internal_error,
                                "the list could not be read"));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    read_atom_v, std::move(stmt));
}

void dashboard_api::requests(const http_call& call, http_responder& out,
                             const path_params&) {
  auto q = parse_dashboard_query(call.query, {"accepted", "progress", "parsed",
                                              "errored", "cancelled"});
  if (!q.bad.empty())
    return out.now(dashboard_query_reply(q));
  read_page(out,
            named_statement{"dashboard_requests",
                            {std::to_string(q.offset), std::to_string(q.limit),
                             q.q, q.state}},
            q);
}

void dashboard_api::request(const http_call&, http_responder& out,
                            const path_params& p) {
  auto id = std::string{p["id"]};
  if (!is_uuid(id))
    return out.now(bad_uuid_reply("request"));
  auto hdl = ctx_->reader();
  if (!hdl)
    return out.now(no_reader_reply());
  auto answer = out.later();
  bridge<named_result>(
    sys_, hdl, timeout(),
    [answer, id](named_result& r) {
      if (!r.ok || r.rows.empty() || r.rows[0].empty())
        return answer(api_not_found_reply("request", id));
      answer(api_response(r.rows[0][0]));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    read_atom_v, named_statement{"request_inspect", {id}});
}

void dashboard_api::butlers(const http_call&, http_responder& out,
                            const path_params&) {
  auto reg = ctx_->registry();
  if (!reg)
    return out.now(no_registry_reply(ctx_->status.database_configured));
  auto answer = out.later();
  bridge<std::vector<registry_entry>>(
    sys_, reg, timeout(),
    [answer, ctx = ctx_,
     node = settings_.node.name](std::vector<registry_entry>& xs) {
      answer(api_response(butlers_json(xs, ctx->metrics.samples(), node)));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    hosts_atom_v);
}

void dashboard_api::dead_letters(const http_call& call, http_responder& out,
                                 const path_params&) {
  auto q = parse_dashboard_query(call.query, {"open", "replayed"});
  if (!q.bad.empty())
    return out.now(dashboard_query_reply(q));
  read_page(out,
            named_statement{"dashboard_dead_letters",
                            {std::to_string(q.offset), std::to_string(q.limit),
                             q.state}},
            q);
}

void dashboard_api::approvals(const http_call& call, http_responder& out,
                              const path_params&) {
  auto q = parse_dashboard_query(call.query, {});
  if (!q.bad.empty())
    return out.now(dashboard_query_reply(q));
  read_page(out,
            named_statement{"approval_list",
                            {std::to_string(q.offset), std::to_string(q.limit),
                             q.q}},
            q);
}

void dashboard_api::other(const http_call& call, http_responder& out,
                          const path_params&) {
  out.now(no_route_reply(call.method, call.path));
}

} // namespace butlers
