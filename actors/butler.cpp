#include "actors/butler.hpp"

#include <algorithm>
#include <functional>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/butler_tracing.hpp"
#include "actors/external_runner.hpp"
#include "actors/lifecycle.hpp"
#include "runtime/request_log.hpp"
#include "runtime/scripted.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

double ms_since(std::chrono::steady_clock::time_point t) {
  using ms = std::chrono::duration<double, std::milli>;
  return ms{std::chrono::steady_clock::now() - t}.count();
}

int64_t ms_between(std::chrono::steady_clock::time_point from,
                   std::chrono::steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from)
    .count();
}

void update_gauges(butler_ptr self) {
  auto& st = self->state;
  st.active_sessions->set(st.pool->active());
  auto depth = static_cast<int64_t>(st.pool->queued());
  st.queued_triggers->set(depth);
  st.queue_depth->set(depth);
}

work_op op_for(work_op_kind kind, const work_item& item, uint32_t lease_s) {
  work_op op;
  op.kind = kind;
  op.item.work_id = item.work_id;
  op.item.butler = item.butler;
  op.item.lease_token = item.lease_token;
  op.lease_s = lease_s;
  return op;
}

void pump(butler_ptr self);

/// An error response carrying the lineage of `held` (request, subrequest,
/// segment, work item), so its dispatcher can match it.
route_response error_for(const held_item& held, std::string cls,
                         std::string message, bool retryable = false) {
  auto r = make_error_response(held.env.request_id, std::move(cls),
                               std::move(message), retryable);
  r.subrequest_id = held.env.subrequest_id;
  r.segment_id = held.env.segment_id;
  r.work_id = held.item.work_id;
  return r;
}

/// Writes the result of a session whose reply's delivery ended (`r`):
/// as it was when delivered, else an error of the delivery's class (not
/// retryable: the messenger retried and dead-lettered it), so the request
/// ends errored rather than parsed.
void reply_delivered(butler_ptr self, pending_reply p,
                     const route_response& r) {
  auto& out = p.out;
  if (r.status == "error") {
    out.state = "error";
    out.response.status = "error";
    out.response.error_class = r.error_class.empty() ? "internal_error"
                                                     : r.error_class;
    out.response.error_message = "reply not delivered: " + r.error_message;
    out.response.retryable = false;
    out.response.result.clear();
  }
  write_outcome(self, std::move(out), p.sender);
}

/// Hands a session's reply to the messenger and writes the result once
/// the delivery ended (done means delivered): the messenger's work item is
/// keyed by this work id, so a session run again after a crash finds the
/// first delivery instead of sending twice. On a node without a messenger
/// the reply goes through the switchboard, and the result is written once
/// the messenger took it. A reply that cannot be handed over fails the
/// item with a retryable `target_unavailable`.
void notify_then_write(butler_ptr self, session_outcome out,
                       const route_envelope& env) {
  auto& st = self->state;
  auto sender = env.source_sender_identity;
  auto give_up = [self, sender](session_outcome out, std::string why) {
    out.state = "error";
    out.response.status = "error";
    out.response.error_class = "target_unavailable";
    out.response.error_message = "reply not delivered: " + why;
    out.response.retryable = true;
    write_outcome(self, std::move(out), sender);
  };
  auto notify = make_notify_json(env, st.params.cfg.name, out.reply,
                                 out.work_id);
  if (auto messenger = st.ctx->messenger()) {
    std::string envelope;
    auto parsed = std::make_shared<route_envelope>();
    if (auto bad = make_delivery_route(notify, make_uuid_v7().to_string(),
                                       unix_now_us(), envelope, parsed.get())) {
      give_up(std::move(out), bad->error_class + ": " + bad->message);
      return;
    }
    route_request req{std::move(envelope), "butler", st.params.cfg.name,
                      untyped(self), std::move(parsed)};
    self->request(messenger, local_call, route_atom_v, std::move(req))
      .then(
        [self, out, give_up, sender](route_response& r) mutable {
          if (r.status == "error") {
            give_up(std::move(out), r.error_class + ": " + r.error_message);
            return;
          }
          self->state.replies.emplace(r.work_id,
                                      pending_reply{std::move(out), sender});
        },
        [self, out, give_up](const caf::error& err) mutable {
          give_up(std::move(out), self->system().render(err));
        });
    return;
  }
  auto sb = st.ctx->switchboard();
  if (!sb) {
    give_up(std::move(out), "no messenger or switchboard on this node");
    return;
  }
  self->request(sb, local_call, deliver_atom_v, std::move(notify))
    .then(
      [self, out, give_up, sender](const route_response& r) mutable {
        if (r.status == "error")
          give_up(std::move(out), r.error_class + ": " + r.error_message);
        else
          write_outcome(self, std::move(out), sender);
      },
      [self, out, give_up](const caf::error& err) mutable {
        give_up(std::move(out), self->system().render(err));
      });
}

/// The messenger reports how the delivery of a reply ended.
void on_reply_done(butler_ptr self, route_response& r) {
  auto& st = self->state;
  auto i = st.replies.find(r.work_id);
  if (i == st.replies.end())
    return;
  auto p = std::move(i->second);
  st.replies.erase(i);
  reply_delivered(self, std::move(p), r);
}

/// Stops the run of running item `r`: its session, or (a delivery without
/// one) the run itself, which then ends as its session would have: with a
/// timeout (retryable) or cancelled. The outcome of the delivery, should it
/// still come, finds the item no longer running and is dropped.
void stop_session(butler_ptr self, running_session& r, bool timed_out) {
  if (auto hdl = caf::actor_cast<session_actor>(r.session)) {
    if (timed_out)
      self->send(hdl, caf::timeout_atom_v);
    else
      self->send(hdl, cancel_atom_v);
    return;
  }
  adapter_result a;
  a.error_class = timed_out ? "timeout" : "internal_error";
  a.message = timed_out
                ? "session exceeded session_timeout_s ("
                    + std::to_string(self->state.params.cfg.session_timeout_s)
                    + " s)"
                : "cancelled";
  a.retryable = timed_out;
  auto out = delivery_outcome(r.held.item, r.held.env, r.started, a);
  if (!timed_out)
    out.state = "cancelled";
  self->send(self, done_atom_v, std::move(out));
}

/// The `start` write of `item` (state 'running', one more attempt, lease
/// extended). A lease found gone cancels the session.
void send_start(butler_ptr self, const work_item& item) {
  auto& st = self->state;
  st.writes.work(
    self, op_for(work_op_kind::start, item, st.params.cfg.lease_s),
    [self, item](const work_result& r) {
      if (r.ok)
        return;
      auto& st = self->state;
      ++st.status.fenced;
      st.fenced->inc();
      if (auto* running = st.pool->running(item.work_id))
        stop_session(self, *running, false);
    },
    [](const caf::error&) {
      // The database is away; the session runs on under our lease, and
      // its result write (fenced) decides.
    });
}

/// Starts sessions while a slot is free and items wait. The session starts
/// at once, under the lease this butler holds (taken by the append, or by
/// recovery); the `start` write (state 'running', one more attempt, lease
/// extended) goes out beside it, off the critical path (an item stored as
/// started needs none). If that write finds the lease gone, the session is
/// cancelled; its result could not be written anyway (fencing).
void pump(butler_ptr self) {
  auto& st = self->state;
  if (st.draining)
    return;
  while (auto next = st.pool->next()) {
    auto& held = next->held;
    st.process_latency->observe(ms_since(held.since));
    if (next->abandon) {
      session_outcome out;
      out.work_id = held.item.work_id;
      out.lease_token = held.item.lease_token;
      out.state = "error";
      out.response = error_for(held, "internal_error",
                               "abandoned after "
                                 + std::to_string(session_pool::max_attempts)
                                 + " sessions that never finished");
      write_outcome(self, std::move(out));
      continue;
    }
    show_started(self, held);
    auto hdl = st.runner->start(self, held);
    auto item = held.item;
    auto started = held.started;
    if (st.pool->start(std::move(held), untyped(hdl), self->clock().now()))
      self->delayed_send(self, st.pool->timeout(), caf::timeout_atom_v);
    if (!started)
      send_start(self, item);
  }
  update_gauges(self);
}

void on_done(butler_ptr self, session_outcome& out) {
  auto& st = self->state;
  auto ended = st.pool->finish(out.work_id, out.lease_token);
  if (!ended)
    return;
  auto& held = ended->held;
  auto duration_ms = ms_since(ended->started);
  st.session_duration->observe(duration_ms);
  log_work_finished(held.env, out, ms_between(held.since, ended->started),
                    static_cast<int64_t>(duration_ms));
  trace_work_run(self, *ended, out);
  if (has_usage(out.usage))
    st.usage->observe(out.usage, duration_ms / 1000);
  // A thread's run answers into the thread's transcript, not through the
  // messenger.
  if (out.state == "ok" && !out.reply.empty()
      && held.item.trigger_source != "thread")
    notify_then_write(self, std::move(out), held.env);
  else
    write_outcome(self, std::move(out), held.env.source_sender_identity);
  pump(self);
  drain_progress(self, false);
}

route_response reject(butler_ptr self, const std::string& request_id,
                      std::string cls, std::string message, bool retryable) {
  auto& st = self->state;
  ++st.status.rejected;
  if (cls == "overload_rejected")
    st.overload->inc();
  spdlog::info("butler {}: route.execute for request {} rejected: {}: {}",
               st.params.cfg.name, request_id, cls, message);
  return make_error_response(request_id, std::move(cls), std::move(message),
                             retryable);
}

/// Registers `hdl` for the result of `work_id`: at once when a duplicate
/// dispatch finds the item already finished, else when it finishes here.
/// (A duplicate held by another node reports to its own dispatcher; ours
/// times out and retries.)
void watch(butler_ptr self, const std::string& work_id, const work_result& r,
           const caf::actor& hdl) {
  auto& st = self->state;
  bool terminal = r.state == "ok" || r.state == "error"
                  || r.state == "cancelled";
  if (r.duplicate && terminal) {
    std::string error;
    if (auto resp = parse_route_response(r.response, &error)) {
      resp->work_id = work_id;
      caf::anon_send(hdl, done_atom_v, std::move(*resp));
    } else {
      spdlog::warn("butler {}: stored response of {} unreadable: {}",
                   st.params.cfg.name, work_id, error);
    }
    return;
  }
  auto held = st.pool->holds(work_id);
  // Read still open, but written here since (the append's read and the
  // result's commit raced): no write is left to tell the waiter.
  if (r.duplicate && !held) {
    if (auto i = st.recent.find(work_id); i != st.recent.end()) {
      caf::anon_send(hdl, done_atom_v, i->second);
      return;
    }
  }
  st.waiters[work_id].push_back(hdl);
  // Held by a holder that may be gone: this butler may recover it within a
  // few lease periods; if not, the dispatcher's route timeout retries.
  if (r.duplicate && !held)
    st.foreign_waiters.emplace(work_id, st.ticks);
}

} // namespace

/// Admission of a route.execute call: a rejection, or nullopt when `env`
/// (parsed from the request) may be stored.
std::optional<route_response> admit(butler_ptr self, const route_request& req,
                                    route_envelope& env) {
  auto& st = self->state;
  auto& cfg = st.params.cfg;
  if (req.parsed)
    env = *req.parsed;
  else if (auto bad = parse_route(req.envelope, env))
    return reject(self, env.request_id, bad->error_class, bad->message, false);
  if (env.butler != cfg.name)
    return reject(self, env.request_id, "validation_error",
                  "route.v1 targets butler '" + env.butler + "', this is '"
                    + cfg.name + "'",
                  false);
  auto& caps = cfg.capabilities;
  if (std::find(caps.begin(), caps.end(), env.tool) == caps.end()) {
    std::string offered;
    for (auto& c : caps)
      offered += (offered.empty() ? "" : ", ") + c;
    return reject(self, env.request_id, "validation_error",
                  "butler '" + cfg.name + "' does not offer tool '" + env.tool
                    + "' (capabilities: " + offered + ")",
                  false);
  }
  if (st.draining)
    return reject(self, env.request_id, "target_unavailable",
                  "butler '" + cfg.name + "' is shutting down", true);
  if (auto bad = st.runner->admit(req, env))
    return reject(self, env.request_id, bad->error_class, bad->message, false);
  if (auto full = st.pool->admit(req.trigger_source, req.origin_butler))
    return reject(self, env.request_id, "overload_rejected",
                  std::move(full->message), full->retryable);
  return std::nullopt;
}

/// Stores an admitted item, queues it for a slot, and answers `accepted`
/// once it is durable.
void store(butler_ptr self, route_request& req, route_envelope env,
           reply_fn reply) {
  auto& st = self->state;
  auto& cfg = st.params.cfg;
  auto t0 = std::chrono::steady_clock::now();
  auto reply_to = req.reply_to;
  work_op op;
  op.kind = work_op_kind::append;
  op.lease_s = cfg.lease_s;
  op.owner = st.owner;
  auto& item = op.item;
  item.work_id = make_uuid_v7().to_string();
  item.butler = cfg.name;
  item.request_id = env.request_id;
  item.segment_id = env.segment_id;
  item.subrequest_id = env.subrequest_id;
  item.trigger_source = req.trigger_source;
  item.origin_butler = req.origin_butler;
  item.envelope = std::move(req.envelope);
  // Stored as started (its attempt counted, no start write follows) when
  // a slot is free for it soon.
  op.start = st.pool->begin_append();
  auto started = op.start;
  update_gauges(self);
  st.writes.work(
    self, std::move(op),
    [self, reply, env, t0, reply_to, started](work_result& r) mutable {
      auto& st = self->state;
      st.pool->end_append();
      route_response resp;
      resp.request_id = env.request_id;
      resp.subrequest_id = env.subrequest_id;
      resp.segment_id = env.segment_id;
      if (!r.ok || r.items.empty()) {
        reply(reject(self, env.request_id, "internal_error",
                     "the work item could not be stored", false));
        update_gauges(self);
        return;
      }
      auto& stored = r.items.front();
      resp.status = "accepted";
      resp.work_id = stored.work_id;
      resp.duplicate = r.duplicate;
      resp.duration_ms = ms_since(t0);
      st.accept_latency->observe(resp.duration_ms);
      // `accepted` goes out before the watcher may hear of the item's end
      // (a duplicate already done is reported at once): a caller sees the
      // two in that order.
      reply(resp);
      if (reply_to)
        watch(self, stored.work_id, r, reply_to);
      if (!r.duplicate) {
        ++st.status.accepted;
        st.accepted->inc();
        held_item held{std::move(stored),
                       std::move(env),
                       std::chrono::steady_clock::now(),
                       {},
                       started};
        if (held.item.trigger_source == "thread")
          held.steer.observer = reply_to;
        bool reacts = st.ctx->lifecycle.reacts(held.env.source_channel);
        st.pool->enqueue(std::move(held));
        pump(self);
        if (reacts)
          show_waiting(self, resp.work_id);
      }
      update_gauges(self);
    },
    [self, reply, env](const caf::error& err) mutable {
      auto& st = self->state;
      st.pool->end_append();
      update_gauges(self);
      // The database's failure is reported as such, so that it does not
      // count against this butler's circuit.
      reply(reject(self, env.request_id,
                   code_of(err) == butlers_errc::database_unavailable
                     ? to_string(butlers_errc::database_unavailable)
                     : to_string(butlers_errc::target_unavailable),
                   "work item not stored: " + self->system().render(err),
                   true));
    });
}

namespace {

caf::result<route_response> accept(butler_ptr self, route_request& req) {
  route_envelope env;
  if (auto rejected = admit(self, req, env))
    return std::move(*rejected);
  auto rp = self->make_response_promise<route_response>();
  store(self, req, std::move(env), [rp](route_response r) mutable {
    rp.deliver(std::move(r));
  });
  return rp;
}

/// Forgets waiters for items held elsewhere that did not turn up here
/// within a few ticks.
void age_foreign_waiters(butler_ptr self) {
  auto& st = self->state;
  for (auto i = st.foreign_waiters.begin(); i != st.foreign_waiters.end();) {
    if (st.pool->holds(i->first)) {
      i = st.foreign_waiters.erase(i);
    } else if (st.ticks - i->second > 6) {
      st.waiters.erase(i->first);
      i = st.foreign_waiters.erase(i);
    } else {
      ++i;
    }
  }
}

/// Stops working on `work_id`: another holder has its lease now.
void lose(butler_ptr self, const std::string& work_id) {
  auto& st = self->state;
  ++st.status.fenced;
  st.fenced->inc();
  st.waiters.erase(work_id);
  st.pool->take_waiting(work_id);
  if (auto* running = st.pool->running(work_id))
    stop_session(self, *running, false);
  update_gauges(self);
}

/// Renews every lease held: waiting, running and finishing items.
void renew_leases(butler_ptr self) {
  auto& st = self->state;
  auto lease_s = st.params.cfg.lease_s;
  for (auto& item : st.pool->leases()) {
    st.writes.work(
      self, op_for(work_op_kind::renew, item, lease_s),
      [self, work_id = item.work_id](const work_result& r) {
        // Finished meanwhile (its result is written), or lost.
        if (!r.ok && self->state.pool->holds_lease(work_id))
          lose(self, work_id);
      },
      [](const caf::error&) {
        // Database away: the next tick renews again.
      });
  }
}

/// Queues the items recovery leased (`r` answered a `lease` op).
void take_recovered(butler_ptr self, work_result& r) {
  auto& st = self->state;
  if (!st.recovered_own)
    catch_up_all(self);
  st.recovered_own = true;
  for (auto& item : r.items) {
    route_envelope env;
    if (auto bad = parse_route(item.envelope, env)) {
      // Stored envelopes were validated on accept; one that no longer
      // parses (schema changed) ends as a validation error.
      session_outcome out;
      out.work_id = item.work_id;
      out.lease_token = item.lease_token;
      out.state = "error";
      out.response = make_error_response(item.request_id, bad->error_class,
                                         bad->message, false);
      out.response.work_id = item.work_id;
      out.response.subrequest_id = item.subrequest_id;
      out.response.segment_id = item.segment_id;
      write_outcome(self, std::move(out));
      continue;
    }
    ++st.status.recovered;
    st.recovered->inc();
    spdlog::info("butler {}: recovered work {} (attempts {})",
                 st.params.cfg.name, item.work_id, item.attempts);
    st.pool->enqueue(held_item{std::move(item),
                               std::move(env),
                               std::chrono::steady_clock::now(),
                               {}});
  }
  pump(self);
}

/// Leases items whose holder is gone, as many as slots and queue have room
/// for; one such request at a time.
void recover(butler_ptr self) {
  auto& st = self->state;
  auto room = st.pool->room();
  if (room == 0 || st.leasing)
    return;
  st.leasing = true;
  work_op op;
  op.kind = work_op_kind::lease;
  op.item.butler = st.params.cfg.name;
  op.lease_s = st.params.cfg.lease_s;
  op.limit = room;
  op.owner = st.owner;
  op.own = !st.recovered_own;
  st.writes.work(
    self, std::move(op),
    [self](work_result& r) {
      self->state.leasing = false;
      if (r.ok) // else the statement failed: try again next tick
        take_recovered(self, r);
    },
    [self](const caf::error&) {
      // Database away: the next tick tries again.
      self->state.leasing = false;
    });
}

/// Renews every lease held (pending and running items) and
/// recovers items whose holder is gone, as far as the pending queue has
/// room. Runs every lease_s / 3 seconds and once at start.
void tick(butler_ptr self) {
  auto& st = self->state;
  ++st.ticks;
  age_foreign_waiters(self);
  age_recent(self);
  // Without the database the writer would refuse every renewal and
  // recovery: wait for the next tick rather than count refusals.
  if (st.ctx->status.database_ready && !st.draining) {
    renew_leases(self);
    recover(self);
  }
  pump(self);
}

std::chrono::milliseconds tick_interval(const butler_config& cfg) {
  return std::chrono::milliseconds{std::max<uint32_t>(cfg.lease_s, 3) * 1000
                                   / 3};
}

/// Cancels `work_id`: stops its session, or ends it cancelled while it
/// waits. False when it is not here.
bool cancel(butler_ptr self, const std::string& work_id) {
  auto& st = self->state;
  if (auto* running = st.pool->running(work_id)) {
    stop_session(self, *running, false);
    return true;
  }
  auto held = st.pool->take_waiting(work_id);
  if (!held)
    return false;
  session_outcome out;
  out.work_id = held->item.work_id;
  out.lease_token = held->item.lease_token;
  out.state = "cancelled";
  out.response = error_for(*held, "internal_error", "cancelled");
  write_outcome(self, std::move(out));
  update_gauges(self);
  return true;
}

/// Hands steer input to the running session of `work_id`, or adds it to
/// the item's pending input while it waits. False when it is not here.
bool steer(butler_ptr self, const std::string& work_id, steer_input& in) {
  auto& st = self->state;
  if (auto* running = st.pool->running(work_id)) {
    self->send(caf::actor_cast<session_actor>(running->session), steer_atom_v,
               std::move(in));
    return true;
  }
  if (auto* held = st.pool->waiting(work_id)) {
    in.arrived_us = unix_now_us();
    held->steer.pending.push_back(std::move(in));
    return true;
  }
  return false;
}

/// Stops every session that has run its whole timeout, then waits for the
/// earliest one still running (one timer, not one per session).
void on_timeout(butler_ptr self) {
  auto timeouts = self->state.pool->on_timeout(self->clock().now());
  for (auto& id : timeouts.expired)
    if (auto* running = self->state.pool->running(id))
      stop_session(self, *running, true);
  if (timeouts.next)
    self->delayed_send(self, *timeouts.next, caf::timeout_atom_v);
}

/// Ticks, then arms the next tick: until the first recovery of this node's
/// own work has gone through (at start the writer may not have connected
/// yet), and while there is nothing to renew, soon rather than a whole
/// interval later: after 250 ms, then twice as long each time.
void on_tick(butler_ptr self) {
  tick(self);
  auto& st = self->state;
  auto next = tick_interval(st.params.cfg);
  if (!st.recovered_own && st.pool->idle()) {
    next = std::min(next, st.first_recovery_delay);
    st.first_recovery_delay = std::min(next * 2, tick_interval(st.params.cfg));
  }
  self->delayed_send(self, next, caf::tick_atom_v);
}

/// Registers the butler's metrics (labelled with its name).
void init_metrics(butler_ptr self) {
  auto& st = self->state;
  auto label = "butler=\"" + st.params.cfg.name + "\"";
  auto& m = st.ctx->metrics;
  st.active_sessions = &m.get_gauge("butlers_spawner_active_sessions",
                                    "Sessions running", label);
  st.queued_triggers = &m.get_gauge("butlers_spawner_queued_triggers",
                                    "Work waiting for a session slot", label);
  st.queue_depth = &m.get_gauge("butlers_route_queue_depth",
                                "Accepted but not yet started route work",
                                label);
  st.session_duration = &m.get_histogram("butlers_spawner_session_duration_"
                                         "ms",
                                         "Session duration",
                                         latency_buckets_ms(), label);
  st.accept_latency = &m.get_histogram("butlers_route_accept_latency_ms",
                                       "route.execute until the work item "
                                       "is durable",
                                       latency_buckets_ms(), label);
  st.process_latency = &m.get_histogram("butlers_route_process_latency_ms",
                                        "Acceptance until a session slot",
                                        latency_buckets_ms(), label);
  st.accepted = &m.get_counter("butlers_route_accepted_total",
                               "Work items accepted", label);
  st.overload = &m.get_counter("butlers_route_overload_rejected_total",
                               "route.execute answered overload_rejected",
                               label);
  st.fenced = &m.get_counter("butlers_route_lease_lost_total",
                             "Writes refused because the lease had passed "
                             "to another holder",
                             label);
  st.recovered = &m.get_counter("butlers_route_recovered_total",
                                "Work items taken over after their lease "
                                "expired",
                                label);
  st.confirmed = &m.get_counter("butlers_route_result_in_doubt_written_total",
                                "Results whose commit was in doubt (the "
                                "connection broke) found written when read "
                                "back",
                                label);
  st.usage = std::make_unique<usage_meters>(m, st.params.cfg.name);
}

} // namespace

butler_config default_general() {
  butler_config c;
  c.name = "general";
  c.description = "Fallback for anything no specialist claims";
  c.max_concurrent_sessions = 3;
  return c;
}

namespace {

/// Runs every item as a session of the butler's runtime.
class session_runner final : public work_runner {
 public:
  explicit session_runner(const butler_params& bp) {
    auto& cfg = bp.cfg;
    params_.butler = cfg.name;
    params_.runtime = cfg.runtime;
    params_.kind = runtime_of(cfg.runtime);
    params_.timeout = std::chrono::seconds{cfg.session_timeout_s};
    params_.budgets = budgets_for(bp.budgets, cfg.name);
    params_.tool_base.node = bp.node;
    params_.tool_base.recipients = cfg.recipients;
    params_.tool_base.max_calls = cfg.max_tool_calls;
    params_.approvals = approval_policy::of(cfg);
  }

  session_actor start(butler_ptr self, held_item& held) override {
    auto& ctx = self->state.ctx;
    // The reader: budgets, and the attachments a session is given.
    params_.reader = ctx->reader();
    if (!params_.budgets.empty())
      params_.meters = self->state.usage->budgets();
    params_.traces = ctx->traces;
    params_.tools = ctx->tools;
    params_.tool_server = ctx->tool_server();
    params_.mcp_url = ctx->mcp_url();
    return self->spawn<caf::linked>(session, params_, held.item, held.env,
                                    butler_actor{self}, std::move(held.steer));
  }

 private:
  session_params params_;
};

} // namespace

work_runner::~work_runner() = default;

std::optional<route_rejection> work_runner::admit(const route_request&,
                                                  const route_envelope&) const {
  return std::nullopt;
}

bool work_runner::answers_switchboard() const {
  return true;
}

butler_actor::behavior_type butler(butler_ptr self, butler_params params,
                                   inbox_writer_actor writer,
                                   node_context_ptr ctx) {
  std::unique_ptr<work_runner> runner;
  if (params.cfg.runtime.kind == runtime_kind::external)
    runner = make_external_runner(params.cfg);
  else
    runner = std::make_unique<session_runner>(params);
  auto version = prompt_version_of(params.cfg.runtime);
  auto behavior = butler_with(self, std::move(params), std::move(writer),
                              std::move(ctx), std::move(runner));
  self->state.prompt_version = std::move(version);
  return behavior;
}

butler_actor::behavior_type butler_with(butler_ptr self, butler_params params,
                                        inbox_writer_actor writer,
                                        node_context_ptr ctx,
                                        std::unique_ptr<work_runner> runner) {
  auto& st = self->state;
  st.params = std::move(params);
  st.writer = std::move(writer);
  st.writes.set_writer(st.writer);
  st.ctx = std::move(ctx);
  st.runner = std::move(runner);
  auto& cfg = st.params.cfg;
  st.owner = st.params.node + "/" + make_uuid_v7().to_string();
  st.status.name = cfg.name;
  st.status.max_concurrent_sessions = cfg.max_concurrent_sessions;
  st.status.max_pending = cfg.max_pending;
  st.pool.emplace(cfg.name, cfg.max_concurrent_sessions, cfg.max_pending,
                  std::chrono::seconds{cfg.session_timeout_s});
  init_metrics(self);
  init_schedules(self);
  self->send(self, caf::tick_atom_v);
  return {
    [self](route_atom, route_request& req) -> caf::result<route_response> {
      return accept(self, req);
    },
    [self](cancel_atom, const std::string& work_id) {
      return cancel(self, work_id);
    },
    [self](steer_atom, const std::string& work_id, steer_input& in) {
      return steer(self, work_id, in);
    },
    [self](status_atom) {
      auto& st = self->state;
      auto s = st.status;
      s.active = st.pool->active();
      s.pending = st.pool->queued();
      return s;
    },
    [self](done_atom, session_outcome& out) {
      on_done(self, out);
    },
    [self](done_atom, route_response& r) {
      on_reply_done(self, r);
    },
    [self](caf::tick_atom, const std::string& work_id) {
      read_back_in_doubt(self, work_id);
    },
    [self](caf::tick_atom) {
      on_tick(self);
    },
    [self](schedule_atom, uint32_t i) {
      if (i < self->state.params.cfg.schedules.size())
        fire(self, i);
    },
    [self](caf::timeout_atom) {
      on_timeout(self);
    },
    [self](worker_atom, worker_call& call) -> caf::result<worker_reply> {
      return self->state.runner->worker(self, call);
    },
    [self](worker_atom, uint64_t gen) {
      self->state.runner->worker_timer(self, gen);
    },
    [self](drain_atom, caf::timespan wait) -> caf::result<uint32_t> {
      return drain(self, wait);
    },
    [self](drain_atom) {
      drain_progress(self, true);
    },
  };
}

} // namespace butlers
