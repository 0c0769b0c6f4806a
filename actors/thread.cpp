#include "actors/thread.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/thread_events.hpp"
#include "runtime/attachments.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using thread_ptr = thread_actor::stateful_pointer<thread_state>;
using thread_events::publish;
using thread_events::publish_message;
using thread_events::publish_run;

/// Recent message ids a thread remembers per activation.
constexpr size_t max_recent = 64;

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
    st.idle_since_ms = unix_now_ms();
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

/// A message `text` was stored: the digest takes it as the last message,
/// with the time (Unix ms) in `row[at_col]` and the thread's first user
/// text in `row[first_col]` (the columns the insert statements return;
/// absent ones leave the digest as it was).
void note_message(thread_ptr self, const std::vector<std::string>& row,
                  size_t at_col, size_t first_col, std::string_view text) {
  auto& d = self->state.digest;
  d.preview = thread_preview(text);
  if (row.size() > at_col && !row[at_col].empty())
    d.last_message_at_ms = std::stoll(row[at_col]);
  if (row.size() > first_col)
    d.title = thread_title(row[first_col]);
}

// -- runs ---------------------------------------------------------------------

void process_next(thread_ptr self);
void start_run(thread_ptr self, std::string run_id, std::string butler,
               butler_actor hdl, std::string text, run_options opts,
               std::string attachments = {});
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
  bool failed = state == "error";
  st.digest.run_state = state;
  st.digest.error_class = failed ? error_class : std::string{};
  st.digest.error_message = failed ? body : std::string{};
  ++act.writes;
  self
    ->request(st.env->writer, st.env->timeout, exec_atom_v,
              named_statement{"thread_reply_insert",
                              {st.id, run_id, butler, kind, body, detail, state,
                               error_class}})
    .then(
      [self, run_id, butler, state, kind, body](const named_result& r) {
        --activity(self).writes;
        if (r.ok && !r.rows.empty() && !r.rows[0].empty()) {
          note_message(self, r.rows[0], 1, 2, body);
          publish_message(self, std::stoll(r.rows[0][0]), "run:" + run_id,
                          "assistant", kind, run_id, butler, body);
        }
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
            std::string text, run_options opts, std::string attachments) {
  auto& st = self->state;
  auto& act = activity(self);
  act.runs.push_back(thread_run{run_id, butler, {}, {}, {}, false});
  self->request(st.env->registry, st.env->timeout, lookup_atom_v, butler)
    .then(
      [self, run_id, butler, text, opts, attachments](const butler_actor& hdl) {
        auto& act = activity(self);
        auto r = find_run(act.runs, run_id, false);
        if (r == nullptr)
          return; // cancelled meanwhile (and finished as such)
        auto unsent = std::move(r->unsent);
        act.runs.erase(act.runs.begin() + (r - act.runs.data()));
        start_run(self, run_id, butler, hdl, text, opts, attachments);
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
  launch(self, std::move(q.run_id), std::move(q.butler), std::move(q.text),
         std::move(q.options), std::move(q.attachments));
}

// -- collect mode -------------------------------------------------------------

/// The open collect window of `butler`, or null.
collect_window* find_window(thread_activity& act, std::string_view butler) {
  for (auto& w : act.collecting)
    if (w.butler() == butler)
      return &w;
  return nullptr;
}

/// Closes collect window `i`: its run goes to its butler with every
/// collected turn as its input.
void close_window(thread_ptr self, size_t i) {
  auto& act = activity(self);
  auto w = std::move(act.collecting[i]);
  act.collecting.erase(act.collecting.begin() + static_cast<ptrdiff_t>(i));
  write_run_state(self, w.run_id(), "accepted", "");
  launch(self, w.run_id(), w.butler(), w.input(), w.options, {});
}

/// Closes the windows that are due (their run goes to its butler with every
/// collected turn as its input) and arms the timer of each other window
/// that has none out. Never while a turn is being decided: it may be
/// joining a window (`answer` tends them once it is done).
void tend_windows(thread_ptr self) {
  auto& act = activity(self);
  if (act.busy)
    return;
  auto now = self->clock().now();
  for (size_t i = 0; i < act.collecting.size();) {
    auto& w = act.collecting[i];
    if (!w.due(now)) {
      if (!w.armed) {
        w.armed = true;
        self->delayed_send(self, w.deadline() - now, timeout_atom_v,
                           w.run_id());
      }
      ++i;
      continue;
    }
    close_window(self, i);
  }
}

/// The timer of the window of run `run_id` fired (stale when the window
/// closed or was cancelled meanwhile).
void on_collect_timer(thread_ptr self, const std::string& run_id) {
  auto& st = self->state;
  if (!st.act)
    return;
  for (auto& w : st.act->collecting) {
    if (w.run_id() == run_id) {
      w.armed = false;
      tend_windows(self);
      return;
    }
  }
}

/// Stores a collected turn's text in its window (opening the window with
/// its first turn).
void collect_turn(thread_ptr self, const thread_turn& t, const turn_decision& d,
                  const std::string& run_id, const std::string& butler) {
  auto& st = self->state;
  auto& act = activity(self);
  st.env->collected->inc();
  auto now = self->clock().now();
  if (auto w = find_window(act, butler)) {
    w->add(t.text, now);
    return;
  }
  // A turn decided to join a window that was cancelled while it was being
  // stored belongs to that (cancelled) run.
  if (!d.active_run_id.empty())
    return;
  act.collecting.emplace_back(run_id, butler, collect_limits::of(st.env->cfg),
                              t.text, now);
  act.collecting.back().options = options_of(t);
  self->send(st.env->directory, run_atom_v, run_id, st.id, true);
  publish_run(self, run_id, butler, "collecting");
}

/// Hands a run to its butler: route.execute with this thread as reply_to.
void start_run(thread_ptr self, std::string run_id, std::string butler,
               butler_actor hdl, std::string text, run_options opts,
               std::string attachments) {
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
  env.source_sender_identity = opts.sender.empty() ? "api" : opts.sender;
  env.source_thread_identity = st.id;
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = std::move(text);
  env.run_model = std::move(opts.model);
  env.run_max_steps = opts.max_steps;
  env.attachments = std::move(attachments);
  route_request req{make_route_json(env), "thread", {}, untyped(self)};
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
  tend_windows(self);
  process_next(self);
}

/// Carries out a stored turn: steer input for the active run, a queued
/// run, or a new run (after cancelling the run an interrupt replaces).
void apply_turn(thread_ptr self, const thread_turn& t, const turn_decision& d,
                const std::string& run_id, const std::string& butler,
                butler_actor hdl, int64_t cursor) {
  auto& st = self->state;
  auto& act = activity(self);
  auto kind = std::string{stored_kind(d.action)};
  publish_message(self, cursor, t.message_id, "user", kind, run_id, butler,
                  t.text);
  switch (d.action) {
    case turn_action::steer: {
      st.env->steered->inc();
      if (auto run = find_run(act.runs, run_id, false)) {
        steer_input in;
        in.message_id = t.message_id;
        in.text = t.text + attachment_notes(t.attachments);
        in.accepted_us = unix_now_us();
        if (run->work_id.empty())
          run->unsent.push_back(std::move(in));
        else
          caf::anon_send(run->hdl, steer_atom_v, run->work_id, std::move(in));
      }
      publish(self, "steer.accepted",
              R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
                + json::quote(run_id) + R"(,"message_id":)"
                + json::quote(t.message_id) + R"(,"cursor":)"
                + std::to_string(cursor) + "}");
      break;
    }
    case turn_action::collect: collect_turn(self, t, d, run_id, butler); break;
    case turn_action::queue:
      st.env->queued->inc();
      act.queued.push_back(
        queued_run{run_id, butler, t.text, options_of(t), t.attachments});
      self->send(st.env->directory, run_atom_v, run_id, st.id, true);
      publish_run(self, run_id, butler, "queued");
      break;
    default:
      if (d.action == turn_action::interrupt) {
        st.env->interrupted->inc();
        cancel_run(self, d.active_run_id);
      }
      start_run(self, run_id, butler, hdl, t.text, options_of(t),
                t.attachments);
  }
}

/// The turn's decision is made; store it, then apply it (a retry of a
/// stored turn gets the original answer and applies nothing).
void persist_and_apply(thread_ptr self, pending_turn pt, butler_actor hdl,
                       std::string butler, turn_decision d,
                       std::string run_id) {
  auto& st = self->state;
  auto& t = pt.turn;
  named_statement stmt{"thread_turn_insert",
                       {st.id, t.message_id, t.text, run_id,
                        std::string{stored_kind(d.action)}, butler, t.sender,
                        t.model, std::to_string(t.max_steps), t.attachments}};
  auto shared = std::make_shared<pending_turn>(std::move(pt));
  self->request(st.env->writer, st.env->timeout, exec_atom_v, std::move(stmt))
    .then(
      [self, shared, hdl, butler, d, run_id](const named_result& r) {
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
          res.duplicate = true;
          self->state.env->duplicates->inc();
        } else {
          note_message(self, row, 5, 4, pt.turn.text);
          apply_turn(self, pt.turn, d, run_id, butler, hdl, res.cursor);
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

/// Decides a turn against the active run of its butler (refusals come
/// before anything is written).
void decide(thread_ptr self, pending_turn pt, butler_actor hdl,
            std::string butler) {
  auto& st = self->state;
  auto& act = activity(self);
  // A turn too big to join the butler's window closes it: the run starts
  // and the turn meets it as the active run.
  for (size_t i = 0; i < act.collecting.size(); ++i)
    if (act.collecting[i].butler() == butler
        && !act.collecting[i].fits(pt.turn.text.size()))
      close_window(self, i--);
  auto active = std::find_if(act.runs.begin(), act.runs.end(),
                             [&](const thread_run& r) {
                               return r.butler == butler;
                             });
  std::string_view active_id;
  if (active != act.runs.end())
    active_id = active->run_id;
  std::string_view collecting_id;
  if (auto w = find_window(act, butler))
    collecting_id = w->run_id();
  auto d = st.env->policy().decide(pt.turn, active_id, act.queued.size(),
                                   collecting_id);
  if (d.action == turn_action::refuse) {
    auto status = status_of(d.refusal);
    (status == 409 ? st.env->conflicts : st.env->overload)->inc();
    answer(self, pt, refusal_result(d, pt.turn, butler));
    return;
  }
  // A steer goes to the active run, a collected turn to the open window's
  // run; everything else makes a new one.
  auto run_id = !d.active_run_id.empty()
                    && (d.action == turn_action::steer
                        || d.action == turn_action::collect)
                  ? d.active_run_id
                  : make_uuid_v7().to_string();
  persist_and_apply(self, std::move(pt), hdl, std::move(butler), std::move(d),
                    std::move(run_id));
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
          auto input = collected_input_json(row[3]).value_or(row[3]);
          run_options opts;
          if (row.size() >= 7)
            opts = {row[4], row[5], static_cast<uint32_t>(std::stoul(row[6]))};
          auto files = row.size() >= 8 ? row[7] : std::string{};
          self->send(self->state.env->directory, run_atom_v, run_id,
                     self->state.id, true);
          if (row[2] == "queued") {
            act.queued.push_back(
              queued_run{run_id, butler, input, opts, std::move(files)});
            butlers.push_back(butler);
          } else {
            // A run whose collect window was open runs now with the turns
            // stored for it (the window is not opened again).
            if (row[2] == "collecting")
              write_run_state(self, run_id, "accepted", "");
            spdlog::info("thread {}: resuming run {} ({})", self->state.id,
                         run_id, row[2]);
            launch(self, run_id, butler, std::move(input), std::move(opts),
                   std::move(files));
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

/// Cancels run `run_id` (every active and queued run when ""); answers how
/// many it cancelled. Queued runs never started: they end at once.
uint32_t cancel_runs(thread_ptr self, const std::string& run_id) {
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
  std::vector<queued_run> dropped;
  for (auto i = act.queued.begin(); i != act.queued.end();) {
    if (run_id.empty() || i->run_id == run_id) {
      dropped.push_back(std::move(*i));
      i = act.queued.erase(i);
    } else {
      ++i;
    }
  }
  // Collecting runs never started either (a turn being stored for one
  // belongs to it, see `collect_turn`).
  for (auto i = act.collecting.begin(); i != act.collecting.end();) {
    if (run_id.empty() || i->run_id() == run_id) {
      dropped.push_back(queued_run{i->run_id(), i->butler(), {}, {}, {}});
      i = act.collecting.erase(i);
    } else {
      ++i;
    }
  }
  for (auto& q : dropped) {
    ++n;
    st.env->cancelled->inc();
    finish_run(self, q.run_id, q.butler, "cancelled", "cancelled", "cancelled",
               "", "");
  }
  maybe_idle(self);
  return n;
}

/// A run's session applied steer inputs at a boundary: counted, timed, and
/// published as `steer.applied`.
void on_steer_applied(thread_ptr self, const steer_applied& applied) {
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
            + std::to_string(applied.applied_us) + R"(,"message_ids":)" + ids
            + "]" + R"(,"inputs":)" + inputs + "]}");
}

/// Text a run's session streamed: published as `delta` (not stored; the
/// final text reaches the transcript when the run ends).
void on_delta(thread_ptr self, const std::string& work_id,
              const std::string& text) {
  auto& st = self->state;
  if (!st.act || !st.env->hub || !st.env->hub->wants_thread(st.id))
    return;
  auto r = find_run(st.act->runs, work_id, true);
  if (r == nullptr)
    return;
  publish(self, "delta",
          R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
            + json::quote(r->run_id) + R"(,"butler":)" + json::quote(r->butler)
            + R"(,"text":)" + json::quote(text) + "}");
}

} // namespace

void wire_thread_metrics(thread_env& env, metrics_registry& m) {
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
  env.collected = &m.get_counter("butlers_thread_turns_collected_total",
                                 "Turns collected for a run that starts when "
                                 "its collect window closes");
  env.steer_wait = &m.get_histogram("butlers_thread_steer_boundary_wait_ms",
                                    "From a steer input reaching its run to "
                                    "the run's next boundary");
}

thread_actor::behavior_type thread(
  thread_actor::stateful_pointer<thread_state> self, std::string id,
  thread_env_ptr env) {
  self->state.id = std::move(id);
  self->state.env = std::move(env);
  self->state.idle_since_ms = unix_now_ms();
  if (self->state.env->reader)
    recover(self);
  return {
    [self](turn_atom, thread_turn& t) -> caf::result<turn_result> {
      auto& st = self->state;
      auto& act = activity(self);
      if (auto full = st.env->policy().admit(act.turns.size())) {
        st.env->overload->inc();
        return refusal_result(*full, t, t.butler);
      }
      auto rp = self->make_response_promise<turn_result>();
      act.turns.push_back(pending_turn{std::move(t), rp});
      process_next(self);
      return rp;
    },
    [self](cancel_atom, const std::string& run_id) -> uint32_t {
      return cancel_runs(self, run_id);
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
    [self](snapshot_atom) -> thread_live {
      return thread_events::live_of(self);
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
      on_steer_applied(self, applied);
    },
    [self](delta_atom, const std::string& work_id, const std::string& text) {
      on_delta(self, work_id, text);
    },
    [self](timeout_atom, const std::string& run_id) {
      on_collect_timer(self, run_id);
    },
  };
}

} // namespace butlers
