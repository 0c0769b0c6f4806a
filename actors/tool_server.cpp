#include "actors/tool_server.hpp"

#include <spdlog/spdlog.h>

#include "runtime/butler_trace.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/threads.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using promise = caf::typed_response_promise<tool_result>;

int64_t int_or(const rapidjson::Value& v, const char* name, int64_t fallback) {
  auto i = v.FindMember(name);
  if (i == v.MemberEnd() || !i->value.IsInt64())
    return fallback;
  return i->value.GetInt64();
}

tool_result unavailable(const caf::error& err, caf::actor_system& sys) {
  return tool_failed("unavailable", "the database is unavailable ("
                                      + sys.render(err)
                                      + "); try again shortly");
}

} // namespace

/// One call in progress: what it answers through and the metrics it ends
/// with.
struct tool_call_ctx {
  tool_server_ptr self;
  promise rp;
  tool_grant_ptr grant;
  std::string tool;
  std::chrono::steady_clock::time_point started;
  uint64_t start_ns = 0;
  /// The arguments as recorded: in full with `[tools] record_arguments`,
  /// else their key names ("" until they were read).
  std::string recorded;
  /// The session's token (a call that asks on its behalf).
  std::string token;

  const tool_scope& scope() const {
    return grant->scope;
  }

  /// Answers the call, counts, logs, records and traces it, and tells the
  /// thread's event stream (a thread's run).
  void answer(tool_result r) {
    auto& st = self->state;
    auto ms = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now() - started)
                .count();
    st.duration->observe(ms);
    auto outcome = outcome_label(r);
    auto& s = scope();
    st.ctx->metrics
      .get_counter("butlers_tool_calls_total", "Tool calls of sessions",
                   "butler=\"" + s.butler + "\",tool=\"" + tool
                     + "\",outcome=\"" + outcome + "\"")
      .inc();
    spdlog::debug("tool {} of butler {} (work {}): {} in {:.1f} ms", tool,
                  s.butler, s.work_id, outcome, ms);
    if (!recorded.empty()) {
      st.writes.exec(
        self,
        named_statement{"tool_call_insert",
                        {s.request_id, s.work_id, s.butler, tool, outcome,
                         std::to_string(ms), recorded},
                        s.request_id},
        [](named_result&) {}, [](const caf::error&) {});
      publish(outcome, ms, r.status == tool_status::ok);
      trace(outcome, r);
    }
    if (st.in_flight > 0)
      --st.in_flight;
    rp.deliver(std::move(r));
  }

  /// A `tool` event on the thread's stream, for a thread's run.
  void publish(const std::string& outcome, double ms, bool ok) {
    auto& s = scope();
    auto& hub = self->state.ctx->events;
    if (s.trigger_source != "thread" || s.thread.empty() || !hub
        || !hub->wants_thread(s.thread))
      return;
    auto body = R"({"thread_id":)" + json::quote(s.thread) + R"(,"run_id":)"
                + json::quote(s.request_id) + R"(,"butler":)"
                + json::quote(s.butler) + R"(,"tool":)" + json::quote(tool)
                + R"(,"outcome":)" + json::quote(outcome) + R"(,"is_error":)"
                + (ok ? "false" : "true") + R"(,"duration_ms":)"
                + json::to_string(rapidjson::Value{ms}) + R"(,"arguments":)"
                + recorded + "}";
    hub->publish_thread(s.thread, sse_frame("tool", body));
  }

  /// An `execute_tool {name}` span (GenAI semantic conventions) under the
  /// run's `invoke_agent` span.
  void trace(const std::string& outcome, const tool_result& r) {
    auto& tr = self->state.ctx->traces;
    if (!tr || !tr->enabled())
      return;
    auto& s = scope();
    auto parent = model_call_parent_of(s.work_id, s.lease_token, s.traceparent,
                                       tr->sample_ratio());
    if (!parent.trace.sampled())
      return;
    auto sp = span::child_of(parent.trace, parent.agent, random_span_id(),
                             "execute_tool " + tool, start_ns);
    sp.set("gen_ai.operation.name", "execute_tool")
      .set("gen_ai.tool.name", tool)
      .set("gen_ai.tool.type", "function")
      .set("butlers.tool.outcome", outcome);
    if (r.status != tool_status::ok) {
      sp.set("error.type", outcome);
      sp.fail(outcome, r.text);
    }
    sp.end(unix_nanos_now());
    tr->record(std::move(sp));
  }
};

namespace {

using call_ptr = std::shared_ptr<tool_call_ctx>;

/// A refusal of scope: logged and counted beside the call.
void refuse(const call_ptr& c, const std::string& reason,
            const std::string& message) {
  c->self->state.refused->inc();
  c->self->state.ctx->metrics
    .get_counter("butlers_tool_refusals_total",
                 "Tool calls refused for their scope",
                 "butler=\"" + c->scope().butler + "\",tool=\"" + c->tool
                   + "\",reason=\"" + reason + "\"")
    .inc();
  spdlog::warn("tool {} of butler {} (work {}) refused: {}", c->tool,
               c->scope().butler, c->scope().work_id, message);
}

void exec(const call_ptr& c, named_statement stmt,
          std::function<void(named_result&)> ok) {
  auto self = c->self;
  self->state.writes.exec(self, std::move(stmt), std::move(ok),
                          [c](const caf::error& err) {
                            c->answer(unavailable(err, c->self->system()));
                          });
}

void read(const call_ptr& c, named_statement stmt,
          std::function<void(named_result&)> ok) {
  auto self = c->self;
  self
    ->request(self->state.params.reader, std::chrono::seconds{10}, read_atom_v,
              std::move(stmt))
    .then(
      [ok](named_result& r) mutable {
        ok(r);
      },
      [c](const caf::error& err) {
        c->answer(unavailable(err, c->self->system()));
      });
}

// -- state --------------------------------------------------------------------

void state_get(const call_ptr& c, const rapidjson::Value& args) {
  auto key = string_arg(args, "key");
  auto& s = c->scope();
  read(c,
       named_statement{"state_get",
                       {s.butler, state_scope(s, string_arg(args, "scope")),
                        key}},
       [c, key](named_result& r) {
         if (!r.ok) {
           c->answer(tool_failed("internal", "state_get failed"));
           return;
         }
         if (r.rows.empty()) {
           c->answer(tool_ok(R"({"key":)" + json::quote(key)
                             + R"(,"found":false,"version":0})"));
           return;
         }
         auto& row = r.rows.front();
         c->answer(tool_ok(R"({"key":)" + json::quote(key)
                           + R"(,"found":true,"value":)" + row.at(0)
                           + R"(,"version":)" + row.at(1) + R"(,"updated_at":)"
                           + json::quote(row.at(2)) + "}"));
       });
}

/// Answers a refused compare-and-set with the version stored now.
void conflict(const call_ptr& c, const std::string& ns, const std::string& key,
              int64_t expected) {
  auto& s = c->scope();
  read(c, named_statement{"state_get", {s.butler, ns, key}},
       [c, key, expected](named_result& r) {
         std::string current = r.ok && !r.rows.empty() ? r.rows.front().at(1)
                                                       : "0";
         auto msg = "conflict: key '" + key + "' is at version " + current
                    + (current == "0" ? " (absent)" : "")
                    + ", not the expected " + std::to_string(expected)
                    + "; read it again and retry with expected_version "
                    + current;
         c->answer(tool_failed("conflict", msg,
                               R"({"error":"conflict","key":)"
                                 + json::quote(key) + R"(,"current_version":)"
                                 + current + R"(,"expected_version":)"
                                 + std::to_string(expected) + "}"));
       });
}

void state_put(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  auto key = string_arg(args, "key");
  auto value = json::to_string(args["value"]);
  auto& limits = c->self->state.limits;
  if (value.size() > limits.max_value_bytes) {
    c->answer(
      tool_failed("too_large", "value of " + std::to_string(value.size())
                                 + " bytes is over the limit of "
                                 + std::to_string(limits.max_value_bytes)
                                 + " ([tools] max_value_bytes)"));
    return;
  }
  auto expected = int_or(args, "expected_version", -1);
  auto ns = state_scope(s, string_arg(args, "scope"));
  exec(c,
       named_statement{"state_put",
                       {s.butler, ns, key, value, std::to_string(expected),
                        s.request_id},
                       s.butler},
       [c, ns, key, expected](named_result& r) {
         if (!r.ok || r.rows.empty()) {
           c->answer(tool_failed("internal", "state_put failed"));
           return;
         }
         auto& version = r.rows.front().at(0);
         if (version == "0") {
           conflict(c, ns, key, expected);
           return;
         }
         c->answer(tool_ok(R"({"key":)" + json::quote(key) + R"(,"version":)"
                           + version + "}"));
       });
}

void state_list(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  auto limit = int_or(args, "limit", 50);
  read(c,
       named_statement{"state_list",
                       {s.butler, state_scope(s, string_arg(args, "scope")),
                        string_arg(args, "prefix"), string_arg(args, "cursor"),
                        std::to_string(limit + 1)}},
       [c, limit](named_result& r) {
         if (!r.ok) {
           c->answer(tool_failed("internal", "state_list failed"));
           return;
         }
         std::string items;
         std::string next;
         auto n = std::min<size_t>(r.rows.size(), static_cast<size_t>(limit));
         for (size_t i = 0; i < n; ++i) {
           auto& row = r.rows[i];
           if (i > 0)
             items += ',';
           items += R"({"key":)" + json::quote(row.at(0)) + R"(,"version":)"
                    + row.at(1) + R"(,"value":)" + row.at(2) + "}";
         }
         if (r.rows.size() > n && n > 0)
           next = r.rows[n - 1].at(0);
         c->answer(tool_ok(R"({"items":[)" + items + R"(],"next_cursor":)"
                           + json::quote(next) + "}"));
       });
}

void state_delete(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  auto key = string_arg(args, "key");
  auto expected = int_or(args, "expected_version", -1);
  auto ns = state_scope(s, string_arg(args, "scope"));
  exec(c,
       named_statement{"state_delete",
                       {s.butler, ns, key, std::to_string(expected)},
                       s.butler},
       [c, ns, key, expected](named_result& r) {
         if (!r.ok) {
           c->answer(tool_failed("internal", "state_delete failed"));
           return;
         }
         if (r.rows.empty() && expected >= 0) {
           conflict(c, ns, key, expected);
           return;
         }
         std::string version = r.rows.empty() ? "0" : r.rows.front().at(0);
         c->answer(tool_ok(R"({"key":)" + json::quote(key) + R"(,"deleted":)"
                           + (r.rows.empty() ? "false" : "true")
                           + R"(,"version":)" + version + "}"));
       });
}

// -- notify -------------------------------------------------------------------

void end_wait(tool_server_ptr self, const std::string& work_id,
              const route_response* r);

void notify(const call_ptr& c, const rapidjson::Value& args) {
  auto self = c->self;
  auto& s = c->scope();
  auto decided = decide_notify_target(s, args);
  if (auto* refused = std::get_if<tool_result>(&decided)) {
    if (refused->reason == "recipient_refused")
      refuse(c, refused->reason, refused->text);
    c->answer(std::move(*refused));
    return;
  }
  auto target = std::get<notify_target>(decided);
  if (target.intent != "react" && !args.HasMember("message")) {
    c->answer(tool_failed("invalid_arguments",
                          "invalid arguments for notify: / required: "
                          "message is required unless intent is react"));
    return;
  }
  auto seq = c->grant->notify_seq.fetch_add(1);
  auto doc = make_tool_notify(s, target, args, seq);
  std::string envelope;
  auto parsed = std::make_shared<route_envelope>();
  auto fresh = make_uuid_v7().to_string();
  if (auto bad = make_delivery_route(doc, fresh, unix_now_us(), envelope,
                                     parsed.get())) {
    c->answer(tool_failed("invalid_arguments", bad->message));
    return;
  }
  auto messenger = self->state.ctx->messenger();
  if (!messenger) {
    c->answer(tool_failed("unavailable", "no messenger on this node"));
    return;
  }
  route_request req{std::move(envelope), "tool", s.butler, untyped(self),
                    std::move(parsed)};
  self->request(messenger, local_call, route_atom_v, std::move(req))
    .then(
      [c, target, seq](route_response& r) {
        auto self = c->self;
        if (r.status == "error") {
          c->answer(tool_failed(r.retryable ? "unavailable" : "refused",
                                "notify not taken by the messenger: "
                                  + r.error_class + ": " + r.error_message));
          return;
        }
        pending_notify p{c,
                         r.work_id,
                         target.channel,
                         target.recipient,
                         target.intent,
                         seq};
        // The call's answer now waits for the delivery (the butler sends
        // `accepted` before it reports a duplicate already done).
        auto& st = self->state;
        st.waiting[r.work_id].push_back(std::move(p));
        auto wait = st.params.cfg.notify_wait_ms;
        self->delayed_send(self, std::chrono::milliseconds{wait},
                           timeout_atom_v, r.work_id);
      },
      [c](const caf::error& err) {
        c->answer(
          tool_failed("unavailable", "messenger unreachable: "
                                       + c->self->system().render(err)));
      });
}

std::string notify_result(const pending_notify& p, const char* status) {
  return R"({"delivery_id":)" + json::quote(p.delivery_id) + R"(,"status":")"
         + status + R"(","channel":)" + json::quote(p.channel)
         + R"(,"recipient":)" + json::quote(p.recipient) + R"(,"intent":)"
         + json::quote(p.intent) + R"(,"sequence":)"
         + std::to_string(p.sequence) + "}";
}

/// Answers the notifies waiting for delivery `work_id` with how it ended
/// (`r`), or as `queued` when their wait is over (`r` null).
void end_wait(tool_server_ptr self, const std::string& work_id,
              const route_response* r) {
  auto& st = self->state;
  auto i = st.waiting.find(work_id);
  if (i == st.waiting.end())
    return;
  auto waiters = std::move(i->second);
  st.waiting.erase(i);
  for (auto& p : waiters) {
    tool_result out;
    if (!r)
      out = tool_ok(notify_result(p, "queued"));
    else if (r->status == "ok")
      out = tool_ok(notify_result(p, "delivered"));
    else
      out = tool_failed("delivery_failed",
                        "delivery " + p.delivery_id + " failed: "
                          + r->error_class + ": " + r->error_message,
                        notify_result(p, "failed"));
    st.ctx->metrics
      .get_counter("butlers_tool_notify_total",
                   "notify calls by how their delivery stood when answered",
                   std::string{"status=\""}
                     + (!r                  ? "queued"
                        : r->status == "ok" ? "delivered"
                                            : "failed")
                     + "\"")
      .inc();
    p.call->answer(std::move(out));
  }
}

// -- reminders ----------------------------------------------------------------

void remind(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  auto& limits = c->self->state.limits;
  auto now = unix_now_ms();
  auto due = remind_due(args, now, limits);
  if (auto* bad = std::get_if<std::string>(&due)) {
    c->answer(tool_failed("invalid_arguments", *bad));
    return;
  }
  auto message = string_arg(args, "message");
  if (message.size() > limits.max_value_bytes) {
    c->answer(tool_failed("too_large", "message is over [tools] "
                                       "max_value_bytes"));
    return;
  }
  auto seq = c->grant->remind_seq.fetch_add(1);
  auto due_ms = std::get<int64_t>(due);
  auto id = derived_uuid(s.work_id + ":remind:" + std::to_string(seq), now);
  exec(c,
       named_statement{"reminder_insert",
                       {id, s.butler, std::to_string(due_ms), message,
                        s.channel, s.endpoint, s.sender, s.thread, s.request_id,
                        s.work_id},
                       id},
       [c](named_result& r) {
         if (!r.ok || r.rows.empty()) {
           c->answer(tool_failed("internal", "remind failed"));
           return;
         }
         auto& row = r.rows.front();
         c->answer(tool_ok(R"({"reminder_id":)" + json::quote(row.at(0))
                           + R"(,"due_at":)" + json::quote(row.at(1)) + "}"));
       });
}

void remind_cancel(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  auto id = string_arg(args, "reminder_id");
  if (!uuid::parse(id)) {
    c->answer(tool_failed("invalid_arguments",
                          "reminder_id '" + id + "' is not a UUID"));
    return;
  }
  exec(c,
       named_statement{"reminder_cancel",
                       {id, s.butler, s.channel, s.sender},
                       id},
       [c, id](named_result& r) {
         if (!r.ok) {
           c->answer(tool_failed("internal", "remind_cancel failed"));
           return;
         }
         if (r.rows.empty()) {
           c->answer(
             tool_failed("not_found", "no reminder " + id
                                        + " of this butler for this person"));
           return;
         }
         auto& row = r.rows.front();
         bool cancelled = row.at(1) != "0";
         c->answer(
           tool_ok(R"({"reminder_id":)" + json::quote(id) + R"(,"cancelled":)"
                   + (cancelled ? "true" : "false") + R"(,"state":)"
                   + json::quote(cancelled ? "cancelled" : row.at(0)) + "}"));
       });
}

void remind_list(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  read(c,
       named_statement{"reminder_list",
                       {s.butler, s.channel, s.sender,
                        std::to_string(int_or(args, "limit", 20))}},
       [c](named_result& r) {
         if (!r.ok) {
           c->answer(tool_failed("internal", "remind_list failed"));
           return;
         }
         std::string items;
         for (auto& row : r.rows) {
           if (!items.empty())
             items += ',';
           items += R"({"reminder_id":)" + json::quote(row.at(0))
                    + R"(,"due_at":)" + json::quote(row.at(1))
                    + R"(,"message":)" + json::quote(row.at(2)) + "}";
         }
         c->answer(tool_ok(R"({"reminders":[)" + items + "]}"));
       });
}

// -- route_to and recall ------------------------------------------------------

void route_to(const call_ptr& c, const rapidjson::Value& args) {
  auto self = c->self;
  auto& s = c->scope();
  auto target = string_arg(args, "butler");
  auto& limits = self->state.limits;
  if (s.depth + 1 > limits.max_route_depth) {
    refuse(c, "depth", "route_to depth limit");
    c->answer(tool_failed("depth_exceeded",
                          "route_to would be hop " + std::to_string(s.depth + 1)
                            + " of at most "
                            + std::to_string(limits.max_route_depth)
                            + " ([tools] max_route_depth)"));
    return;
  }
  if (target == "messenger") {
    refuse(c, "messenger", "route_to the messenger");
    c->answer(tool_failed("refused", "the messenger is reached through "
                                     "notify, not route_to"));
    return;
  }
  auto seq = c->grant->route_seq.fetch_add(1);
  route_envelope env;
  env.request_id = s.request_id;
  env.received_at = s.received_at;
  env.source_channel = s.channel;
  env.source_endpoint_identity = s.endpoint;
  env.source_sender_identity = s.sender;
  env.source_thread_identity = s.thread;
  env.subrequest_id = make_uuid_v7().to_string();
  // The hop count travels in the segment id: "rt<depth>.<seq>.<work>".
  env.segment_id = "rt" + std::to_string(s.depth + 1) + "."
                   + std::to_string(seq) + "." + s.work_id;
  env.butler = target;
  env.tool = "route.execute";
  env.prompt = string_arg(args, "prompt");
  auto registry = self->state.params.registry;
  self->request(registry, local_call, lookup_atom_v, target)
    .then(
      [c, env, target](butler_actor& hdl) {
        auto self = c->self;
        route_request req{make_route_json(env),
                          "trigger",
                          c->scope().butler,
                          {}};
        self
          ->request(hdl, std::chrono::seconds{10}, route_atom_v, std::move(req))
          .then(
            [c, target](route_response& r) {
              if (r.status == "error") {
                c->answer(tool_failed(r.retryable ? "unavailable" : "refused",
                                      "butler '" + target
                                        + "' refused: " + r.error_class + ": "
                                        + r.error_message));
                return;
              }
              c->answer(tool_ok(R"({"work_id":)" + json::quote(r.work_id)
                                + R"(,"butler":)" + json::quote(target)
                                + R"(,"status":"accepted"})"));
            },
            [c, target](const caf::error& err) {
              c->answer(tool_failed("unavailable",
                                    "butler '" + target + "' unreachable: "
                                      + c->self->system().render(err)));
            });
      },
      [c, target](const caf::error&) {
        c->answer(
          tool_failed("not_found", "no butler '" + target + "' is available"));
      });
}

void recall(const call_ptr& c, const rapidjson::Value& args) {
  auto& s = c->scope();
  std::string request = R"({"request_id":)" + json::quote(s.request_id)
                        + R"(,"received_at":)" + json::quote(s.received_at)
                        + R"(,"channel":)" + json::quote(s.channel)
                        + R"(,"sender":)" + json::quote(s.sender)
                        + R"(,"thread":)" + json::quote(s.thread)
                        + R"(,"butler":)" + json::quote(s.butler)
                        + R"(,"trigger":)" + json::quote(s.trigger_source)
                        + R"(,"prompt":)" + json::quote(s.prompt) + "}";
  if (s.trigger_source != "thread" || s.thread.empty()) {
    c->answer(tool_ok(R"({"request":)" + request + R"(,"messages":[]})"));
    return;
  }
  auto limit = int_or(args, "limit", 20);
  read(c,
       named_statement{"thread_transcript_tail",
                       {s.thread, std::to_string(limit)}},
       [c, request](named_result& r) {
         std::string messages = r.ok && !r.rows.empty() ? r.rows.front().at(0)
                                                        : "[]";
         c->answer(tool_ok(R"({"request":)" + request + R"(,"messages":)"
                           + messages + "}"));
       });
}

// -- dispatch -----------------------------------------------------------------

/// Claude Code's permission prompt (tool_server_approvals.cpp).
void prompt(const call_ptr& c, const rapidjson::Value& args) {
  auto input = args.HasMember("input") ? json::to_string(args["input"])
                                       : std::string{"{}"};
  approval_prompt(c->self, c->scope(), c->token, args["tool_name"].GetString(),
                  std::move(input), [c](tool_result r) {
                    c->answer(std::move(r));
                  });
}

/// What is kept of a call's arguments: all of them when `full`, else
/// their key names (arguments may hold what people wrote).
std::string recorded_arguments(const rapidjson::Document& args, bool full) {
  if (!args.IsObject())
    return R"({"redacted":true,"keys":[]})";
  if (full)
    return json::to_string(args);
  std::string keys;
  for (auto& m : args.GetObject())
    keys += (keys.empty() ? "" : ",")
            + json::quote({m.name.GetString(), m.name.GetStringLength()});
  return R"({"redacted":true,"keys":[)" + keys + "]}";
}

void run_call(tool_server_ptr self, tool_call& call, promise rp) {
  auto& st = self->state;
  tool_result early;
  auto grant = st.ctx->tools->find(call.token);
  if (!grant) {
    early.status = tool_status::unauthorized;
    early.text = "the token is missing, ended or unknown";
    st.refused->inc();
    rp.deliver(std::move(early));
    return;
  }
  auto c = std::make_shared<tool_call_ctx>(
    tool_call_ctx{self,
                  rp,
                  grant,
                  call.name,
                  std::chrono::steady_clock::now(),
                  unix_nanos_now(),
                  {},
                  call.token});
  ++st.in_flight;
  auto* tool = find_tool(call.name);
  if (!tool) {
    early.status = tool_status::unknown_tool;
    early.reason = "unknown_tool";
    early.text = "Unknown tool: " + call.name;
    c->answer(std::move(early));
    return;
  }
  if (st.in_flight > st.params.cfg.max_in_flight) {
    c->answer(tool_failed("overloaded",
                          "the node's tool server is busy ([tools] "
                          "max_in_flight); try again shortly"));
    return;
  }
  auto n = grant->calls.fetch_add(1) + 1;
  if (n > grant->scope.max_calls) {
    c->answer(tool_failed("limit", "this session made its "
                                     + std::to_string(grant->scope.max_calls)
                                     + " tool calls ([[butler]] "
                                       "max_tool_calls)"));
    return;
  }
  rapidjson::Document args;
  auto bad = check_arguments(*tool, call.arguments, args);
  c->recorded = recorded_arguments(args, st.params.cfg.record_arguments);
  if (!bad.empty()) {
    c->answer(tool_failed("invalid_arguments", std::move(bad)));
    return;
  }
  using fn = void (*)(const call_ptr&, const rapidjson::Value&);
  static const std::vector<std::pair<std::string, fn>> table{
    {"notify", notify},
    {"state_get", state_get},
    {"state_put", state_put},
    {"state_list", state_list},
    {"state_delete", state_delete},
    {"remind", remind},
    {"remind_cancel", remind_cancel},
    {"remind_list", remind_list},
    {"route_to", route_to},
    {"recall", recall},
    {"approval_prompt", prompt},
  };
  for (auto& [name, f] : table)
    if (name == call.name) {
      f(c, args);
      return;
    }
  c->answer(tool_failed("internal", "tool " + call.name + " has no handler"));
}

// -- the reminder sweep -------------------------------------------------------

/// Hands one claimed reminder to its butler; marks it fired once stored.
void fire_reminder(tool_server_ptr self, std::vector<std::string> row) {
  auto& st = self->state;
  route_envelope env;
  env.request_id = row.at(0);
  env.received_at = rfc3339_utc(unix_now_us());
  env.source_channel = row.at(3);
  env.source_endpoint_identity = row.at(4);
  env.source_sender_identity = row.at(5);
  env.source_thread_identity = row.at(6);
  env.subrequest_id = row.at(0);
  env.segment_id = "reminder";
  env.butler = row.at(1);
  env.tool = "route.execute";
  env.prompt = row.at(2);
  auto id = row.at(0);
  auto name = row.at(1);
  self->request(st.params.registry, local_call, lookup_atom_v, name)
    .then(
      [self, env, id, name](butler_actor& hdl) {
        route_request req{make_route_json(env), "reminder", {}, {}};
        self
          ->request(hdl, std::chrono::seconds{10}, route_atom_v, std::move(req))
          .then(
            [self, id, name](route_response& r) {
              if (r.status == "error") {
                // Left 'firing': the lease runs out and a sweep tries again.
                spdlog::warn("reminder {} of butler {} not taken: {}: {}", id,
                             name, r.error_class, r.error_message);
                return;
              }
              // A duplicate: another claim of it was handed over already.
              if (!r.duplicate)
                self->state.reminders_fired->inc();
              spdlog::info("reminder {} of butler {} fired (work {}{})", id,
                           name, r.work_id, r.duplicate ? ", duplicate" : "");
              self->state.writes.exec(
                self, named_statement{"reminder_fired", {id}, id},
                [](named_result&) {}, [](const caf::error&) {});
            },
            [id](const caf::error&) {
              spdlog::warn("reminder {}: butler unreachable; retried", id);
            });
      },
      [id, name](const caf::error&) {
        spdlog::warn("reminder {}: butler {} not available; retried", id, name);
      });
}

void sweep(tool_server_ptr self) {
  auto& st = self->state;
  // Not before the writer is connected: a write refused then would count
  // as the database being unavailable.
  if (st.sweeping || st.params.butlers.empty()
      || !st.ctx->status.database_ready.load())
    return;
  st.sweeping = true;
  std::string names = "{";
  for (auto& b : st.params.butlers)
    names += (names.size() > 1 ? "," : "") + json::quote(b);
  names += "}";
  st.writes.exec(
    self,
    named_statement{"reminder_claim", {names, "30", "50"}, "reminder_claim"},
    [self](named_result& r) {
      self->state.sweeping = false;
      if (!r.ok)
        return;
      for (auto& row : r.rows)
        fire_reminder(self, row);
    },
    [self](const caf::error&) {
      self->state.sweeping = false;
    });
}

} // namespace

tool_server_actor::behavior_type tool_server(tool_server_ptr self,
                                             tool_server_params params,
                                             node_context_ptr ctx) {
  auto& st = self->state;
  st.params = std::move(params);
  st.ctx = std::move(ctx);
  st.writes.set_writer(st.params.writer);
  st.limits.max_value_bytes = st.params.cfg.max_value_bytes;
  st.limits.max_route_depth = st.params.cfg.max_route_depth;
  auto& m = st.ctx->metrics;
  st.refused = &m.get_counter("butlers_tool_unauthorized_total",
                              "Tool calls refused for a missing, ended or "
                              "foreign token, or out of their scope");
  st.reminders_fired = &m.get_counter("butlers_reminders_fired_total",
                                      "Reminders handed to their butler");
  st.duration = &m.get_histogram("butlers_tool_call_duration_ms",
                                 "Tool calls from arrival to answer");
  init_approvals(self);
  self->send(self, caf::tick_atom_v);
  return {
    [self](tool_atom, tool_call& call) -> caf::result<tool_result> {
      auto rp = self->make_response_promise<tool_result>();
      run_call(self, call, rp);
      return rp;
    },
    [self](caf::tick_atom) {
      sweep(self);
      approval_sweep(self);
      self->delayed_send(self,
                         std::chrono::milliseconds{
                           self->state.params.cfg.reminder_poll_ms},
                         caf::tick_atom_v);
    },
    [self](timeout_atom, const std::string& work_id) {
      end_wait(self, work_id, nullptr);
    },
    [self](approve_atom, tool_call& call) -> caf::result<tool_result> {
      auto rp = self->make_response_promise<tool_result>();
      approval_ask(self, std::move(call), rp);
      return rp;
    },
    [self](approve_atom, std::string& id, std::string& run_id, bool approve,
           std::string& caller) -> caf::result<tool_result> {
      auto rp = self->make_response_promise<tool_result>();
      approval_answer(self, std::move(id), std::move(run_id), approve,
                      std::move(caller), [rp](tool_result r) mutable {
                        rp.deliver(std::move(r));
                      });
      return rp;
    },
    [self](approve_atom, approval_mail& m) -> caf::result<tool_result> {
      auto rp = self->make_response_promise<tool_result>();
      approval_mail_answer(self, std::move(m), [rp](tool_result r) mutable {
        rp.deliver(std::move(r));
      });
      return rp;
    },
    [self](approve_atom, const std::string& bot, const std::string& update) {
      approval_callback(self, bot, update);
    },
    [self](approve_atom, const std::string& id, int64_t message_id) {
      approval_noticed(self, id, message_id);
    },
    [self](expire_atom, const std::string& id) {
      approval_expire(self, id);
    },
    [self](done_atom, route_response& r) {
      end_wait(self, r.work_id, &r);
    },
  };
}

} // namespace butlers
