// The tool server's approvals (runtime/approvals.md): a session's question
// is stored through the writer (or found again when a retried run asks it
// a second time), put to the run's starter (a Telegram message with
// Approve / Deny buttons, a mail (actors/tool_server_approval_mail.cpp), an
// `approval` event on the thread's stream), and answered when the starter
// answers (the HTTP API, a button, a mail) or when it expires (denied). Nothing
// here blocks: the Bot API is called on a thread of its own, and the session's
// request is answered later through its promise.

#include <cstdlib>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <rapidjson/document.h>
#include <spdlog/spdlog.h>

#include "actors/tool_server.hpp"
#include "runtime/approvals.hpp"
#include "runtime/http_client.hpp"
#include "runtime/json.hpp"
#include "runtime/telegram.hpp"
#include "runtime/threads.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

tool_result decided(const std::string& id, const std::string& status) {
  tool_result r;
  r.status = tool_status::ok;
  r.structured = R"({"approval_id":)" + json::quote(id) + R"(,"status":)"
                 + json::quote(status) + "}";
  r.text = status;
  return r;
}

const connector_config* bot_for(tool_server_ptr self,
                                const std::string& endpoint) {
  auto& bots = self->state.params.telegram;
  for (auto& c : bots)
    if (c.endpoint_identity == endpoint)
      return &c;
  return bots.size() == 1 ? &bots.front() : nullptr;
}

/// Calls Bot API `method` on the approvals' thread; `then` runs there.
void bot_call(tool_server_ptr self, const connector_config& bot,
              const char* method, std::string body,
              std::function<void(const telegram_answer&)> then = {}) {
  http_request req;
  req.method = "POST";
  req.url = bot.api_base + "/bot" + bot.token + "/" + method;
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = std::move(body);
  req.timeout = std::chrono::seconds{10};
  std::string what = method;
  auto posted = self->state.approval_io->post(
    [req = std::move(req), what, then = std::move(then)] {
      auto a = read_telegram_answer(shared_http_client().perform(req));
      if (a.what != telegram_answer::outcome::ok)
        spdlog::warn("approvals: Telegram {} failed: {}: {}", what,
                     a.error_class, a.description);
      if (then)
        then(a);
    });
  if (!posted)
    spdlog::warn("approvals: Telegram {} dropped: the queue is full", method);
}

/// `approval` on the thread's stream (thread API runs only).
void publish(tool_server_ptr self, const approval_wait& w,
             const std::string& status) {
  auto& hub = self->state.ctx->events;
  if (!hub || w.channel != "api" || w.thread.empty())
    return;
  auto body = R"({"approval_id":)" + json::quote(w.approval_id)
              + R"(,"run_id":)" + json::quote(w.run_id) + R"(,"tool":)"
              + json::quote(w.tool) + R"(,"summary":)" + json::quote(w.summary)
              + R"(,"status":)" + json::quote(status)
              + R"(,"expires_at_unix_ms":)" + std::to_string(w.expires_ms)
              + "}";
  hub->publish_thread(w.thread, sse_frame("approval", body));
}

/// Puts the question to the run's starter.
void put_question(tool_server_ptr self, const approval_wait& w) {
  publish(self, w, "pending");
  if (w.channel == "email")
    approval_mail_question(self, w);
  if (w.channel != "telegram")
    return;
  auto* bot = bot_for(self, w.endpoint);
  if (bot == nullptr || w.thread.empty()) {
    spdlog::warn("approval {}: no Telegram connector for bot {}; it can be "
                 "answered through the API until it expires",
                 w.approval_id, w.endpoint);
    return;
  }
  auto secs = std::max<int64_t>(0, (w.expires_ms - unix_now_ms()) / 1000);
  auto text = approval_question_text(w.butler, w.tool, w.summary,
                                     static_cast<uint32_t>(secs));
  tool_server_actor me{self};
  auto id = w.approval_id;
  bot_call(self, *bot, "sendMessage",
           approval_question_body(w.thread, text, w.approval_id),
           [me, id](const telegram_answer& a) {
             if (a.what == telegram_answer::outcome::ok
                 && !a.message_id.empty())
               caf::anon_send(me, approve_atom_v, id,
                              static_cast<int64_t>(
                                std::strtoll(a.message_id.c_str(), nullptr,
                                             10)));
           });
}

/// The question is decided: its sessions hear it, its message and stream
/// show it.
void resolve(tool_server_ptr self, approval_wait w, const std::string& status,
             const std::string& by) {
  auto& st = self->state;
  auto i = st.approvals.find(w.approval_id);
  if (i != st.approvals.end()) {
    w.sessions = std::move(i->second.sessions);
    if (w.notice_ref.empty())
      w.notice_ref = i->second.notice_ref;
    st.approvals.erase(i);
  }
  for (auto& rp : w.sessions)
    rp.deliver(decided(w.approval_id, status));
  (status == "expired" ? st.approvals_expired : st.approvals_answered)->inc();
  spdlog::info("approval {}: {} {} for run {} ({})", w.approval_id, w.tool,
               status, w.run_id, by);
  publish(self, w, status);
  // "telegram:<chat>:<message_id>"
  auto& ref = w.notice_ref;
  auto last = ref.rfind(':');
  if (ref.compare(0, 9, "telegram:") != 0 || last <= 9)
    return;
  auto* bot = bot_for(self, w.endpoint);
  if (bot == nullptr)
    return;
  auto chat = ref.substr(9, last - 9);
  auto mid = std::strtoll(ref.c_str() + last + 1, nullptr, 10);
  auto text = w.butler + " asked to use " + w.tool + ": " + w.summary + "\n"
              + (status == "approved" ? "Approved"
                 : status == "denied" ? "Denied"
                                      : "Expired without an answer: denied");
  bot_call(self, *bot, "editMessageText",
           approval_outcome_body(chat, mid, text));
}

/// Writes `status` for a pending question; `done(true)` when it was
/// pending, `done(false)` when it was not, nullopt when the write failed;
/// on the actor's thread.
void write_answer(tool_server_ptr self, const std::string& id,
                  const std::string& status, const std::string& by,
                  std::function<void(std::optional<bool>)> done,
                  const std::string& key = {}) {
  self->state.writes.exec(
    self, named_statement{"approval_answer", {id, status, by, key}},
    [done](named_result& r) {
      done(r.ok ? std::optional<bool>{!r.rows.empty()} : std::nullopt);
    },
    [done, id](const caf::error& err) {
      spdlog::warn("approval {}: the answer was not stored: {}", id,
                   to_string(err));
      done(std::nullopt);
    });
}

/// Keeps the session's promise until the question `row` is decided.
void wait_for(tool_server_ptr self, approval_wait w, bool put,
              caf::typed_response_promise<tool_result> rp) {
  auto& st = self->state;
  auto id = w.approval_id;
  auto i = st.approvals.find(id);
  if (i == st.approvals.end()) {
    auto left = std::max<int64_t>(0, w.expires_ms - unix_now_ms());
    self->delayed_send(self, std::chrono::milliseconds{left}, expire_atom_v,
                       id);
    i = st.approvals.emplace(id, std::move(w)).first;
    if (put)
      put_question(self, i->second);
  }
  i->second.sessions.push_back(std::move(rp));
}

} // namespace

approval_wait approval_wait_of(const std::string& id,
                               const std::vector<std::string>& row,
                               size_t first) {
  auto col = [&](size_t i) -> const std::string& {
    return row[first + i];
  };
  approval_wait w;
  w.approval_id = id;
  w.run_id = col(0);
  w.butler = col(1);
  w.tool = col(2);
  w.summary = col(3);
  w.expires_ms = std::strtoll(col(5).c_str(), nullptr, 10);
  w.channel = col(6);
  w.endpoint = col(7);
  w.sender = col(8);
  w.thread = col(9);
  w.notice_ref = col(11);
  return w;
}

void init_approvals(tool_server_ptr self) {
  auto& st = self->state;
  auto& m = st.ctx->metrics;
  const char* name = "butlers_approvals_total";
  const char* help = "Approval questions by outcome: asked, answered "
                     "(approved or denied by a person), expired";
  st.approvals_asked = &m.get_counter(name, help, R"(outcome="asked")");
  st.approvals_answered = &m.get_counter(name, help, R"(outcome="answered")");
  st.approvals_expired = &m.get_counter(name, help, R"(outcome="expired")");
  st.approvals_refused = &m.get_counter("butlers_approval_refusals_total",
                                        "Answers to approval questions "
                                        "refused: not the run's starter");
  st.approval_io = std::make_shared<blocking_pool>(1, 256);
}

void approval_ask(tool_server_ptr self, tool_call call,
                  caf::typed_response_promise<tool_result> rp) {
  auto& st = self->state;
  auto grant = st.ctx->tools->find(call.token);
  if (!grant) {
    st.refused->inc();
    rp.deliver(decided("", "denied"));
    return;
  }
  auto& sc = grant->scope;
  rapidjson::Document args;
  if (json::parse(call.arguments, args) || !args.IsObject())
    args.SetObject();
  auto summary = approval_summary(string_arg(args, "summary"));
  auto t = args.HasMember("timeout_s") && args["timeout_s"].IsUint()
             ? args["timeout_s"].GetUint()
             : 600u;
  // Without a person behind the run (a schedule, a reminder) nobody can
  // be asked.
  if (sc.sender.empty() || sc.trigger_source == "schedule"
      || sc.trigger_source == "reminder"
      || st.approvals.size() >= max_approvals_waiting) {
    spdlog::info("approval for {} of work {}: nobody to ask (or too many "
                 "waiting); denied",
                 call.name, sc.work_id);
    rp.deliver(decided("", "denied"));
    return;
  }
  st.approvals_asked->inc();
  approval_wait w;
  w.approval_id = make_uuid_v7().to_string();
  w.run_id = sc.request_id;
  w.butler = sc.butler;
  w.tool = call.name;
  w.summary = summary;
  w.channel = sc.channel;
  w.endpoint = sc.endpoint;
  w.sender = sc.sender;
  w.thread = sc.thread;
  auto key = call.name + "\n" + summary;
  named_statement stmt{"approval_ask",
                       {w.approval_id, w.run_id, sc.work_id, w.butler, w.tool,
                        w.summary, key, w.channel, w.endpoint, w.sender,
                        w.thread, std::to_string(t)}};
  st.writes.exec(
    self, std::move(stmt),
    [self, w, rp](named_result& r) mutable {
      if (!r.ok || r.rows.empty() || r.rows[0].size() < 6) {
        rp.deliver(decided(w.approval_id, "denied"));
        return;
      }
      auto& row = r.rows[0];
      w.approval_id = row[0];
      w.expires_ms = std::strtoll(row[2].c_str(), nullptr, 10);
      w.notice_ref = row[4];
      if (row[1] != "pending") {
        // Answered before this run asked again (a restart).
        rp.deliver(decided(w.approval_id, row[1]));
        return;
      }
      // A mail is put again: the messenger sends it once (its delivery
      // is keyed by the question), whether or not it went out before.
      bool put = row[5] == "t" || w.notice_ref.empty() || w.channel == "email";
      if (row[5] != "t")
        spdlog::info("approval {}: asked again by a retried run; still "
                     "pending",
                     w.approval_id);
      wait_for(self, std::move(w), put, std::move(rp));
    },
    [w, rp](const caf::error& err) mutable {
      spdlog::warn("approval for {}: not stored ({}); denied", w.tool,
                   to_string(err));
      rp.deliver(decided("", "denied"));
    });
}

void approval_answer(tool_server_ptr self, std::string id, std::string run_id,
                     bool approve, std::string caller,
                     std::function<void(tool_result)> done, std::string key) {
  auto& st = self->state;
  if (!st.params.reader) {
    done(tool_failed("unavailable", "no database reader"));
    return;
  }
  self
    ->request(st.params.reader, local_call, read_atom_v,
              named_statement{"approval_get", {id}})
    .then(
      [self, id, run_id, approve, caller, done, key](named_result& r) {
        if (!r.ok || r.rows.empty() || r.rows[0].size() < 12
            || (!run_id.empty() && r.rows[0][0] != run_id)) {
          done(tool_failed("not_found",
                           "no approval " + id
                             + (run_id.empty() ? std::string{}
                                               : " for run " + run_id)));
          return;
        }
        auto w = approval_wait_of(id, r.rows[0]);
        if (!approval_caller_matches(w.channel, w.sender, caller)) {
          self->state.approvals_refused->inc();
          spdlog::warn("approval {}: an answer from {} was refused: only the "
                       "run's starter ({}:{}) may answer",
                       id, caller, w.channel, w.sender);
          done(tool_failed("forbidden",
                           "only the person who started the run may answer"));
          return;
        }
        if (r.rows[0][4] != "pending" && !key.empty() && r.rows[0].size() > 12
            && r.rows[0][12] == key) {
          // The same message again (a redelivery): the answer it gave.
          done(decided(id, r.rows[0][4]));
          return;
        }
        if (r.rows[0][4] != "pending") {
          done(tool_failed("conflict",
                           "approval " + id + " is already " + r.rows[0][4],
                           R"({"approval_id":)" + json::quote(id)
                             + R"(,"status":)" + json::quote(r.rows[0][4])
                             + "}"));
          return;
        }
        std::string status = approve ? "approved" : "denied";
        write_answer(
          self, id, status, caller,
          [self, w, status, caller, done](std::optional<bool> stored) {
            if (!stored) {
              done(tool_failed("unavailable", "approval " + w.approval_id
                                                + ": the answer was not "
                                                  "stored"));
              return;
            }
            if (!*stored) {
              done(tool_failed("conflict", "approval " + w.approval_id
                                             + " was answered already"));
              return;
            }
            resolve(self, w, status, caller);
            done(decided(w.approval_id, status));
          },
          key);
      },
      [done](const caf::error& err) {
        done(tool_failed("unavailable", to_string(err)));
      });
}

void approval_callback(tool_server_ptr self, const std::string& bot,
                       const std::string& update_json) {
  auto cb = parse_approval_callback(update_json);
  if (!cb) {
    spdlog::debug("approvals: a callback_query that is not an approval's");
    return;
  }
  auto* conn = bot_for(self, bot);
  auto reply = [self, conn, cid = cb->callback_id](const std::string& text) {
    if (conn != nullptr)
      bot_call(self, *conn, "answerCallbackQuery",
               answer_callback_body(cid, text));
  };
  approval_answer(self, cb->approval_id, "", cb->approve,
                  "telegram:" + cb->from, [reply](tool_result r) {
                    if (r.status == tool_status::ok)
                      reply(r.text == "approved" ? "Approved" : "Denied");
                    else if (r.reason == "forbidden")
                      reply("Only the person who asked can answer this.");
                    else if (r.reason == "conflict")
                      reply("This was answered already.");
                    else
                      reply("Unknown or unavailable request.");
                  });
}

void approval_noticed(tool_server_ptr self, const std::string& id,
                      int64_t message_id) {
  auto& st = self->state;
  auto i = st.approvals.find(id);
  if (i == st.approvals.end())
    return;
  auto ref = "telegram:" + i->second.thread + ":" + std::to_string(message_id);
  i->second.notice_ref = ref;
  st.writes.exec(
    self, named_statement{"approval_notice", {id, ref}}, [](named_result&) {},
    [](const caf::error&) {});
}

void approval_expire(tool_server_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.approvals.find(id);
  if (i == st.approvals.end())
    return; // decided already
  auto w = i->second;
  w.sessions.clear();
  write_answer(self, id, "expired", "timeout",
               [self, w](std::optional<bool> stored) {
                 if (stored.value_or(false)) {
                   resolve(self, w, "expired", "timeout");
                   return;
                 }
                 // Answered meanwhile (that answer resolves it and the retry
                 // finds nothing), or the write failed: try again in a second.
                 self->delayed_send(self, std::chrono::seconds{1},
                                    expire_atom_v, w.approval_id);
               });
}

void approval_sweep(tool_server_ptr self) {
  auto& st = self->state;
  if (++st.approval_ticks * st.params.cfg.reminder_poll_ms < 60000
      || !st.ctx->status.database_ready.load())
    return;
  st.approval_ticks = 0;
  st.writes.exec(
    self, named_statement{"approval_expire_due", {}, "approval_expire_due"},
    [](named_result& r) {
      if (r.ok && !r.rows.empty())
        spdlog::info("approvals: {} questions nobody waited for expired",
                     r.rows.size());
    },
    [](const caf::error&) {});
}

void approval_prompt(tool_server_ptr self, const tool_scope& scope,
                     std::string token, std::string tool, std::string input,
                     std::function<void(tool_result)> done) {
  auto allow = [input] {
    return tool_ok(R"({"behavior":"allow","updatedInput":)" + input + "}");
  };
  auto deny = [](const std::string& why) {
    return tool_ok(R"({"behavior":"deny","message":)" + json::quote(why) + "}");
  };
  auto mode = scope.approvals.decide(tool);
  if (mode != approval_mode::ask) {
    spdlog::info("approval for {} of work {}: {} by the butler's policy", tool,
                 scope.work_id,
                 mode == approval_mode::allow ? "approved" : "denied");
    done(mode == approval_mode::allow
           ? allow()
           : deny("denied by the butler's approval policy"));
    return;
  }
  // What the person sees: a command as it is, anything else as JSON.
  rapidjson::Document parsed;
  auto summary = !json::parse(input, parsed) && parsed.IsObject()
                     && parsed.HasMember("command")
                     && parsed["command"].IsString()
                   ? std::string{parsed["command"].GetString()}
                   : input;
  tool_call ask;
  ask.token = std::move(token);
  ask.name = std::move(tool);
  ask.arguments = R"({"summary":)" + json::quote(approval_summary(summary))
                  + R"(,"timeout_s":)"
                  + std::to_string(scope.approvals.timeout_s) + "}";
  // Asked as the session's own approval requests are: the answer comes by
  // the question's expiry at the latest.
  self
    ->request(caf::actor_cast<tool_server_actor>(self), caf::infinite,
              approve_atom_v, std::move(ask))
    .then(
      [done, allow, deny](const tool_result& r) {
        done(r.status == tool_status::ok && approval_granted(r.text)
               ? allow()
               : deny("the person who started the run did not approve it"));
      },
      [done, deny](const caf::error& err) {
        done(deny("the approval request failed: " + to_string(err)));
      });
}

} // namespace butlers
