#include "actors/switchboard.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "runtime/route.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

} // namespace

namespace {

/// Starts workers while there is queued work, a free worker slot, room
/// among the requests in progress, and fewer than `max_waiting` subrequests
/// wait for room at a full butler (when the butlers cannot keep up, new
/// messages stay `accepted` in the inbox instead of being claimed only to
/// wait in memory). Each claims its row before any work, so
/// a message re-offered by the cold path while another worker holds it is
/// skipped, never processed twice.
void pump_once(switchboard_ptr self) {
  auto& st = self->state;
  auto i = st.queue.begin();
  while (st.active < st.cfg.workers && i != st.queue.end()
         && st.requests.size() + st.active + st.committing.size()
              < st.cfg.max_in_progress
         && st.waiting_count < st.cfg.max_waiting) {
    // Per-source-thread order: a request whose thread already has one with
    // a worker waits (in place) for it; later requests of other threads go
    // ahead.
    std::string key;
    auto k = st.order_keys.find(i->ref.request_id);
    if (k != st.order_keys.end()) {
      key = k->second;
      if (st.held_keys.count(key) > 0) {
        ++i;
        continue;
      }
      st.order_keys.erase(k);
    }
    auto ref = std::move(i->ref);
    auto record = std::move(i->record);
    st.queued_ids.erase(ref.request_id);
    i = st.queue.erase(i);
    ++st.active;
    // One hold per request, released once by done_classifying.
    if (!key.empty() && st.classifying.emplace(ref.request_id, key).second)
      ++st.held_keys[key];
    st.process_latency->observe(
      static_cast<double>(now_us() - ref.received_at_us) / 1000.0);
    // With the record stored at ingest and the rules router, the plan goes
    // out with the claim (one commit); else claim, then plan.
    if (record && st.routing.router.kind != router_kind::cli
        && st.ctx->registry()) {
      plan_and_claim(self, std::move(ref), std::move(record));
      continue;
    }
    self->request(st.writer, local_call, claim_atom_v, ref)
      .then(
        [self, ref](claim_result& claim) {
          if (!claim.claimed) {
            done_classifying(self, ref.request_id);
            return;
          }
          route_claimed(self, ref, std::move(claim));
        },
        [self, ref](const caf::error&) {
          // Still 'accepted': the cold path retries it.
          done_classifying(self, ref.request_id);
        });
  }
  st.queue_depth->set(static_cast<int64_t>(st.queue.size()));
  // What overflowed is stored and `accepted`; with room again (half the
  // queue, so the workers never run dry while the cold path pages), it
  // should not wait for the next interval of the cold path.
  if (st.overflowed && st.queue.size() <= st.cfg.queue_capacity / 2
      && st.scanner) {
    st.overflowed = false;
    self->send(caf::actor_cast<inbox_scanner_actor>(st.scanner), refill_atom_v);
  }
}

} // namespace

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

void done_classifying(switchboard_ptr self, const std::string& request_id) {
  auto& st = self->state;
  if (st.committing.erase(request_id) == 0)
    --st.active;
  auto c = st.classifying.find(request_id);
  if (c != st.classifying.end()) {
    auto h = st.held_keys.find(c->second);
    if (h != st.held_keys.end() && --h->second == 0)
      st.held_keys.erase(h);
    st.classifying.erase(c);
  }
  pump(self);
}

void free_worker(switchboard_ptr self, const std::string& request_id) {
  auto& st = self->state;
  if (!st.committing.insert(request_id).second)
    return;
  --st.active;
  pump(self);
}

std::string order_key_of(const request_context& ctx) {
  if (ctx.source_thread_identity.empty())
    return {};
  return ctx.source_channel + '\x1f' + ctx.source_endpoint_identity + '\x1f'
         + ctx.source_thread_identity;
}

bool offer(switchboard_ptr self, inbox_ref ref, std::string order_key,
           std::shared_ptr<const inbox_record> record) {
  auto& st = self->state;
  // The cold path finds requests that are still `accepted` here: queued,
  // being planned or claimed, or (lease lapsed) tracked. Offering one
  // again would run it twice through this switchboard, and a second hold
  // on its source thread would outlive the first.
  auto& id = ref.request_id;
  if (st.queued_ids.count(id) > 0 || st.classifying.count(id) > 0
      || st.committing.count(id) > 0 || st.requests.count(id) > 0)
    return true; // held here already: taken
  if (st.queue.size() >= st.cfg.queue_capacity)
    return false;
  if (!order_key.empty())
    st.order_keys[ref.request_id] = std::move(order_key);
  st.queued_ids.insert(ref.request_id);
  st.queue.push_back(queued_request{std::move(ref), std::move(record)});
  return true;
}

/// The ingest boundary for one record or a batch: admits each record in
/// order (draining, `max_in_flight`), stores the admitted ones with one
/// writer request, counts duplicates and new requests and offers the new
/// ones to the hot path, then calls `done` with every record's result in
/// order (a refused or unstored record carries its error code).
void ingest_records(switchboard_ptr self, std::vector<inbox_record> recs,
                    std::function<void(std::vector<append_result>&)> done) {
  auto& st = self->state;
  std::vector<append_result> out(recs.size());
  auto refuse = [&](size_t i, butlers_errc code, std::string msg) {
    out[i].error_code = static_cast<uint8_t>(code);
    out[i].error_message = std::move(msg);
  };
  struct meta {
    inbox_ref ref;
    std::string key;
    std::string order;
    std::shared_ptr<const inbox_record> record;
  };
  std::vector<inbox_record> admitted;
  std::vector<size_t> slots;
  std::vector<meta> metas;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (st.ctx->status.draining) {
      refuse(i, butlers_errc::draining, "the node is shutting down");
    } else if (st.in_flight >= st.cfg.max_in_flight) {
      st.overload_rejected->inc();
      refuse(i, butlers_errc::overload_rejected,
             "admission full: " + std::to_string(st.in_flight)
               + " requests awaiting commit");
    } else {
      ++st.in_flight;
      auto& ctx = recs[i].context;
      // What routing needs, kept for the hot path (not the raw payload).
      auto kept = std::make_shared<inbox_record>();
      kept->context = ctx;
      kept->normalized_text = recs[i].normalized_text;
      kept->policy_tier = recs[i].policy_tier.empty() ? "default"
                                                      : recs[i].policy_tier;
      metas.push_back(meta{{ctx.request_id, ctx.received_at_us},
                           recs[i].dedupe_key,
                           order_key_of(ctx),
                           std::move(kept)});
      admitted.push_back(std::move(recs[i]));
      slots.push_back(i);
    }
  }
  st.inflight_requests->set(st.in_flight);
  if (admitted.empty()) {
    done(out);
    return;
  }
  auto leave = [self](size_t n) {
    auto& st = self->state;
    st.in_flight -= static_cast<uint32_t>(n);
    st.inflight_requests->set(st.in_flight);
  };
  // Both continuations share the batch's bookkeeping; neither copies it.
  struct pending {
    std::function<void(std::vector<append_result>&)> done;
    std::vector<append_result> out;
    std::vector<size_t> slots;
    std::vector<meta> metas;
  };
  auto p = std::make_shared<pending>(pending{std::move(done), std::move(out),
                                             std::move(slots),
                                             std::move(metas)});
  // No timeout: the writer answers every append within one flush, or at
  // once with "unavailable"; if it dies, the supervisor restarts this actor
  // with it. A CAF timeout here would cost two wake-ups of CAF's clock
  // thread per request (the HTTP side keeps the deadline).
  self->request(st.writer, caf::infinite, append_atom_v, std::move(admitted))
    .then(
      [self, p, leave](std::vector<append_result>& res) {
        auto& st = self->state;
        leave(p->slots.size());
        bool offered = false;
        for (size_t j = 0; j < p->slots.size() && j < res.size(); ++j) {
          auto& r = res[j];
          auto& m = p->metas[j];
          if (r.error_code == 0 && r.duplicate) {
            st.deduplicated->inc();
            spdlog::info("dedupe: key {} deduped to request {}", m.key,
                         r.request_id);
          } else if (r.error_code == 0) {
            st.received->inc();
            if (offer(self, m.ref, std::move(m.order), std::move(m.record))) {
              st.enqueued_hot->inc();
              offered = true;
            } else {
              // Stored and acknowledged; the cold path will find it.
              st.backpressure->inc();
              st.overflowed = true;
            }
          }
          p->out[p->slots[j]] = std::move(r);
        }
        // Also after an overflow alone: with the queue already drained,
        // nothing else may come along to ask the cold path for a refill.
        if (offered || st.overflowed)
          pump(self);
        p->done(p->out);
      },
      [p, leave](caf::error& err) {
        leave(p->slots.size());
        auto code = static_cast<uint8_t>(code_of(err));
        if (code == 0)
          code = static_cast<uint8_t>(butlers_errc::internal_error);
        for (auto i : p->slots) {
          p->out[i].error_code = code;
          p->out[i].error_message = message_of(err);
        }
        p->done(p->out);
      });
}

void hand_to_messenger(switchboard_ptr self, std::string notify,
                       std::function<void(route_response)> done) {
  auto& st = self->state;
  std::string envelope;
  auto parsed = std::make_shared<route_envelope>();
  auto fresh = make_uuid_v7().to_string();
  if (auto bad = make_delivery_route(notify, fresh, now_us(), envelope,
                                     parsed.get())) {
    st.notify_rejected->inc();
    done(make_error_response({}, bad->error_class, bad->message, false));
    return;
  }
  auto reg = caf::actor_cast<registry_actor>(st.ctx->registry());
  if (!reg) {
    st.notify_rejected->inc();
    done(make_error_response({}, "target_unavailable",
                             "no butler registry on this node", true));
    return;
  }
  auto fail = [self, done](const caf::error& err) {
    self->state.notify_rejected->inc();
    done(make_error_response({}, "target_unavailable",
                             "messenger unreachable: "
                               + self->system().render(err),
                             true));
  };
  auto hand_over = [self, envelope, parsed, done,
                    fail](const caf::actor& messenger) mutable {
    route_request req{std::move(envelope),
                      "switchboard",
                      {},
                      {},
                      std::move(parsed)};
    self
      ->request(caf::actor_cast<butler_actor>(messenger), local_call,
                route_atom_v, std::move(req))
      .then(
        [self, done](route_response& r) {
          if (r.status == "error")
            self->state.notify_rejected->inc();
          else
            self->state.notify_handed->inc();
          done(std::move(r));
        },
        [self, fail](const caf::error& err) {
          forget_host(self, "messenger");
          fail(err);
        });
  };
  if (auto messenger = known_host(self, "messenger")) {
    hand_over(messenger);
    return;
  }
  self->request(reg, local_call, lookup_atom_v, "messenger")
    .then(
      [self, hand_over](caf::actor& messenger) mutable {
        remember_host(self, "messenger", messenger);
        hand_over(messenger);
      },
      fail);
}

switchboard_actor::behavior_type switchboard(switchboard_ptr self,
                                             switchboard_config cfg,
                                             routing_settings routing,
                                             inbox_writer_actor writer,
                                             node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.routing = std::move(routing);
  st.writer = std::move(writer);
  st.writes.set_writer(st.writer);
  st.ctx = std::move(ctx);
  auto& m = st.ctx->metrics;
  st.received = &m.get_counter("butlers_switchboard_message_received",
                               "Requests accepted and stored");
  st.deduplicated = &m.get_counter("butlers_switchboard_message_deduplicated",
                                   "Requests answered with an earlier "
                                   "request's id");
  st.overload_rejected
    = &m.get_counter("butlers_switchboard_message_overload_rejected",
                     "Requests rejected by admission control (429)");
  st.enqueued_hot = &m.get_counter("butlers_buffer_enqueue_total",
                                   "Messages put on the in-memory queue",
                                   "path=\"hot\"");
  st.enqueued_cold = &m.get_counter("butlers_buffer_enqueue_total",
                                    "Messages put on the in-memory queue",
                                    "path=\"cold\"");
  st.backpressure = &m.get_counter("butlers_buffer_backpressure_total",
                                   "Stored messages left to the cold path "
                                   "because the queue was full");
  st.recovered = &m.get_counter("butlers_buffer_scanner_recovered_total",
                                "Messages re-enqueued by the cold path");
  st.lease_lost = &m.get_counter("butlers_buffer_lease_lost_total",
                                 "Completions refused because the lease had "
                                 "passed to another worker");
  st.lifecycle_parsed = &m.get_counter("butlers_switchboard_lifecycle_"
                                       "transition",
                                       "Lifecycle transitions by target state",
                                       "lifecycle_state=\"parsed\"");
  st.lifecycle_errored = &m.get_counter("butlers_switchboard_lifecycle_"
                                        "transition",
                                        "Lifecycle transitions by target "
                                        "state",
                                        "lifecycle_state=\"errored\"");
  st.lifecycle_cancelled = &m.get_counter("butlers_switchboard_lifecycle_"
                                          "transition",
                                          "Lifecycle transitions by target "
                                          "state",
                                          "lifecycle_state=\"cancelled\"");
  st.fallback_to_general = &m.get_counter("butlers_switchboard_fallback_to_"
                                          "general",
                                          "Requests routed whole to general "
                                          "(no match, low confidence, router "
                                          "failure, policy)");
  st.router_parse_failure = &m.get_counter("butlers_switchboard_router_parse_"
                                           "failure",
                                           "Router outputs that did not "
                                           "validate");
  st.retries = &m.get_counter("butlers_switchboard_route_retries_total",
                              "Subrequests dispatched again after a "
                              "retryable failure");
  st.dead_letters = &m.get_counter("butlers_switchboard_dead_letters_total",
                                   "Subrequests moved to dead_letters after "
                                   "their retries");
  st.budget_exhausted = &m.get_counter("butlers_switchboard_budget_exhausted_"
                                       "total",
                                       "Requests ended by their wall-clock or "
                                       "invocation budget");
  st.route_timeouts = &m.get_counter("butlers_switchboard_route_timeouts_"
                                     "total",
                                     "Subrequests without a route_response "
                                     "within route_timeout_s");
  st.overload_waits = &m.get_counter("butlers_switchboard_overload_waits_"
                                     "total",
                                     "Dispatches a full butler refused "
                                     "(overload_rejected); the subrequest "
                                     "waits for room");
  st.segments_waiting = &m.get_gauge("butlers_switchboard_segments_waiting",
                                     "Subrequests waiting for room at a full "
                                     "butler");
  st.policy_reroutes = &m.get_counter("butlers_switchboard_policy_reroutes_"
                                      "total",
                                      "Segments re-targeted by "
                                      "[[router.rule]]");
  st.in_progress = &m.get_gauge("butlers_switchboard_requests_in_progress",
                                "Requests whose subrequests are out");
  st.metrics = &m;
  st.notify_handed = &m.get_counter("butlers_switchboard_notify_total",
                                    "notify.v1 handed to the messenger",
                                    "outcome=\"accepted\"");
  st.notify_rejected = &m.get_counter("butlers_switchboard_notify_total",
                                      "notify.v1 handed to the messenger",
                                      "outcome=\"rejected\"");
  st.queue_depth = &m.get_gauge("butlers_buffer_queue_depth",
                                "Messages in the in-memory queue");
  st.inflight_requests = &m.get_gauge("butlers_switchboard_inflight_requests",
                                      "Ingest requests waiting for their "
                                      "commit");
  st.process_latency = &m.get_histogram("butlers_buffer_process_latency_ms",
                                        "From received_at to the start of "
                                        "processing");
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
                         rp.deliver(
                           caf::error{static_cast<butlers_errc>(r.error_code),
                                      std::move(r.error_message)});
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
      auto& st = self->state;
      uint32_t taken = 0;
      for (auto& rec : recs) {
        inbox_ref ref{rec.context.request_id, rec.context.received_at_us};
        auto key = order_key_of(rec.context);
        if (!offer(self, std::move(ref), std::move(key),
                   std::make_shared<inbox_record>(std::move(rec))))
          break;
        ++taken;
      }
      st.enqueued_cold->inc(taken);
      st.recovered->inc(taken);
      if (taken < recs.size())
        st.overflowed = true;
      pump(self);
      return taken;
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
    [self](operate_atom, const std::string& action,
           const std::string& request_id, const std::string& who,
           const std::string& why, const std::string& arg) {
      return operate(self, action, request_id, who, why, arg);
    },
    [self](retry_atom, const std::string& request_id,
           const std::string& segment_id) {
      on_retry(self, request_id, segment_id);
    },
    [self](caf::tick_atom) {
      auto& st = self->state;
      expire_due(self);
      if (++st.ticks % std::max<uint32_t>(1, st.cfg.lease_s / 3) == 0)
        renew_leases(self);
      self->delayed_send(self, std::chrono::seconds{1}, caf::tick_atom_v);
    },
    [self](circuit_atom, const std::string& name, bool available) {
      on_host_change(self, name, available);
    },
    [self](refill_atom, caf::actor& scanner) {
      self->state.scanner = std::move(scanner);
    },
  };
}

} // namespace butlers
