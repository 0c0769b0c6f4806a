#include "actors/thread.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using thread_ptr = thread_actor::stateful_pointer<thread_state>;
using directory_ptr = thread_directory_actor::stateful_pointer<
  thread_directory_state>;

/// Recent message ids a thread remembers per activation.
constexpr size_t max_recent = 64;

int64_t now_ms() {
  return unix_now_us() / 1000;
}

thread_activity& activity(thread_ptr self) {
  auto& st = self->state;
  if (!st.act)
    st.act = std::make_unique<thread_activity>();
  return *st.act;
}

/// Frees the activity once nothing is going on.
void maybe_idle(thread_ptr self) {
  auto& st = self->state;
  if (st.act && st.act->empty()) {
    st.act.reset();
    st.idle_since_ms = now_ms();
  }
}

turn_result refused(uint32_t status, std::string error, std::string message,
                    std::string active_run_id = {}) {
  turn_result r;
  r.status = status;
  r.error = std::move(error);
  r.message = std::move(message);
  r.active_run_id = std::move(active_run_id);
  return r;
}

thread_run* find_run(std::vector<thread_run>& xs, const std::string& key,
                     bool by_work) {
  for (auto& r : xs)
    if ((by_work ? r.work_id : r.run_id) == key && !key.empty())
      return &r;
  return nullptr;
}

// -- events -------------------------------------------------------------------

void publish_summary(thread_ptr self) {
  auto& st = self->state;
  auto& hub = st.env->hub;
  if (!hub || !hub->wants_summary())
    return;
  std::string active = "[";
  size_t queued = 0;
  if (st.act) {
    for (auto& r : st.act->runs) {
      if (active.size() > 1)
        active += ',';
      active += json::quote(r.run_id);
    }
    queued = st.act->queued.size();
  }
  active += ']';
  bool running = active.size() > 2;
  std::string body = R"({"thread_id":)" + json::quote(st.id)
                     + R"(,"run_status":)"
                     + (running ? R"("running")" : R"("idle")")
                     + R"(,"active_run_ids":)" + active + R"(,"queued_runs":)"
                     + std::to_string(queued) + R"(,"updated_at_unix_ms":)"
                     + std::to_string(now_ms()) + "}";
  hub->publish_summary(st.id, sse_frame("summary", body));
}

void publish(thread_ptr self, const char* type, const std::string& body,
             std::string_view id = {}) {
  auto& st = self->state;
  auto& hub = st.env->hub;
  if (!hub || !hub->wants_thread(st.id))
    return;
  hub->publish_thread(st.id, sse_frame(type, body, id));
}

void publish_message(thread_ptr self, int64_t cursor,
                     const std::string& message_id, const char* role,
                     const std::string& kind, const std::string& run_id,
                     const std::string& butler, const std::string& body) {
  auto& st = self->state;
  if (!st.env->hub || !st.env->hub->wants_thread(st.id))
    return;
  auto c = std::to_string(cursor);
  publish(self, "transcript",
          R"({"thread_id":)" + json::quote(st.id) + R"(,"cursor":)" + c
            + R"(,"message_id":)" + json::quote(message_id) + R"(,"role":")"
            + role + R"(","kind":)" + json::quote(kind) + R"(,"run_id":)"
            + json::quote(run_id) + R"(,"butler":)" + json::quote(butler)
            + R"(,"body":)" + json::quote(body) + "}",
          c);
}

void publish_run(thread_ptr self, const std::string& run_id,
                 const std::string& butler, const std::string& state,
                 const std::string& error = {}) {
  auto& st = self->state;
  if (st.env->hub && st.env->hub->wants_thread(st.id)) {
    std::string body = R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
                       + json::quote(run_id) + R"(,"butler":)"
                       + json::quote(butler) + R"(,"state":)"
                       + json::quote(state);
    if (!error.empty())
      body += R"(,"error":)" + json::quote(error);
    publish(self, "run", body + "}");
  }
  publish_summary(self);
}

// -- runs ---------------------------------------------------------------------

void process_next(thread_ptr self);
void start_run(thread_ptr self, std::string run_id, std::string butler,
               butler_actor hdl, std::string text);
void start_queued(thread_ptr self, const std::string& butler);

/// Writes a run's state change (off the critical path; counted in
/// `writes` so the thread does not retire under it).
void write_run_state(thread_ptr self, const std::string& run_id,
                     const std::string& state, const std::string& work_id) {
  auto& st = self->state;
  ++activity(self).writes;
  self
    ->request(st.env->writer, st.env->timeout, exec_atom_v,
              named_statement{"thread_run_update",
                              {run_id, state, work_id, "", ""},
                              st.id})
    .then(
      [self](const named_result&) {
        --activity(self).writes;
        maybe_idle(self);
      },
      [self, run_id](const caf::error& err) {
        --activity(self).writes;
        spdlog::warn("thread {}: run {} state not written: {}", self->state.id,
                     run_id, self->system().render(err));
        maybe_idle(self);
      });
}

/// A run ended (or never started): its answer joins the transcript, the
/// run leaves the active set, and the next queued run of its butler starts.
void finish_run(thread_ptr self, std::string run_id, std::string butler,
                std::string state, std::string kind, std::string body,
                std::string detail, std::string error_class) {
  auto& st = self->state;
  auto& act = activity(self);
  auto drop = [&](std::vector<thread_run>& xs) {
    auto i = std::find_if(xs.begin(), xs.end(), [&](const thread_run& r) {
      return r.run_id == run_id;
    });
    if (i == xs.end())
      return false;
    xs.erase(i);
    return true;
  };
  drop(act.runs);
  drop(act.stopping);
  self->send(st.env->directory, run_atom_v, run_id, st.id, false);
  ++act.writes;
  self
    ->request(st.env->writer, st.env->timeout, exec_atom_v,
              named_statement{"thread_reply_insert",
                              {st.id, run_id, butler, kind, body, detail, state,
                               error_class}})
    .then(
      [self, run_id, butler, state, kind, body](const named_result& r) {
        --activity(self).writes;
        if (r.ok && !r.rows.empty() && !r.rows[0].empty())
          publish_message(self, std::stoll(r.rows[0][0]), "run:" + run_id,
                          "assistant", kind, run_id, butler, body);
        publish_run(self, run_id, butler, state);
        maybe_idle(self);
      },
      [self, run_id](const caf::error& err) {
        --activity(self).writes;
        spdlog::warn("thread {}: outcome of run {} not written: {}",
                     self->state.id, run_id, self->system().render(err));
        maybe_idle(self);
      });
  // The next queued run of this butler starts unless another run (an
  // interrupt's) is active already.
  start_queued(self, butler);
}

/// Reserves the active slot of `butler` for run `run_id` at once (so no
/// other start overtakes it), then looks the butler up and starts the run.
void launch(thread_ptr self, std::string run_id, std::string butler,
            std::string text) {
  auto& st = self->state;
  auto& act = activity(self);
  act.runs.push_back(thread_run{run_id, butler, {}, {}, {}, false});
  self->request(st.env->registry, st.env->timeout, lookup_atom_v, butler)
    .then(
      [self, run_id, butler, text](const butler_actor& hdl) {
        auto& act = activity(self);
        auto r = find_run(act.runs, run_id, false);
        if (r == nullptr)
          return; // cancelled meanwhile (and finished as such)
        auto unsent = std::move(r->unsent);
        act.runs.erase(act.runs.begin() + (r - act.runs.data()));
        start_run(self, run_id, butler, hdl, text);
        if (auto again = find_run(activity(self).runs, run_id, false))
          again->unsent = std::move(unsent);
      },
      [self, run_id, butler](const caf::error&) {
        finish_run(self, run_id, butler, "error", "error",
                   "butler '" + butler + "' is not available", "",
                   "target_unavailable");
      });
}

/// Starts the oldest queued run of `butler`, if any and none is active.
void start_queued(thread_ptr self, const std::string& butler) {
  auto& act = activity(self);
  if (std::find_if(act.runs.begin(), act.runs.end(),
                   [&](const thread_run& r) {
                     return r.butler == butler;
                   })
      != act.runs.end())
    return;
  auto i = std::find_if(act.queued.begin(), act.queued.end(),
                        [&](const queued_run& q) {
                          return q.butler == butler;
                        });
  if (i == act.queued.end()) {
    maybe_idle(self);
    return;
  }
  auto q = std::move(*i);
  act.queued.erase(i);
  write_run_state(self, q.run_id, "accepted", "");
  launch(self, std::move(q.run_id), std::move(q.butler), std::move(q.text));
}

/// Hands a run to its butler: route.execute with this thread as reply_to.
void start_run(thread_ptr self, std::string run_id, std::string butler,
               butler_actor hdl, std::string text) {
  auto& st = self->state;
  auto& act = activity(self);
  act.runs.push_back(thread_run{run_id, butler, hdl, {}, {}, false});
  self->send(st.env->directory, run_atom_v, run_id, st.id, true);
  st.env->started->inc();
  publish_run(self, run_id, butler, "accepted");
  route_envelope env;
  env.request_id = run_id;
  env.received_at = rfc3339_utc(unix_now_us());
  env.source_channel = "api";
  env.source_endpoint_identity = "threads";
  env.source_sender_identity = "api";
  env.source_thread_identity = st.id;
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = std::move(text);
  route_request req{make_route_json(env),
                    "thread",
                    {},
                    caf::actor_cast<caf::actor>(self)};
  self->request(hdl, st.env->timeout, route_atom_v, std::move(req))
    .then(
      [self, run_id, butler](const route_response& resp) {
        auto& act = activity(self);
        auto r = find_run(act.runs, run_id, false);
        if (r == nullptr)
          r = find_run(act.stopping, run_id, false);
        if (r == nullptr)
          return;
        if (resp.status != "accepted") {
          finish_run(self, run_id, butler, "error", "error",
                     resp.error_class + ": " + resp.error_message, "",
                     resp.error_class);
          return;
        }
        r->work_id = resp.work_id;
        for (auto& in : r->unsent)
          caf::anon_send(r->hdl, steer_atom_v, r->work_id, std::move(in));
        r->unsent.clear();
        if (r->cancel)
          caf::anon_send(r->hdl, cancel_atom_v, r->work_id);
        write_run_state(self, run_id, "running", resp.work_id);
        publish_run(self, run_id, butler, "running");
      },
      [self, run_id, butler](const caf::error& err) {
        auto& act = activity(self);
        if (find_run(act.runs, run_id, false) == nullptr
            && find_run(act.stopping, run_id, false) == nullptr)
          return;
        finish_run(self, run_id, butler, "error", "error",
                   "butler '" + butler
                     + "' did not take the run: " + self->system().render(err),
                   "", "target_unavailable");
      });
}

/// Stops an active run: it moves to `stopping` (no longer active) and its
/// butler cancels the work item.
void cancel_run(thread_ptr self, const std::string& run_id) {
  auto& act = activity(self);
  auto i = std::find_if(act.runs.begin(), act.runs.end(),
                        [&](const thread_run& r) {
                          return r.run_id == run_id;
                        });
  if (i == act.runs.end())
    return;
  auto run = std::move(*i);
  act.runs.erase(i);
  self->state.env->cancelled->inc();
  if (!run.hdl) {
    // Not handed to its butler yet (the lookup is out): nothing runs.
    finish_run(self, run.run_id, run.butler, "cancelled", "cancelled",
               "cancelled", "", "");
    return;
  }
  if (!run.work_id.empty())
    caf::anon_send(run.hdl, cancel_atom_v, run.work_id);
  else
    run.cancel = true;
  publish_run(self, run.run_id, run.butler, "cancelling");
  act.stopping.push_back(std::move(run));
}

/// A butler reported the outcome of a run's work item.
void on_outcome(thread_ptr self, route_response& resp) {
  auto& act = activity(self);
  bool stopping = false;
  auto r = find_run(act.runs, resp.work_id, true);
  if (r == nullptr) {
    r = find_run(act.stopping, resp.work_id, true);
    stopping = r != nullptr;
  }
  if (r == nullptr) {
    maybe_idle(self);
    return;
  }
  auto run_id = r->run_id;
  auto butler = r->butler;
  if (resp.status == "ok") {
    std::string reply;
    rapidjson::Document doc;
    if (!json::parse(resp.result, doc) && doc.IsObject()
        && doc.HasMember("reply") && doc["reply"].IsString())
      reply = doc["reply"].GetString();
    finish_run(self, run_id, butler, "ok", "reply", std::move(reply),
               resp.result, "");
    return;
  }
  bool cancelled = stopping && resp.error_message == "cancelled";
  finish_run(self, run_id, butler, cancelled ? "cancelled" : "error",
             cancelled ? "cancelled" : "error",
             cancelled ? "cancelled"
                       : resp.error_class + ": " + resp.error_message,
             "", cancelled ? "" : resp.error_class);
}

// -- turns --------------------------------------------------------------------

void answer(thread_ptr self, pending_turn& pt, turn_result r) {
  auto& act = activity(self);
  if (r.status == 200) {
    act.recent.emplace_back(pt.turn.message_id, r);
    if (act.recent.size() > max_recent)
      act.recent.pop_front();
  }
  pt.rp.deliver(std::move(r));
  act.busy = false;
  // Outcomes that arrived meanwhile apply now.
  auto deferred = std::move(act.deferred);
  act.deferred.clear();
  for (auto& resp : deferred)
    on_outcome(self, resp);
  process_next(self);
}

/// The turn's decision is made; store it, then apply it.
void persist_and_apply(thread_ptr self, pending_turn pt, butler_actor hdl,
                       std::string butler, std::string kind, std::string run_id,
                       std::string replaced) {
  auto& st = self->state;
  auto& t = pt.turn;
  named_statement stmt{"thread_turn_insert",
                       {st.id, t.message_id, t.text, run_id, kind, butler}};
  auto shared = std::make_shared<pending_turn>(std::move(pt));
  self->request(st.env->writer, st.env->timeout, exec_atom_v, std::move(stmt))
    .then(
      [self, shared, hdl, butler, kind, run_id,
       replaced](const named_result& r) {
        auto& st = self->state;
        auto& pt = *shared;
        if (!r.ok || r.rows.empty() || r.rows[0].size() < 4) {
          answer(self, pt,
                 refused(500, "internal_error",
                         "the turn could not be stored"));
          return;
        }
        auto& row = r.rows[0];
        turn_result res;
        res.cursor = std::stoll(row[1]);
        res.run_id = row[2];
        res.kind = row[3];
        if (row[0] != "t") {
          // A retry: the original answer, nothing applied again.
          res.duplicate = true;
          st.env->duplicates->inc();
          answer(self, pt, std::move(res));
          return;
        }
        auto& act = activity(self);
        auto& t = pt.turn;
        publish_message(self, res.cursor, t.message_id, "user", kind, run_id,
                        butler, t.text);
        if (kind == "steer") {
          st.env->steered->inc();
          if (auto run = find_run(act.runs, run_id, false)) {
            steer_input in;
            in.message_id = t.message_id;
            in.text = t.text;
            in.accepted_us = unix_now_us();
            if (run->work_id.empty())
              run->unsent.push_back(std::move(in));
            else
              caf::anon_send(run->hdl, steer_atom_v, run->work_id,
                             std::move(in));
          }
          publish(self, "steer.accepted",
                  R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
                    + json::quote(run_id) + R"(,"message_id":)"
                    + json::quote(t.message_id) + R"(,"cursor":)"
                    + std::to_string(res.cursor) + "}");
        } else if (kind == "queued") {
          st.env->queued->inc();
          act.queued.push_back(queued_run{run_id, butler, t.text});
          self->send(st.env->directory, run_atom_v, run_id, st.id, true);
          publish_run(self, run_id, butler, "queued");
        } else {
          if (!replaced.empty()) {
            st.env->interrupted->inc();
            cancel_run(self, replaced);
          }
          start_run(self, run_id, butler, hdl, t.text);
        }
        answer(self, pt, std::move(res));
      },
      [self, shared](const caf::error& err) {
        auto code = code_of(err);
        uint32_t status = code == butlers_errc::timeout ? 504 : 503;
        answer(self, *shared,
               refused(status, "database_unavailable",
                       "the turn was not stored: "
                         + self->system().render(err)));
      });
}

/// Decides a turn against the active run of its butler (the 409 checks come
/// before anything is written).
void decide(thread_ptr self, pending_turn pt, butler_actor hdl,
            std::string butler) {
  auto& st = self->state;
  auto& act = activity(self);
  auto& t = pt.turn;
  auto active = std::find_if(act.runs.begin(), act.runs.end(),
                             [&](const thread_run& r) {
                               return r.butler == butler;
                             });
  if (active == act.runs.end()) {
    if (!t.expected_run_id.empty()) {
      st.env->conflicts->inc();
      answer(self, pt,
             refused(409, "run_changed",
                     "expected run " + t.expected_run_id
                       + " but the thread has no active run for butler '"
                       + butler + "'"));
      return;
    }
    persist_and_apply(self, std::move(pt), hdl, butler, "start",
                      make_uuid_v7().to_string(), {});
    return;
  }
  auto active_id = active->run_id;
  if (!t.expected_run_id.empty() && t.expected_run_id != active_id) {
    st.env->conflicts->inc();
    answer(self, pt,
           refused(409, "run_changed",
                   "expected run " + t.expected_run_id + " but run " + active_id
                     + " is active",
                   active_id));
    return;
  }
  if (t.mode == "reject") {
    st.env->conflicts->inc();
    answer(self, pt,
           refused(409, "run_active",
                   "run " + active_id + " is active (mode reject)", active_id));
    return;
  }
  if (t.mode == "queue") {
    if (act.queued.size() >= st.env->cfg.max_queued_runs) {
      st.env->overload->inc();
      answer(self, pt,
             refused(429, "overload_rejected",
                     "thread has " + std::to_string(act.queued.size())
                       + " queued runs (threads.max_queued_runs)",
                     active_id));
      return;
    }
    persist_and_apply(self, std::move(pt), hdl, butler, "queued",
                      make_uuid_v7().to_string(), {});
    return;
  }
  if (t.mode == "interrupt") {
    persist_and_apply(self, std::move(pt), hdl, butler, "start",
                      make_uuid_v7().to_string(), active_id);
    return;
  }
  persist_and_apply(self, std::move(pt), hdl, butler, "steer", active_id, {});
}

void process_next(thread_ptr self) {
  auto& st = self->state;
  auto& act = activity(self);
  if (act.busy || act.turns.empty()) {
    maybe_idle(self);
    return;
  }
  auto pt = std::move(act.turns.front());
  act.turns.pop_front();
  act.busy = true;
  st.env->turns->inc();
  // A retry answered by this activation is recognized before any check.
  for (auto& [id, res] : act.recent) {
    if (id == pt.turn.message_id) {
      auto r = res;
      r.duplicate = true;
      st.env->duplicates->inc();
      answer(self, pt, std::move(r));
      return;
    }
  }
  auto butler = pt.turn.butler.empty() ? std::string{"general"}
                                       : pt.turn.butler;
  auto shared = std::make_shared<pending_turn>(std::move(pt));
  self->request(st.env->registry, st.env->timeout, lookup_atom_v, butler)
    .then(
      [self, shared, butler](const butler_actor& hdl) {
        decide(self, std::move(*shared), hdl, butler);
      },
      [self, shared, butler](const caf::error&) {
        answer(self, *shared,
               refused(404, "not_found", "no butler named '" + butler + "'"));
      });
}

/// A new actor for a thread resumes what its predecessor left open (the
/// node went down, or the supervisor restarted the group): runs still
/// `accepted` or `running` are handed to their butler again — the route
/// inbox dedupes on the run id, so a work item that exists is watched, not
/// run twice — and queued runs wait again. Turns wait until this is done.
void recover(thread_ptr self) {
  auto& st = self->state;
  auto& act = activity(self);
  act.busy = true;
  self
    ->request(st.env->reader, st.env->timeout, read_atom_v,
              named_statement{"thread_open_runs", {st.id}})
    .then(
      [self](const named_result& r) {
        auto& act = activity(self);
        std::vector<std::string> butlers;
        for (auto& row : r.rows) {
          if (row.size() < 4)
            continue;
          auto& run_id = row[0];
          auto& butler = row[1];
          self->send(self->state.env->directory, run_atom_v, run_id,
                     self->state.id, true);
          if (row[2] == "queued") {
            act.queued.push_back(queued_run{run_id, butler, row[3]});
            butlers.push_back(butler);
          } else {
            spdlog::info("thread {}: resuming run {}", self->state.id, run_id);
            launch(self, run_id, butler, row[3]);
          }
        }
        for (auto& b : butlers)
          start_queued(self, b);
        act.busy = false;
        process_next(self);
      },
      [self](const caf::error& err) {
        spdlog::warn("thread {}: open runs not read: {}", self->state.id,
                     self->system().render(err));
        activity(self).busy = false;
        process_next(self);
      });
}

} // namespace

thread_actor::behavior_type thread(
  thread_actor::stateful_pointer<thread_state> self, std::string id,
  thread_env_ptr env) {
  self->state.id = std::move(id);
  self->state.env = std::move(env);
  self->state.idle_since_ms = now_ms();
  if (self->state.env->reader)
    recover(self);
  return {
    [self](turn_atom, thread_turn& t) -> caf::result<turn_result> {
      auto& st = self->state;
      auto& act = activity(self);
      if (act.turns.size() >= st.env->cfg.max_pending_turns) {
        st.env->overload->inc();
        return refused(429, "overload_rejected",
                       "thread has " + std::to_string(act.turns.size())
                         + " turns waiting (threads.max_pending_turns)");
      }
      auto rp = self->make_response_promise<turn_result>();
      act.turns.push_back(pending_turn{std::move(t), rp});
      process_next(self);
      return rp;
    },
    [self](cancel_atom, const std::string& run_id) -> uint32_t {
      auto& st = self->state;
      if (!st.act)
        return 0;
      auto& act = *st.act;
      uint32_t n = 0;
      std::vector<std::string> ids;
      for (auto& r : act.runs)
        if (run_id.empty() || r.run_id == run_id)
          ids.push_back(r.run_id);
      for (auto& id : ids) {
        cancel_run(self, id);
        ++n;
      }
      // Queued runs never started: they end cancelled at once.
      std::vector<queued_run> dropped;
      for (auto i = act.queued.begin(); i != act.queued.end();) {
        if (run_id.empty() || i->run_id == run_id) {
          dropped.push_back(std::move(*i));
          i = act.queued.erase(i);
        } else {
          ++i;
        }
      }
      for (auto& q : dropped) {
        ++n;
        st.env->cancelled->inc();
        finish_run(self, q.run_id, q.butler, "cancelled", "cancelled",
                   "cancelled", "", "");
      }
      maybe_idle(self);
      return n;
    },
    [self](idle_atom) -> int64_t {
      auto& st = self->state;
      if (st.act && !st.act->empty())
        return -1;
      return st.idle_since_ms;
    },
    [self](retire_atom) {
      self->quit();
    },
    [self](done_atom, route_response& resp) {
      auto& act = activity(self);
      if (act.busy) {
        act.deferred.push_back(std::move(resp));
        return;
      }
      on_outcome(self, resp);
    },
    [self](steer_atom, steer_applied& applied) {
      auto& st = self->state;
      if (!st.act)
        return;
      auto r = find_run(st.act->runs, applied.work_id, true);
      if (r == nullptr)
        r = find_run(st.act->stopping, applied.work_id, true);
      if (r == nullptr)
        return;
      st.env->steers_applied->inc(applied.inputs.size());
      std::string ids = "[";
      std::string inputs = "[";
      for (auto& in : applied.inputs) {
        auto waited = applied.applied_us - in.arrived_us;
        st.env->steer_wait->observe(static_cast<double>(waited) / 1000.0);
        if (ids.size() > 1) {
          ids += ',';
          inputs += ',';
        }
        ids += json::quote(in.message_id);
        inputs += R"({"message_id":)" + json::quote(in.message_id)
                  + R"(,"accepted_us":)" + std::to_string(in.accepted_us)
                  + R"(,"arrived_us":)" + std::to_string(in.arrived_us)
                  + R"(,"arrived_turn":)" + std::to_string(in.arrived_turn)
                  + R"(,"waited_us":)" + std::to_string(waited) + "}";
      }
      publish(self, "steer.applied",
              R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
                + json::quote(r->run_id) + R"(,"turn":)"
                + std::to_string(applied.turn) + R"(,"applied_us":)"
                + std::to_string(applied.applied_us) + R"(,"message_ids":)"
                + ids + "]" + R"(,"inputs":)" + inputs + "]}");
    },
  };
}

// -- directory ----------------------------------------------------------------

namespace {

directory_entry& entry_for(directory_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.threads.find(id);
  if (i == st.threads.end()) {
    // Linked: when the directory goes (the supervisor restarts the group),
    // its threads go with it; the new ones resume from the database.
    auto hdl = self->spawn<caf::linked>(thread, id, thread_env_ptr{st.env});
    i = st.threads.emplace(id, directory_entry{hdl, 0, now_ms(), false}).first;
    st.spawned->inc();
    st.live->set(static_cast<int64_t>(st.threads.size()));
  }
  auto& e = i->second;
  ++e.seq;
  e.last_ms = now_ms();
  return e;
}

std::chrono::milliseconds sweep_interval(const threads_config& cfg) {
  return std::chrono::milliseconds{
    std::max<int64_t>(100, int64_t{cfg.idle_timeout_s} * 1000 / 4)};
}

/// Asks threads idle for longer than the timeout whether they still are,
/// and retires those that are and got nothing since they were asked.
void sweep(directory_ptr self) {
  auto& st = self->state;
  auto limit = int64_t{st.env->cfg.idle_timeout_s} * 1000;
  auto now = now_ms();
  for (auto& [id, e] : st.threads) {
    if (e.asking || now - e.last_ms < limit)
      continue;
    e.asking = true;
    auto seq = e.seq;
    auto key = id;
    self->request(e.hdl, st.env->timeout, idle_atom_v)
      .then(
        [self, key, seq, limit](int64_t idle_since) {
          auto& st = self->state;
          auto i = st.threads.find(key);
          if (i == st.threads.end())
            return;
          auto& e = i->second;
          e.asking = false;
          if (idle_since < 0 || e.seq != seq) {
            e.last_ms = now_ms();
            return;
          }
          if (now_ms() - idle_since < limit) {
            e.last_ms = std::max(e.last_ms, idle_since);
            return;
          }
          // Nothing was forwarded since we asked, and nothing can be now:
          // the entry goes first, then the actor.
          self->send(e.hdl, retire_atom_v);
          st.threads.erase(i);
          st.retired->inc();
          st.live->set(static_cast<int64_t>(st.threads.size()));
        },
        [self, key](const caf::error&) {
          auto& st = self->state;
          auto i = st.threads.find(key);
          if (i != st.threads.end())
            i->second.asking = false;
        });
  }
}

/// Wakes the threads that have runs left open by a previous run of the
/// node (each resumes them as it starts); retried every second until the
/// database answered once.
void resume_open(directory_ptr self) {
  auto& st = self->state;
  if (st.resumed || !st.env->reader)
    return;
  if (st.ctx && !st.ctx->status.database_ready) {
    // Resumed runs go to their butlers, which store work through the
    // writer: wait until it is up.
    self->delayed_send(self, std::chrono::milliseconds{200}, resume_atom_v);
    return;
  }
  self
    ->request(st.env->reader, st.env->timeout, read_atom_v,
              named_statement{"thread_open_threads", {}})
    .then(
      [self](const named_result& r) {
        auto& st = self->state;
        if (!r.ok || st.resumed)
          return;
        st.resumed = true;
        for (auto& row : r.rows)
          if (!row.empty())
            entry_for(self, row[0]);
        if (!r.rows.empty())
          spdlog::info("threads: woke {} thread(s) with open runs",
                       r.rows.size());
      },
      [self](const caf::error&) {
        // The reader (or the schema) is not up yet: ask again shortly.
        self->delayed_send(self, std::chrono::seconds{1}, resume_atom_v);
      });
}

} // namespace

thread_directory_actor::behavior_type thread_directory(
  thread_directory_actor::stateful_pointer<thread_directory_state> self,
  thread_env env, node_context_ptr ctx) {
  auto& st = self->state;
  st.ctx = ctx;
  auto& m = ctx->metrics;
  env.directory = caf::actor_cast<thread_directory_actor>(self);
  env.turns = &m.get_counter("butlers_thread_turns_total",
                             "Turns received by thread actors");
  env.started = &m.get_counter("butlers_thread_runs_started_total",
                               "Thread runs handed to a butler");
  env.steered = &m.get_counter("butlers_thread_steers_total",
                               "Turns steered into an active run");
  env.steers_applied = &m.get_counter("butlers_thread_steers_applied_total",
                                      "Steer inputs a run applied at a "
                                      "boundary");
  env.queued = &m.get_counter("butlers_thread_runs_queued_total",
                              "Turns queued behind an active run");
  env.interrupted = &m.get_counter("butlers_thread_runs_interrupted_total",
                                   "Active runs cancelled by an interrupt "
                                   "turn");
  env.conflicts = &m.get_counter("butlers_thread_conflicts_total",
                                 "Turns answered 409 (run_changed, "
                                 "run_active)");
  env.overload = &m.get_counter("butlers_thread_overload_rejected_total",
                                "Turns answered 429 (queue or pending turns "
                                "full)");
  env.cancelled = &m.get_counter("butlers_thread_runs_cancelled_total",
                                 "Thread runs cancelled");
  env.duplicates = &m.get_counter("butlers_thread_turn_duplicates_total",
                                  "Retried turns answered with the original "
                                  "run");
  env.steer_wait = &m.get_histogram("butlers_thread_steer_boundary_wait_ms",
                                    "From a steer input reaching its run to "
                                    "the run's next boundary");
  st.live = &m.get_gauge("butlers_threads_live", "Thread actors in memory");
  st.spawned = &m.get_counter("butlers_threads_spawned_total",
                              "Thread actors created");
  st.retired = &m.get_counter("butlers_threads_retired_total",
                              "Idle thread actors retired");
  st.env = std::make_shared<thread_env>(std::move(env));
  // A thread that ends (retired, or failed) does not take the directory
  // with it; one that failed is dropped and resumes on its next turn.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    if (!msg.reason)
      return; // a retired thread
    for (auto i = st.threads.begin(); i != st.threads.end(); ++i) {
      if (i->second.hdl.address() == msg.source) {
        spdlog::warn("thread {} ended: {}", i->first,
                     self->system().render(msg.reason));
        st.threads.erase(i);
        st.live->set(static_cast<int64_t>(st.threads.size()));
        return;
      }
    }
    self->quit(msg.reason);
  });
  self->delayed_send(self, sweep_interval(st.env->cfg), caf::tick_atom_v);
  resume_open(self);
  return {
    [self](turn_atom a, thread_turn& t) {
      auto& e = entry_for(self, t.thread_id);
      return self->delegate(e.hdl, a, std::move(t));
    },
    [self](cancel_atom a, const std::string& thread_id,
           const std::string& run_id) -> caf::result<uint32_t> {
      auto& st = self->state;
      auto id = thread_id;
      if (id.empty()) {
        auto i = st.runs.find(run_id);
        if (i == st.runs.end())
          return caf::error{butlers_errc::not_found,
                            "no active or queued run " + run_id};
        id = i->second;
      }
      if (st.threads.count(id) == 0)
        return uint32_t{0};
      auto& e = entry_for(self, id);
      return self->delegate(e.hdl, a, run_id);
    },
    [self](touch_atom, const std::string& thread_id) -> uint64_t {
      entry_for(self, thread_id);
      return self->state.threads.size();
    },
    [self](status_atom) -> uint64_t {
      return self->state.threads.size();
    },
    [self](run_atom, const std::string& run_id, const std::string& thread_id,
           bool active) {
      auto& runs = self->state.runs;
      if (active)
        runs[run_id] = thread_id;
      else
        runs.erase(run_id);
    },
    [self](resume_atom) {
      resume_open(self);
    },
    [self](caf::tick_atom) {
      sweep(self);
      self->delayed_send(self, sweep_interval(self->state.env->cfg),
                         caf::tick_atom_v);
    },
  };
}

} // namespace butlers
