#include "actors/http_api.hpp"

#include <caf/actor_cast.hpp>
#include <spdlog/spdlog.h>

#include "actors/http_bridge.hpp"
#include "runtime/approvals.hpp"
#include "runtime/attachment_store.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/forget.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/json.hpp"
#include "runtime/thread_list.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

using answer_fn = std::function<void(http_reply)>;

/// Answers with `render(reply)` of `hdl`'s answer to `msg`, or with the
/// failure.
template<class Reply, class Handle, class Render, class... Ts>
void relay(caf::actor_system& sys, std::chrono::milliseconds timeout,
           answer_fn answer, Handle hdl, Render render, Ts... msg) {
  bridge<Reply>(
    sys, std::move(hdl), timeout,
    [answer, render](Reply& r) {
      answer(render(r));
    },
    [answer](const caf::error& err) {
      answer(failure_reply(err));
    },
    std::move(msg)...);
}

/// Hands the butler `name` and `answer` to `then` (on a CAF thread), or
/// answers 404 when `reg` knows no such butler.
template<class Then>
void with_butler(caf::actor_system& sys, std::chrono::milliseconds timeout,
                 answer_fn answer, registry_actor reg, std::string name,
                 Then then) {
  bridge<butler_actor>(
    sys, std::move(reg), timeout,
    [answer, then](butler_actor& hdl) mutable {
      then(hdl, answer);
    },
    [answer, name](const caf::error&) {
      answer(no_butler_reply(name));
    },
    lookup_atom_v, name);
}

} // namespace

http_api::http_api(caf::actor_system& sys, const node_settings& settings,
                   node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)) {
  if (!settings_.database.url.empty())
    attachments_ = std::make_shared<attachment_store>(settings_.database.url,
                                                      settings_.attachments, 2);
  attachments_refused_ = &ctx_->metrics.get_counter(
    "butlers_thread_attachments_refused_total",
    "Thread turns refused because a file was over a cap");
  // One forget runs at a time; one more may wait.
  forget_pool_ = std::make_shared<blocking_pool>(1, 1);
}

std::optional<http_reply> http_api::store_turn_files(const http_call& call,
                                                     thread_turn& turn) {
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = call.body.size();
  if (json::parse(call.body, doc, limits))
    return validation_reply("body is not valid JSON");
  std::vector<turn_file> files;
  std::string why;
  switch (parse_turn_attachments(doc, settings_.attachments, files, why)) {
    case turn_files_error::none: break;
    case turn_files_error::invalid: return validation_reply(why);
    case turn_files_error::over_cap:
      attachments_refused_->inc();
      return error_reply(butlers_errc::payload_too_large,
                         "attachments refused: " + why);
  }
  if (files.empty())
    return std::nullopt;
  if (!attachments_)
    return error_reply(butlers_errc::database_unavailable,
                       "no database to store attachments in");
  std::vector<attachment_ref> refs;
  for (auto& f : files) {
    std::string error;
    auto ref = attachments_->put(f.bytes, f.ref.media_type, f.ref.name, &error);
    if (!ref)
      return error_reply(butlers_errc::database_unavailable, error);
    refs.push_back(std::move(*ref));
  }
  turn.attachments = attachments_json(refs);
  return std::nullopt;
}

// -- the actors behind the API ------------------------------------------------

switchboard_actor http_api::switchboard() const {
  return ctx_->switchboard();
}

registry_actor http_api::registry() const {
  return ctx_->registry();
}

thread_directory_actor http_api::directory() const {
  return ctx_->threads();
}

db_reader_actor http_api::reader() const {
  return ctx_->reader();
}

std::chrono::milliseconds http_api::timeout() const {
  return std::chrono::milliseconds{settings_.http.request_timeout_ms};
}

void http_api::read(http_responder& out, named_statement stmt,
                    butlers_errc missing_code, std::string missing) {
  auto hdl = reader();
  if (!hdl)
    return out.now(no_reader_reply());
  relay<named_result>(
    sys_, timeout(), out.later(), hdl,
    [missing_code, missing](const named_result& r) {
      return read_reply(r, missing_code, missing);
    },
    read_atom_v, std::move(stmt));
}

// -- requests (operator API) --------------------------------------------------

void http_api::request_inspect(const http_call&, http_responder& out,
                               const path_params& p) {
  auto id = std::string{p["id"]};
  if (!is_uuid(id))
    return out.now(bad_uuid_reply("request"));
  read(out, named_statement{"request_inspect", {id}}, butlers_errc::not_found,
       "no request " + id);
}

void http_api::request_operate(const http_call& call, http_responder& out,
                               const path_params& p) {
  auto id = std::string{p["id"]};
  if (!is_uuid(id))
    return out.now(bad_uuid_reply("request"));
  auto verb = parse_operator_verb(p["action"]);
  if (!verb)
    return out.now(no_route_reply(call.method, call.path));
  auto op = parse_operator_body(*verb, id, call.body);
  if (!op)
    return out.now(operator_body_reply());
  auto sb = switchboard();
  if (!sb)
    return out.now(no_switchboard_reply());
  relay<std::string>(
    sys_, timeout(), out.later(), sb,
    [](const std::string& body) {
      return json_reply(200, body);
    },
    operate_atom_v, std::move(*op));
}

void http_api::request_other(const http_call& call, http_responder& out,
                             const path_params& p) {
  auto rest = p["rest"];
  if (!is_uuid(rest.substr(0, rest.find('/'))))
    return out.now(bad_uuid_reply("request"));
  out.now(no_route_reply(call.method, call.path));
}

void http_api::operator_forget(const http_call& call, http_responder& out,
                               const path_params&) {
  // The job may outlive this handler: it holds the context.
  auto ctx = ctx_;
  auto outcome = [ctx](const char* x) -> counter& {
    return ctx->metrics
      .get_counter("butlers_forget_total",
                   "Forgets of a sender (runtime/forget.md) by "
                   "outcome: done, failed (midway; run again), "
                   "refused (a bad body), busy (another one ran)",
                   std::string{"outcome=\""} + x + "\"");
  };
  if (auto no = refuse_json_body(call.content_type, call.body.size(),
                                 settings_.http.max_body_bytes))
    return out.now(std::move(*no));
  forget_order order;
  if (auto bad = parse_forget_body(call.body, order); !bad.empty()) {
    outcome("refused").inc();
    return out.now(validation_reply(bad));
  }
  if (settings_.database.url.empty())
    return out.now(error_reply(butlers_errc::database_unavailable,
                               "no database configured"));
  auto answer = out.later();
  auto job = [url = settings_.database.url, order, answer, ctx, outcome] {
    auto report = run_forget(url, order, [](const std::string& line) {
      spdlog::info("{}", line);
    });
    for (auto& [table, n] : report.counts)
      ctx->metrics
        .get_counter("butlers_forget_rows_total",
                     "Rows erased by forgets, per table",
                     "table=" + json::quote(table))
        .inc(n);
    auto hash = forget_sender_hash(order);
    if (!report.ok) {
      outcome("failed").inc();
      spdlog::error("forget of sender {} failed after {} row(s): {}", hash,
                    report.total, report.error);
      return answer(error_reply(butlers_errc::database_unavailable,
                                "forget failed midway (what it erased stays "
                                "erased; send it again): "
                                  + report.error));
    }
    outcome("done").inc();
    spdlog::info("forget of sender {} by {} done: {} row(s) erased, audit "
                 "row {}",
                 hash, order.who, report.total, report.audit_id);
    answer(json_reply(200, forget_report_json(report, hash)));
  };
  if (!forget_pool_->post(job)) {
    outcome("busy").inc();
    answer(error_reply(butlers_errc::overload_rejected,
                       "another forget is running; try again when it "
                       "ends"));
  }
}

// -- butlers ------------------------------------------------------------------

void http_api::butlers_list(const http_call&, http_responder& out,
                            const path_params&) {
  auto reg = registry();
  if (!reg)
    return out.now(no_registry_reply(ctx_->status.database_configured));
  relay<std::vector<registry_entry>>(sys_, timeout(), out.later(), reg,
                                     butlers_reply, hosts_atom_v);
}

void http_api::butler_route(const http_call& call, http_responder& out,
                            const path_params& p) {
  auto reg = registry();
  if (!reg)
    return out.now(no_registry_reply(ctx_->status.database_configured));
  if (ctx_->status.draining)
    return out.now(draining_reply());
  if (auto no = refuse_json_body(call.content_type, call.body.size(),
                                 settings_.http.max_body_bytes))
    return out.now(std::move(*no));
  auto& sys = sys_;
  with_butler(sys, timeout(), out.later(), reg, std::string{p["name"]},
              [&sys, t = timeout(),
               body = std::string{call.body}](butler_actor b,
                                              const answer_fn& answer) {
                route_request rr{body, "route", {}, {}};
                relay<route_response>(sys, t, answer, b, route_reply,
                                      route_atom_v, std::move(rr));
              });
}

void http_api::butler_work_cancel(const http_call& call, http_responder& out,
                                  const path_params& p) {
  auto reg = registry();
  if (!reg)
    return out.now(no_registry_reply(ctx_->status.database_configured));
  auto work_id = std::string{p["work_id"]};
  if (work_id.empty())
    return out.now(no_route_reply(call.method, call.path));
  if (ctx_->status.draining)
    return out.now(draining_reply());
  auto& sys = sys_;
  with_butler(sys, timeout(), out.later(), reg, std::string{p["name"]},
              [&sys, t = timeout(), work_id](butler_actor b,
                                             const answer_fn& answer) {
                relay<bool>(sys, t, answer, b, work_cancel_reply, cancel_atom_v,
                            work_id);
              });
}

void http_api::butlers_other(const http_call& call, http_responder& out,
                             const path_params& p) {
  if (!registry())
    return out.now(no_registry_reply(ctx_->status.database_configured));
  out.now(no_route_reply(call.method, "/v1/butlers/" + std::string{p["rest"]}));
}

// -- threads (spec 003) and runs ----------------------------------------------

void http_api::thread_turn_post(const http_call& call, http_responder& out,
                                const path_params& p) {
  auto id = std::string{p["id"]};
  if (!valid_thread_id(id))
    return out.now(bad_thread_id_reply());
  if (ctx_->status.draining)
    return out.now(draining_reply());
  if (auto no = refuse_json_body(call.content_type, call.body.size(),
                                 settings_.http.max_body_bytes))
    return out.now(std::move(*no));
  thread_turn turn;
  auto bad = parse_turn_body(call.body, turn);
  if (!bad.empty())
    return out.now(validation_reply(bad));
  if (auto refused = store_turn_files(call, turn))
    return out.now(std::move(*refused));
  turn.thread_id = id;
  auto dir = directory();
  if (!dir)
    return out.now(no_directory_reply(ctx_->status.database_configured));
  relay<turn_result>(sys_, timeout(), out.later(), dir, turn_reply, turn_atom_v,
                     std::move(turn));
}

void http_api::thread_cancel(const http_call&, http_responder& out,
                             const path_params& p) {
  auto id = std::string{p["id"]};
  if (!valid_thread_id(id))
    return out.now(bad_thread_id_reply());
  if (ctx_->status.draining)
    return out.now(draining_reply());
  auto dir = directory();
  if (!dir)
    return out.now(no_directory_reply(ctx_->status.database_configured));
  relay<uint32_t>(sys_, timeout(), out.later(), dir, thread_cancel_reply,
                  cancel_atom_v, id, std::string{});
}

void http_api::threads_list(const http_call& call, http_responder& out,
                            const path_params&) {
  thread_page_query q;
  if (auto bad = parse_thread_page_query(call.query, q))
    return out.now(std::move(*bad));
  auto hdl = reader();
  if (!hdl)
    return out.now(no_reader_reply());
  relay<named_result>(
    sys_, timeout(), out.later(), hdl,
    [q](const named_result& r) {
      if (!r.ok)
        return error_reply(butlers_errc::internal_error,
                           "thread list query failed");
      return json_reply(200, thread_page_json(r.rows, q));
    },
    read_atom_v, named_statement{"thread_list", thread_list_params(q)});
}

void http_api::thread_get(const http_call&, http_responder& out,
                          const path_params& p) {
  auto id = std::string{p["id"]};
  if (!valid_thread_id(id))
    return out.now(bad_thread_id_reply());
  auto rd = reader();
  if (!rd)
    return out.now(no_reader_reply());
  auto& sys = sys_;
  auto t = timeout();
  // The live actor first, then the database: the cursor read last is at
  // least as new as the runs the actor named.
  auto read_db = [&sys, t, rd, id,
                  answer = out.later()](std::optional<thread_live> live) {
    relay<named_result>(
      sys, t, answer, rd,
      [id, live](const named_result& r) {
        if (!r.ok)
          return error_reply(butlers_errc::internal_error,
                             "thread query failed");
        if (r.rows.empty())
          return error_reply(butlers_errc::not_found, "no thread " + id);
        return json_reply(200, thread_snapshot_json(r.rows[0], live));
      },
      read_atom_v, named_statement{"thread_get", {id}});
  };
  auto dir = directory();
  if (!dir)
    return read_db(std::nullopt);
  bridge<thread_live>(
    sys, dir, t,
    [read_db](thread_live& live) {
      read_db(std::move(live));
    },
    [read_db](const caf::error&) {
      read_db(std::nullopt);
    },
    snapshot_atom_v, id);
}

void http_api::thread_transcript(const http_call& call, http_responder& out,
                                 const path_params& p) {
  auto id = std::string{p["id"]};
  if (!valid_thread_id(id))
    return out.now(bad_thread_id_reply());
  auto window = parse_transcript_query(call.query);
  if (!window)
    return out.now(transcript_query_reply());
  read(out,
       named_statement{"thread_transcript_read",
                       {id, std::to_string(window->after),
                        std::to_string(window->limit)}},
       butlers_errc::internal_error, "transcript query failed");
}

void http_api::run_cancel(const http_call&, http_responder& out,
                          const path_params& p) {
  auto id = std::string{p["run_id"]};
  if (!is_uuid(id))
    return out.now(bad_uuid_reply("run"));
  auto dir = directory();
  if (!dir)
    return out.now(no_directory_reply(ctx_->status.database_configured));
  relay<uint32_t>(sys_, timeout(), out.later(), dir, run_cancel_reply,
                  cancel_atom_v, std::string{}, id);
}

void http_api::approval_post(const http_call& call, http_responder& out,
                             const path_params& p) {
  auto run_id = std::string{p["run_id"]};
  auto id = std::string{p["approval_id"]};
  if (!is_uuid(id))
    return out.now(error_reply(butlers_errc::not_found, "no approval " + id));
  std::string why;
  auto body = parse_approval_post(call.body, why);
  if (!body)
    return out.now(error_reply(butlers_errc::validation_error, why));
  auto tools = ctx_->tool_server();
  if (!tools)
    return out.now(error_reply(butlers_errc::target_unavailable,
                               "the tool server is restarting"));
  relay<tool_result>(
    sys_, timeout(), out.later(), tools,
    [id](const tool_result& r) {
      if (r.status == tool_status::ok)
        return json_reply(200, r.structured);
      if (r.reason == "forbidden") {
        auto reply = error_reply(butlers_errc::unauthorized, r.text);
        reply.status = 403;
        reply.bearer_challenge = false;
        return reply;
      }
      if (r.reason == "not_found")
        return error_reply(butlers_errc::not_found, r.text);
      if (r.reason == "conflict")
        return error_reply(butlers_errc::conflict, r.text);
      return error_reply(butlers_errc::database_unavailable, r.text);
    },
    approve_atom_v, id, run_id, body->approve,
    api_caller_identity(body->sender));
}

} // namespace butlers
