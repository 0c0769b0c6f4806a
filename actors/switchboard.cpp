// The switchboard (spec 001 §6, §8, §10): the ingest boundary, the hot path
// (stored requests claimed and planned by a bounded pool of workers, in
// causal order per source thread) and routing, whose decisions a plain
// `request_tracker` makes and this actor carries out.

#include "actors/switchboard.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/cli_router.hpp"
#include "actors/lifecycle.hpp"
#include "runtime/cli_output.hpp"
#include "runtime/json.hpp"
#include "runtime/operator_action.hpp"
#include "runtime/planning.hpp"
#include "runtime/request_log.hpp"
#include "runtime/route.hpp"
#include "runtime/router.hpp"
#include "runtime/scripted.hpp"
#include "runtime/subprocess.hpp"
#include "runtime/threads.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// The timeout of a dispatch to a butler on another node (the only kind
/// that can fail to answer at all).
constexpr auto call_timeout = 10s;

void pump(switchboard_ptr self);
void done_classifying(switchboard_ptr self, const std::string& request_id);
void on_outcome(switchboard_ptr self, route_response r);

/// The node's butler registry, or null while its group restarts.
registry_actor registry_of(switchboard_ptr self) {
  return self->state.ctx->registry();
}

// -- the registry's recent answers --------------------------------------------

/// This node's host of `butler` as the registry named it less than
/// `registry_ttl` ago, or null.
butler_actor known_host(switchboard_ptr self, const std::string& butler) {
  return self->state.hosts.local_host(butler, self->clock().now());
}

/// Keeps a host the registry named, if it is on this node.
void remember_host(switchboard_ptr self, const std::string& butler,
                   const butler_actor& hdl) {
  if (hdl && hdl.node() == self->node())
    self->state.hosts.remember_local(butler, hdl, self->clock().now());
}

/// Asks the registry for its entries (or reuses its recent answer) and
/// calls `then` with them; frees the worker of `request_id` when there is
/// no registry or no answer (the row stays as it is and the cold path takes
/// it again).
template<class F>
void with_registry(switchboard_ptr self, const std::string& request_id,
                   F then) {
  auto now = self->clock().now();
  if (auto* cached = self->state.hosts.entries(now)) {
    auto entries = *cached;
    then(entries);
    return;
  }
  auto reg = registry_of(self);
  if (!reg) {
    done_classifying(self, request_id);
    return;
  }
  self->request(reg, local_call, list_atom_v)
    .then(
      [self, now, then](std::vector<registry_entry>& entries) mutable {
        self->state.hosts.set_entries(entries, now);
        then(entries);
      },
      [self, request_id](const caf::error&) {
        done_classifying(self, request_id);
      });
}

// -- the hot path -------------------------------------------------------------

void plan_and_claim(switchboard_ptr self, inbox_ref ref,
                    std::shared_ptr<const inbox_record> record);
void route_claimed(switchboard_ptr self, inbox_ref ref, claim_result claim);

/// Starts a request taken from the hot path: with the record stored at
/// ingest and the rules router, the plan goes out with the claim (one
/// commit); else claim, then plan.
void start_request(switchboard_ptr self, queued_request q) {
  auto& st = self->state;
  st.metrics.process_latency->observe(
    static_cast<double>(unix_now_us() - q.ref.received_at_us) / 1000.0);
  st.tracing.started(q.ref.request_id);
  if (q.record && st.routing.router.kind != router_kind::cli
      && registry_of(self)) {
    plan_and_claim(self, std::move(q.ref), std::move(q.record));
    return;
  }
  self->request(st.writer, local_call, claim_atom_v, q.ref)
    .then(
      [self, ref = q.ref](claim_result& claim) {
        if (!claim.claimed) {
          done_classifying(self, ref.request_id);
          return;
        }
        route_claimed(self, ref, std::move(claim));
      },
      [self, id = q.ref.request_id](const caf::error&) {
        // Still 'accepted': the cold path retries it.
        done_classifying(self, id);
      });
}

/// Starts workers while there is queued work, a free worker slot, room
/// among the requests in progress, and fewer than `max_waiting` subrequests
/// wait for room at a full butler (when the butlers cannot keep up, new
/// messages stay `accepted` in the inbox instead of being claimed only to
/// wait in memory). Each claims its row before any work, so a message
/// re-offered by the cold path while another worker holds it is skipped,
/// never processed twice.
void pump_once(switchboard_ptr self) {
  auto& st = self->state;
  auto& hot = *st.hot;
  auto busy = st.tracker->size() + hot.active() + hot.committing();
  if (hot.active() < st.cfg.workers && busy < st.cfg.max_in_progress
      && st.tracker->waiting_count() < st.cfg.max_waiting) {
    auto n = std::min<size_t>(st.cfg.workers - hot.active(),
                              st.cfg.max_in_progress - busy);
    for (auto& q : hot.take(n))
      start_request(self, std::move(q));
  }
  st.metrics.queue_depth->set(static_cast<int64_t>(hot.size()));
  // What overflowed is stored and `accepted`; with room again (half the
  // queue, so the workers never run dry while the cold path pages), it
  // should not wait for the next interval of the cold path.
  if (st.overflowed && hot.size() <= hot.capacity() / 2 && st.scanner) {
    st.overflowed = false;
    self->send(st.scanner, refill_atom_v);
  }
}

/// Re-entrant calls (a plan made at once, from the registry's recent
/// answer, frees its worker while the queue is being walked) only ask for
/// another walk once the current one is done.
void pump(switchboard_ptr self) {
  auto& st = self->state;
  if (st.pumping) {
    st.pump_again = true;
    return;
  }
  st.pumping = true;
  do {
    st.pump_again = false;
    pump_once(self);
  } while (st.pump_again);
  st.pumping = false;
}

/// Frees the classification worker of `request_id` (and the hold on its
/// source thread) and pumps the hot path.
void done_classifying(switchboard_ptr self, const std::string& request_id) {
  self->state.hot->done(request_id);
  pump(self);
}

/// Frees the worker of `request_id` while its claim and plan commit (the
/// rules router's plan is made: nothing is left for a worker to do).
void free_worker(switchboard_ptr self, const std::string& request_id) {
  if (self->state.hot->free_worker(request_id))
    pump(self);
}

/// Offers a stored message to the hot path; false when the queue is full.
/// A request tracked here already (its lease lapsed, the cold path found it
/// `accepted`) counts as taken.
bool offer(switchboard_ptr self, inbox_ref ref, std::string order_key = {},
           std::shared_ptr<const inbox_record> record = nullptr) {
  auto& st = self->state;
  if (st.tracker->contains(ref.request_id))
    return true;
  auto ok = st.hot->offer(std::move(ref), std::move(order_key),
                          std::move(record));
  // A request shed for another source's stays `accepted` for the cold path.
  if (st.hot->take_shed() > 0)
    st.overflowed = true;
  return ok;
}

// -- the ingest boundary ------------------------------------------------------

/// The writer answered the batch: counts duplicates and new requests and
/// offers the new ones to the hot path.
void on_stored(switchboard_ptr self, ingest_batch& b,
               std::vector<append_result>& res) {
  auto& st = self->state;
  bool offered = false;
  for (size_t j = 0; j < b.slots.size() && j < res.size(); ++j) {
    auto& r = res[j];
    auto& a = b.admitted[j];
    if (r.error_code == 0 && r.duplicate) {
      st.metrics.deduplicated->inc();
      spdlog::info("dedupe: key {} deduped to request {}", a.dedupe_key,
                   r.request_id);
    } else if (r.error_code == 0) {
      st.metrics.received->inc();
      st.tracing.stored(a.record.get(), a.dedupe_key, b.handed_ns,
                        b.slots.size(), false);
      if (offer(self, a.ref, std::move(a.order_key), std::move(a.record))) {
        st.metrics.enqueued_hot->inc();
        offered = true;
      } else {
        // Stored and acknowledged; the cold path will find it.
        st.metrics.backpressure->inc();
        st.overflowed = true;
      }
    }
    b.out[b.slots[j]] = std::move(r);
  }
  // Also after an overflow alone: with the queue already drained, nothing
  // else may come along to ask the cold path for a refill.
  if (offered || st.overflowed)
    pump(self);
}

/// The ingest boundary for one record or a batch (both `ingest_atom`
/// handlers): admission per record, one writer request for the admitted
/// ones, then `done` with every record's result in order (a refused or
/// unstored record carries its error code).
void ingest_records(switchboard_ptr self, std::vector<inbox_record> recs,
                    std::function<void(std::vector<append_result>&)> done) {
  auto& st = self->state;
  auto b = std::make_shared<ingest_batch>();
  b->done = std::move(done);
  b->out.resize(recs.size());
  b->handed_ns = st.tracing.on() ? unix_nanos_now() : 0;
  uint64_t overloaded = 0;
  rate_limit_records(self, *b, recs);
  auto admitted = st.admission->admit(*b, recs, st.ctx->status.draining,
                                      &overloaded);
  st.metrics.overload_rejected->inc(overloaded);
  st.metrics.inflight_requests->set(st.admission->in_flight());
  if (admitted.empty()) {
    b->done(b->out);
    return;
  }
  auto leave = [self](size_t n) {
    auto& st = self->state;
    st.admission->leave(n);
    st.metrics.inflight_requests->set(st.admission->in_flight());
  };
  // No timeout: the writer answers every append within one flush, or at
  // once with "unavailable"; if it dies, the supervisor restarts this actor
  // with it. A CAF timeout here would cost two wake-ups of CAF's clock
  // thread per request (the HTTP side keeps the deadline).
  self
    ->request(self->state.writer, caf::infinite, append_atom_v,
              std::move(admitted))
    .then(
      [self, b, leave](std::vector<append_result>& res) {
        leave(b->slots.size());
        on_stored(self, *b, res);
        b->done(b->out);
      },
      [b, leave](caf::error& err) {
        leave(b->slots.size());
        auto code = static_cast<uint8_t>(code_of(err));
        if (code == 0)
          code = static_cast<uint8_t>(butlers_errc::internal_error);
        for (auto i : b->slots) {
          b->out[i].error_code = code;
          b->out[i].error_message = message_of(err);
        }
        b->done(b->out);
      });
}

// -- carrying out the tracker's decisions -------------------------------------

/// Fire-and-forget write of a named statement: the writer orders it before
/// anything this actor sends it later, and a failure is only logged (the
/// state it records is rebuilt from the plan on recovery).
void write(switchboard_ptr self, named_statement st) {
  auto query = st.query;
  self->state.writes.exec(
    self, std::move(st), [](named_result&) {},
    [query](const caf::error& err) {
      spdlog::warn("switchboard: {} not written: {}", query, to_string(err));
    });
}

/// Best effort: stops the work item of a subrequest we gave up on.
void cancel_work(switchboard_ptr self, const std::string& butler,
                 const std::string& work_id) {
  auto reg = registry_of(self);
  if (!reg)
    return;
  self->request(reg, local_call, lookup_atom_v, butler)
    .then(
      [work_id](const butler_actor& hdl) {
        caf::anon_send(hdl, cancel_atom_v, work_id);
      },
      [](const caf::error&) {});
}

/// Stops tracking a request: its terminal transition is written, or it is
/// no longer ours.
void forget_request(switchboard_ptr self, const std::string& id) {
  self->state.tracing.forget(id);
  self->state.tracker->forget(id);
  self->state.hosts.drop_request(id);
}

/// Writes a finished request's terminal transition (fenced by its lease)
/// once what it owes its sender (error reply, terminal reaction) is with
/// the messenger (actors/lifecycle.hpp).
void complete(switchboard_ptr self, finished_request f) {
  auto id = f.context.request_id;
  auto state = f.done.state;
  self->state.tracing.finished(f, owes(self, f));
  log_request_finished(f.context, f.done);
  owe_terminal(self, std::move(f),
               [self, id, state](completion done, bool owed) {
                 self->state.tracing.handed_over(id, owed);
                 if (!owed) { // still 'progress': the cold path finishes it
                              // again
                   forget_request(self, id);
                   pump(self);
                   return;
                 }
                 self->state.writes.complete(
                   self, std::move(done),
                   [self, id, state](bool applied) {
                     auto& st = self->state;
                     st.tracing.completed(id, applied);
                     forget_request(self, id);
                     if (!applied)
                       st.metrics.lease_lost->inc();
                     else if (state == "parsed")
                       st.metrics.lifecycle_parsed->inc();
                     else
                       st.metrics.lifecycle_errored->inc();
                     pump(self);
                   },
                   [self, id](const caf::error& err) {
                     // Still 'progress': the lease expires and the cold path
                     // plans the request again from what is stored.
                     spdlog::warn("request {}: terminal state not written: {}",
                                  id, to_string(err));
                     self->state.tracing.completed(id, false, to_string(err));
                     forget_request(self, id);
                     pump(self);
                   });
               });
}

void send_dispatch(switchboard_ptr self, dispatch_order d);

/// Carries out what the tracker decided, in order.
void carry_out(switchboard_ptr self, tracker_actions out) {
  for (auto& w : out.writes)
    write(self, std::move(w));
  for (auto& c : out.cancels)
    cancel_work(self, c.butler, c.work_id);
  for (auto& r : out.retries)
    self->delayed_send(self, r.delay, retry_atom_v, std::move(r.request_id),
                       std::move(r.segment_id));
  for (auto& f : out.finished)
    complete(self, std::move(f));
  for (auto& d : out.dispatches)
    send_dispatch(self, std::move(d));
  if (out.room_freed)
    pump(self);
}

/// A subrequest on its way to a host of its butler.
struct outbound {
  std::string request_id;
  std::string segment_id;
  std::string attempt_id;
  std::string butler;
  std::string envelope;
  std::shared_ptr<const route_envelope> parsed;
  std::chrono::steady_clock::time_point started;
};

/// The butler answered the dispatch at its door.
void on_door_answer(switchboard_ptr self, const outbound& o,
                    route_response& r) {
  using ms = std::chrono::duration<double, std::milli>;
  auto now = std::chrono::steady_clock::now();
  tracker_actions out;
  self->state.tracing.door_answer(o.request_id, o.attempt_id, r);
  self->state.tracker->on_door_answer(o.request_id, o.attempt_id, std::move(r),
                                      ms{now - o.started}.count(), now, out);
  carry_out(self, std::move(out));
}

/// The attempt failed before a butler answered: its outcome is an error.
void on_transport_failure(switchboard_ptr self, const outbound& o,
                          std::string cls, std::string msg) {
  route_response r = make_error_response(o.request_id, std::move(cls),
                                         std::move(msg), true);
  r.segment_id = o.attempt_id;
  on_outcome(self, std::move(r));
}

void send_to_host(switchboard_ptr self, std::shared_ptr<const outbound> o,
                  const butler_actor& hdl) {
  route_request req{o->envelope, "route", {}, untyped(self), o->parsed};
  // Only a butler on another node can fail to answer at all.
  auto timeout = hdl.node() == self->node() ? caf::duration{local_call}
                                            : caf::duration{call_timeout};
  self->request(hdl, timeout, route_atom_v, std::move(req))
    .then(
      [self, o](route_response& r) {
        on_door_answer(self, *o, r);
      },
      [self, o, hdl](const caf::error& err) {
        // Transport failed before an envelope came back (§6.3): the
        // retry avoids this host while there is another.
        self->state.hosts.forget(o->butler);
        self->state.hosts.failed(o->request_id, o->segment_id, hdl);
        auto code = code_of(err);
        on_transport_failure(self, *o,
                             code == butlers_errc::timeout
                               ? "timeout"
                               : "target_unavailable",
                             "route.execute on '" + o->butler
                               + "' failed: " + to_string(code));
      });
}

/// Sends a subrequest to a host of its butler: this node's, as the registry
/// recently named it, or whichever the registry names now.
void send_dispatch(switchboard_ptr self, dispatch_order d) {
  auto& st = self->state;
  st.tracing.dispatching(d); // the envelope's traceparent: this attempt
  auto o = std::make_shared<outbound>();
  o->request_id = std::move(d.request_id);
  o->segment_id = std::move(d.segment_id);
  o->attempt_id = d.envelope.segment_id;
  o->butler = std::move(d.butler);
  o->envelope = make_route_json(d.envelope);
  o->parsed = std::make_shared<const route_envelope>(std::move(d.envelope));
  o->started = std::chrono::steady_clock::now();
  auto reg = registry_of(self);
  if (!reg) {
    on_transport_failure(self, *o, "target_unavailable",
                         "no butler registry on this node");
    return;
  }
  // After a transport failure, not the same host again while there is
  // another: the cluster may not have noticed yet that its node is gone.
  auto avoid = st.hosts.take_failed(o->request_id, o->segment_id);
  if (!avoid) {
    if (auto hdl = known_host(self, o->butler)) {
      send_to_host(self, std::move(o), hdl);
      return;
    }
  }
  self->request(reg, local_call, lookup_atom_v, o->butler, std::move(avoid))
    .then(
      [self, o](const butler_actor& hdl) {
        remember_host(self, o->butler, hdl);
        send_to_host(self, o, hdl);
      },
      [self, o](const caf::error&) {
        on_transport_failure(self, *o, "target_unavailable",
                             "no butler named '" + o->butler
                               + "' is registered");
      });
}

/// A butler's final route_response (or an immediate error response).
void on_outcome(switchboard_ptr self, route_response r) {
  self->state.tracing.outcome(r);
  tracker_actions out;
  self->state.tracker->on_outcome(r, std::chrono::steady_clock::now(), out);
  carry_out(self, std::move(out));
}

// -- planning -----------------------------------------------------------------

/// The plan is stored (or was before): track the request and send out what
/// is ready.
void start_fanout(switchboard_ptr self, inbox_ref ref, claim_result claim,
                  const named_result& rows) {
  auto id = ref.request_id;
  tracker_actions out;
  show_lifecycle(self, claim.record.context, lifecycle_state::progress);
  self->state.tracing.fanned_out(id, self->state.ctx->lifecycle.reacts(
                                       claim.record.context.source_channel));
  self->state.hosts.drop_request(id);
  self->state.tracker->start(std::move(ref), claim.lease_token,
                             std::move(claim.record), rows, unix_now_us(),
                             std::chrono::steady_clock::now(), out);
  done_classifying(self, id);
  carry_out(self, std::move(out));
}

/// Applies hard policy to `plan` (counting what it changed) and makes the
/// statement that stores it (or finds the stored one).
named_statement plan_statement(switchboard_ptr self, const inbox_ref& ref,
                               const inbox_record& record, routing_plan& plan) {
  auto& st = self->state;
  named_statement stmt;
  st.metrics.policy_reroutes->inc(
    make_plan_statement(ref, record, st.routing.router.rules,
                        to_string(st.cfg.fanout_mode), plan, stmt));
  st.tracing.planned(record, plan, stmt.query);
  if (plan.fallback) {
    st.metrics.fallback_to_general->inc();
    if (plan.fallback_reason.rfind("router_parse_failure", 0) == 0)
      st.metrics.router_parse_failure->inc();
    log_with(spdlog::level::info, request_log_fields(record.context),
             "request {}: routed to general ({})", ref.request_id,
             plan.fallback_reason);
  }
  return stmt;
}

/// Persists the plan (or finds the stored one) and starts the fanout.
void plan_ready(switchboard_ptr self, inbox_ref ref, claim_result claim,
                routing_plan plan) {
  auto stmt = plan_statement(self, ref, claim.record, plan);
  self->request(self->state.writer, local_call, exec_atom_v, std::move(stmt))
    .then(
      [self, ref, claim](const named_result& rows) mutable {
        start_fanout(self, std::move(ref), std::move(claim), rows);
      },
      [self, ref](const caf::error& err) {
        // Still 'progress' with our lease: it expires and the cold path
        // takes the request again.
        spdlog::warn("request {}: plan not stored: {}", ref.request_id,
                     to_string(err));
        done_classifying(self, ref.request_id);
      });
}

/// The cli router: the CLI runs on a detached actor of its own (its wait
/// blocks); anything wrong with its answer sends the request to general.
void route_by_cli(switchboard_ptr self, inbox_ref ref, claim_result claim,
                  std::vector<registry_entry> entries) {
  auto& rc = self->state.routing.router;
  auto text = claim.record.normalized_text;
  auto run = start_cli_router(self, rc, text, entries);
  self
    ->request(run.runner, std::chrono::seconds{rc.timeout_s} + 10s,
              caf::get_atom_v)
    .then(
      [self, ref, claim, text, entries](adapter_result& a) mutable {
        plan_ready(self, std::move(ref), std::move(claim),
                   plan_of_cli_run(&a, text, entries));
      },
      [self, ref, claim, text, entries,
       proc = run.proc](const caf::error&) mutable {
        proc->cancel();
        plan_ready(self, std::move(ref), std::move(claim),
                   plan_of_cli_run(nullptr, text, entries));
      });
}

/// Plans a claimed request and sends its subrequests out; frees the worker
/// once they are.
void route_claimed(switchboard_ptr self, inbox_ref ref, claim_result claim) {
  auto id = ref.request_id;
  with_registry(self, id,
                [self, ref,
                 claim](std::vector<registry_entry>& entries) mutable {
                  auto& rc = self->state.routing.router;
                  if (rc.kind == router_kind::cli) {
                    route_by_cli(self, std::move(ref), std::move(claim),
                                 std::move(entries));
                    return;
                  }
                  auto plan = rules_plan(claim.record.normalized_text, entries,
                                         rc.confidence_threshold);
                  plan_ready(self, std::move(ref), std::move(claim),
                             std::move(plan));
                });
}

/// Carries out what a claim sent with its plan came to.
void settle(switchboard_ptr self, const inbox_ref& ref, claim_and_plan& ps) {
  using outcome = claim_and_plan::outcome;
  switch (ps.settle()) {
    case outcome::waiting: return;
    case outcome::plan_failed:
      spdlog::warn("request {}: plan not stored: {}", ref.request_id,
                   ps.plan_error());
      [[fallthrough]];
    case outcome::not_ours: done_classifying(self, ref.request_id); return;
    case outcome::ready:
      start_fanout(self, ref, std::move(ps.claim()), ps.rows());
  }
}

/// Plans a request from the record stored at ingest and sends its claim and
/// its plan to the writer together (one commit when they share a batch; the
/// plan is stored only for a request in progress); then as `route_claimed`.
void plan_and_claim(switchboard_ptr self, inbox_ref ref,
                    std::shared_ptr<const inbox_record> record) {
  auto id = ref.request_id;
  with_registry(self, id,
                [self, ref, record](std::vector<registry_entry>& entries) {
                  auto& st = self->state;
                  auto plan = rules_plan(record->normalized_text, entries,
                                         st.routing.router
                                           .confidence_threshold);
                  auto stmt = plan_statement(self, ref, *record, plan);
                  auto ps = std::make_shared<claim_and_plan>();
                  self->request(st.writer, local_call, claim_atom_v, ref)
                    .then(
                      [self, ps, ref](claim_result& claim) {
                        if (claim.claimed)
                          ps->claimed(std::move(claim));
                        else
                          ps->unclaimed();
                        settle(self, ref, *ps);
                      },
                      [self, ps, ref](const caf::error&) {
                        ps->unclaimed();
                        settle(self, ref, *ps);
                      });
                  self
                    ->request(st.writer, local_call, exec_atom_v,
                              std::move(stmt))
                    .then(
                      [self, ps, ref](named_result& rows) {
                        ps->planned(std::move(rows));
                        settle(self, ref, *ps);
                      },
                      [self, ps, ref](const caf::error& err) {
                        ps->plan_failed(to_string(err));
                        settle(self, ref, *ps);
                      });
                  // The plan is made: the worker is free for the next request
                  // while these commit.
                  free_worker(self, ref.request_id);
                });
}

// -- leases and operators -----------------------------------------------------

/// Renews the inbox leases of tracked requests; one whose lease is gone is
/// tracked no longer.
void renew_leases(switchboard_ptr self) {
  auto& st = self->state;
  if (st.released)
    return;
  for (auto& [ref, token] : st.tracker->leases()) {
    named_statement stmt{"inbox_renew",
                         {ref.request_id, std::to_string(ref.received_at_us),
                          std::to_string(token),
                          std::to_string(st.cfg.lease_s)}};
    auto rid = ref.request_id;
    self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
      .then(
        [self, rid](const named_result& r) {
          // Cancelled by an operator or taken over. Its subrequests keep
          // running: whoever holds the request now re-sends the same
          // attempts and takes their outcomes (an operator's cancel stops
          // them itself).
          if (!r.rows.empty()
              || !self->state.tracker->drop_unless_finishing(rid))
            return;
          spdlog::info("request {}: lease gone, no longer tracked here", rid);
          self->state.hosts.drop_request(rid);
          pump(self);
        },
        [](const caf::error&) {});
  }
}

/// Cold path: offers what the scanner found, as much as fits the queue.
uint32_t enqueue_cold(switchboard_ptr self, std::vector<inbox_record>& recs) {
  auto& st = self->state;
  if (st.released)
    return 0;
  uint32_t taken = 0;
  for (auto& rec : recs) {
    inbox_ref ref{rec.context.request_id, rec.context.received_at_us};
    auto key = order_key_of(rec.context);
    if (!offer(self, std::move(ref), std::move(key),
               std::make_shared<inbox_record>(std::move(rec))))
      break;
    ++taken;
  }
  st.metrics.enqueued_cold->inc(taken);
  st.metrics.recovered->inc(taken);
  if (taken < recs.size())
    st.overflowed = true;
  pump(self);
  return taken;
}

/// Every second: expire what is due; every `lease_s / 3`: renew leases.
void tick(switchboard_ptr self) {
  auto& st = self->state;
  tracker_actions out;
  st.tracker->expire_due(std::chrono::steady_clock::now(), out);
  st.tracing.expire(unix_nanos_now());
  carry_out(self, std::move(out));
  if (++st.ticks % std::max<uint32_t>(1, st.cfg.lease_s / 3) == 0)
    renew_leases(self);
  self->delayed_send(self, std::chrono::seconds{1}, caf::tick_atom_v);
}

/// Offers a replayed request (its stored row `received_at`) to the hot path.
void offer_replayed(switchboard_ptr self, const std::string& request_id,
                    const std::string& received_at) {
  inbox_ref ref{request_id, std::stoll(received_at)};
  if (offer(self, ref))
    pump(self);
}

/// The reroute is stored: a segment that has not gone out takes the new
/// target; a request that already errored is replayed to run it.
void rerouted(switchboard_ptr self, caf::response_promise rp,
              const operator_action& x, const std::string& state) {
  self->state.tracker->reroute(x.request_id, x.segment_id, x.butler);
  if (state != "errored") {
    rp.deliver(std::string{R"({"result":"rerouted","replayed":false})"});
    return;
  }
  // Run the new target: replay the request, same lineage.
  self
    ->request(self->state.writer, local_call, exec_atom_v,
              named_statement{"request_replay", {x.request_id, x.who, x.why}})
    .then(
      [self, rp, id = x.request_id](const named_result& rr) mutable {
        if (!rr.rows.empty())
          offer_replayed(self, id, rr.rows[0][0]);
        rp.deliver(std::string{R"({"result":"rerouted","replayed":true})"});
      },
      [rp](const caf::error& err) mutable {
        rp.deliver(err);
      });
}

/// Operator actions (replay, cancel, force_complete, reroute), audited.
caf::result<std::string> operate(switchboard_ptr self, operator_action x) {
  auto stmt = statement_for(x);
  if (!stmt)
    return std::move(stmt.error());
  auto rp = self->make_response_promise<std::string>();
  self->request(self->state.writer, local_call, exec_atom_v, std::move(*stmt))
    .then(
      [self, rp, x](const named_result& r) mutable {
        auto& st = self->state;
        if (r.rows.empty()) {
          rp.deliver(caf::error{butlers_errc::conflict,
                                std::string{to_string(x.verb)}
                                  + " refused for request " + x.request_id
                                  + ": not in a state that allows it"});
          return;
        }
        if (x.verb == operator_verb::replay) {
          offer_replayed(self, x.request_id, r.rows[0][0]);
          rp.deliver(R"({"result":"replayed","subrequests":)" + r.rows[0][1]
                     + "}");
          return;
        }
        if (x.verb == operator_verb::reroute) {
          rerouted(self, rp, x, r.rows[0][0]);
          return;
        }
        // cancel, force_complete: whatever runs here for it stops.
        tracker_actions out;
        st.tracker->cancel(x.request_id, out);
        st.hosts.drop_request(x.request_id);
        if (x.verb == operator_verb::cancel)
          st.metrics.lifecycle_cancelled->inc();
        rp.deliver(x.verb == operator_verb::cancel
                     ? std::string{R"({"result":"cancelled"})"}
                     : R"({"result":"completed","state":)"
                         + json::quote(x.state) + "}");
        carry_out(self, std::move(out));
        pump(self);
      },
      [rp](const caf::error& err) mutable {
        rp.deliver(err);
      });
  return rp;
}

} // namespace

switchboard_actor::behavior_type switchboard(switchboard_ptr self,
                                             switchboard_config cfg,
                                             routing_settings routing,
                                             inbox_writer_actor writer,
                                             node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = cfg;
  st.routing = std::move(routing);
  st.writer = std::move(writer);
  st.writes.set_writer(st.writer);
  st.ctx = std::move(ctx);
  st.metrics = switchboard_metrics{st.ctx->metrics};
  st.tracing = switchboard_tracing{st.ctx->traces, st.routing.router.kind,
                                   st.routing.router.family,
                                   to_string(st.cfg.fanout_mode)};
  st.tracker.emplace(st.cfg, st.routing.policies, st.ctx->metrics);
  st.hot.emplace(st.cfg.queue_capacity, st.cfg.fairness,
                 st.cfg.source_queue_capacity, st.metrics.fair);
  st.admission.emplace(st.cfg.max_in_flight);
  st.limiter.emplace(st.routing.rate_limits);
  self->delayed_send(self, std::chrono::seconds{1}, caf::tick_atom_v);
  return {
    [self](ingest_atom, inbox_record& rec) -> caf::result<append_result> {
      auto rp = self->make_response_promise<append_result>();
      std::vector<inbox_record> one;
      one.push_back(std::move(rec));
      ingest_records(self, std::move(one),
                     [rp](std::vector<append_result>& res) mutable {
                       auto& r = res.at(0);
                       if (r.error_code == 0)
                         rp.deliver(std::move(r));
                       else
                         rp.deliver(ingest_error(r));
                     });
      return rp;
    },
    [self](ingest_atom, std::vector<inbox_record>& recs)
      -> caf::result<std::vector<append_result>> {
      auto rp = self->make_response_promise<std::vector<append_result>>();
      ingest_records(self, std::move(recs),
                     [rp](std::vector<append_result>& res) mutable {
                       rp.deliver(std::move(res));
                     });
      return rp;
    },
    [self](enqueue_atom, std::vector<inbox_record>& recs) {
      return enqueue_cold(self, recs);
    },
    [self](drain_atom) {
      return release_inbox_leases(self);
    },
    [self](deliver_atom, std::string& notify) -> caf::result<route_response> {
      auto rp = self->make_response_promise<route_response>();
      hand_to_messenger(self, std::move(notify),
                        [rp](route_response r) mutable {
                          rp.deliver(std::move(r));
                        });
      return rp;
    },
    [self](done_atom, route_response& r) {
      on_outcome(self, std::move(r));
    },
    [self](operate_atom, operator_action& x) {
      return operate(self, std::move(x));
    },
    [self](retry_atom, const std::string& request_id,
           const std::string& segment_id) {
      tracker_actions out;
      self->state.tracker->on_retry(request_id, segment_id,
                                    std::chrono::steady_clock::now(), out);
      carry_out(self, std::move(out));
    },
    [self](caf::tick_atom) {
      tick(self);
    },
    [self](circuit_atom, const std::string& name, bool available) {
      self->state.tracker->on_host_change(name, available,
                                          std::chrono::steady_clock::now());
    },
    [self](refill_atom, inbox_scanner_actor& scanner) {
      self->state.scanner = std::move(scanner);
    },
  };
}

} // namespace butlers
