// The switchboard's routing (spec 001 §6, §8, §10.3, §15): plan a claimed
// request (rules or CLI router, then hard policy), persist the plan, send
// its subrequests to the butlers under the plan's fanout mode, consume
// their route_responses, retry with backoff behind a circuit breaker per
// target, dead-letter what exhausts its retries, and end every request
// PARSED or ERRORED. Operator actions live here too.

#include <algorithm>
#include <chrono>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/switchboard.hpp"
#include "runtime/cli_output.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/router.hpp"
#include "runtime/scripted.hpp"
#include "runtime/subprocess.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;
using json::quote;

constexpr auto call_timeout = 10s;

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

const policy_config& policy_for(switchboard_ptr self, const std::string& tier) {
  static const policy_config defaults = [] {
    policy_config p;
    p.tier = "default";
    return p;
  }();
  auto& ps = self->state.routing.policies;
  for (auto& p : ps)
    if (p.tier == tier)
      return p;
  for (auto& p : ps)
    if (p.tier == "default")
      return p;
  return defaults;
}

circuit_breaker& circuit(switchboard_ptr self, const std::string& butler) {
  auto& st = self->state;
  auto i = st.circuits.find(butler);
  if (i == st.circuits.end())
    i = st.circuits
          .emplace(butler,
                   circuit_breaker{st.cfg.circuit_failure_threshold,
                                   std::chrono::seconds{st.cfg.circuit_open_s}})
          .first;
  return i->second;
}

/// Logs and counts a circuit's transition, if it made one.
void observe_circuit(switchboard_ptr self, const std::string& butler) {
  auto& cb = circuit(self, butler);
  circuit_breaker::state from, to;
  if (!cb.take_transition(from, to))
    return;
  spdlog::warn("circuit {}: {} -> {}", butler, to_string(from), to_string(to));
  self->state.metrics
    ->get_counter("butlers_switchboard_circuit_transitions_total",
                  "Circuit breaker transitions by target and new state",
                  "butler=\"" + butler + "\",to=\"" + to_string(to) + "\"")
    .inc();
  self->state.metrics
    ->get_gauge("butlers_switchboard_circuit_open",
                "1 while the target's circuit is open or half-open",
                "butler=\"" + butler + "\"")
    .set(to == circuit_breaker::state::closed ? 0 : 1);
}

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

void persist_segment(switchboard_ptr self, const std::string& request_id,
                     const fanout_segment& seg, const std::string& raw,
                     bool log, double duration_ms = -1) {
  auto state = seg.state == "backoff" ? std::string{"pending"} : seg.state;
  write(self,
        named_statement{"fanout_segment_update",
                        {request_id, seg.segment_id, state,
                         std::to_string(seg.attempts),
                         std::to_string(seg.round_attempts), seg.work_id,
                         seg.error_class, seg.error_message, raw,
                         log ? "log" : "", seg.butler,
                         duration_ms >= 0 ? std::to_string(duration_ms) : ""}});
}

void advance(switchboard_ptr self, const std::string& id);

/// Ends segment `i` of request `id` with `state` (ok, error) and persists
/// what that rules out.
void settle(switchboard_ptr self, const std::string& id, size_t i,
            const std::string& raw) {
  auto& rq = self->state.requests.at(id);
  auto& seg = rq.fo.segments[i];
  persist_segment(self, id, seg, raw, true);
  for (auto j : rq.fo.settle(i))
    persist_segment(self, id, rq.fo.segments[j], {}, false);
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// Sets or clears a segment's `waiting` flag, keeping the count the hot
/// path is gated on; pumps when a wait ends (there may be room to claim).
void set_waiting(switchboard_ptr self, fanout_segment& seg, bool on) {
  auto& st = self->state;
  if (seg.waiting == on)
    return;
  seg.waiting = on;
  if (on)
    ++st.waiting_count;
  else
    --st.waiting_count;
  st.segments_waiting->set(static_cast<int64_t>(st.waiting_count));
  if (!on)
    pump(self);
}

/// The live segment an entry of butler `butler`'s waiting line stands for,
/// or nullptr when it is stale.
fanout_segment* live_wait(switchboard_ptr self, const waiting_entry& e,
                          const std::string& butler) {
  auto it = self->state.requests.find(e.request_id);
  if (it == self->state.requests.end())
    return nullptr;
  auto k = it->second.fo.find(e.segment_id);
  if (k < 0)
    return nullptr;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  bool live = seg.waiting && seg.waits == e.wait && seg.butler == butler;
  return live ? &seg : nullptr;
}

/// A full butler refused the dispatch at its door (`overload_rejected`):
/// flow control, not a failure. The segment waits for room and goes out
/// again as the same attempt (using up neither retries nor invocations)
/// when that butler next reports an outcome, or when a full-jitter timer
/// fires in case none comes. The request's wall-clock budget still bounds
/// the wait.
void wait_for_room(switchboard_ptr self, const std::string& id,
                   const std::string& attempt_id, const std::string& message) {
  auto& st = self->state;
  auto it = st.requests.find(id);
  if (it == st.requests.end())
    return;
  auto [base, attempt] = split_attempt(attempt_id);
  auto k = it->second.fo.find(base);
  if (k < 0)
    return;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  if (seg.state != "dispatched" || seg.attempts != attempt)
    return;
  circuit(self, seg.butler).on_success(); // it answered
  observe_circuit(self, seg.butler);
  st.overload_waits->inc();
  seg.state = "backoff";
  seg.redeliver = true; // the same attempt: nothing of it ran
  seg.error_class = "overload_rejected";
  seg.error_message = message;
  ++seg.waits;
  auto delay = backoff_delay(std::min<uint32_t>(seg.waits, 16),
                             std::chrono::milliseconds{st.cfg.retry_base_ms},
                             std::chrono::milliseconds{st.cfg.retry_cap_ms},
                             st.rng);
  seg.wait_until_ns = steady_ns()
                      + std::chrono::duration_cast<std::chrono::nanoseconds>(
                          delay)
                          .count();
  auto& line = st.waiting[seg.butler];
  line.push_back(waiting_entry{id, seg.segment_id, seg.waits});
  set_waiting(self, seg, true);
  // Sweep stale entries once they outnumber the live waits.
  if (line.size() > 2 * size_t{st.waiting_count} + 16) {
    auto butler = seg.butler;
    line.erase(std::remove_if(line.begin(), line.end(),
                              [&](const waiting_entry& e) {
                                return live_wait(self, e, butler) == nullptr;
                              }),
               line.end());
  }
  persist_segment(self, id, seg, {}, false);
  self->delayed_send(self, delay, retry_atom_v, id, seg.segment_id);
}

/// Butler `butler` reported an outcome, so it has a free slot: the oldest
/// segment waiting for it goes out again.
void wake_one(switchboard_ptr self, const std::string& butler) {
  auto& st = self->state;
  auto q = st.waiting.find(butler);
  if (q == st.waiting.end())
    return;
  while (!q->second.empty()) {
    auto e = std::move(q->second.front());
    q->second.pop_front();
    if (auto* seg = live_wait(self, e, butler)) {
      seg->state = "pending";
      set_waiting(self, *seg, false);
      if (q->second.empty())
        st.waiting.erase(q);
      advance(self, e.request_id);
      return;
    }
  }
  st.waiting.erase(q);
}

/// A failed attempt: retried after a full-jitter backoff while the class is
/// retryable and attempts and budget remain; else the segment ends `error`
/// (dead-lettered when it ran out of retries).
void fail_attempt(switchboard_ptr self, const std::string& id, size_t i,
                  std::string cls, std::string message, bool retryable,
                  const std::string& raw) {
  auto& st = self->state;
  auto& rq = st.requests.at(id);
  auto& seg = rq.fo.segments[i];
  seg.error_class = cls;
  seg.error_message = message;
  if (retryable && seg.round_attempts < rq.retry_max_attempts
      && rq.invocations < rq.max_invocations) {
    seg.state = "backoff";
    st.retries->inc();
    auto delay = backoff_delay(seg.round_attempts,
                               std::chrono::milliseconds{st.cfg.retry_base_ms},
                               std::chrono::milliseconds{st.cfg.retry_cap_ms},
                               st.rng);
    persist_segment(self, id, seg, raw, true);
    self->delayed_send(self, delay, retry_atom_v, id, seg.segment_id);
    return;
  }
  seg.state = "error";
  if (retryable) {
    // Out of retries (or budget): the dead-letter surface, for replay.
    st.dead_letters->inc();
    write(self, named_statement{"dead_letter_insert",
                                {id, seg.segment_id, seg.butler, cls, message,
                                 std::to_string(seg.attempts)}});
  }
  settle(self, id, i, raw);
  advance(self, id);
}

/// Best effort: stops the work item of a subrequest we gave up on.
void cancel_work(switchboard_ptr self, const std::string& butler,
                 const std::string& work_id) {
  if (work_id.empty())
    return;
  auto reg = caf::actor_cast<registry_actor>(self->state.ctx->registry());
  if (!reg)
    return;
  self->request(reg, local_call, lookup_atom_v, butler)
    .then(
      [self, work_id](const caf::actor& hdl) {
        caf::anon_send(caf::actor_cast<butler_actor>(hdl), cancel_atom_v,
                       work_id);
      },
      [](const caf::error&) {});
}

/// A route.v1 envelope with the context of the request `ctx` describes
/// (the rest left empty).
route_envelope envelope_for(const request_context& ctx) {
  route_envelope env;
  env.request_id = ctx.request_id;
  env.received_at = rfc3339_utc(ctx.received_at_us);
  env.source_channel = ctx.source_channel;
  env.source_endpoint_identity = ctx.source_endpoint_identity;
  env.source_sender_identity = ctx.source_sender_identity;
  env.source_thread_identity = ctx.source_thread_identity;
  env.trace_parent = ctx.trace_parent;
  return env;
}

void dispatch(switchboard_ptr self, const std::string& id, size_t i) {
  auto& st = self->state;
  auto& rq = st.requests.at(id);
  auto& seg = rq.fo.segments[i];
  if (rq.invocations >= rq.max_invocations) {
    st.budget_exhausted->inc();
    seg.state = "error";
    seg.error_class = "routing_error";
    seg.error_message = "invocation budget of "
                        + std::to_string(rq.max_invocations)
                        + " dispatches exhausted";
    settle(self, id, i, {});
    return;
  }
  auto& cb = circuit(self, seg.butler);
  auto allowed = cb.allow(std::chrono::steady_clock::now());
  observe_circuit(self, seg.butler);
  if (seg.redeliver) {
    seg.redeliver = false;
  } else {
    ++seg.attempts;
    ++seg.round_attempts;
    ++rq.invocations;
    seg.work_id.clear();
  }
  seg.state = "dispatched";
  if (!allowed) {
    fail_attempt(self, id, i, "target_unavailable",
                 "circuit open for butler '" + seg.butler + "'", true, {});
    return;
  }
  auto attempt_id = attempt_segment_id(seg.segment_id, seg.attempts);
  auto env = envelope_for(rq.record.context);
  env.subrequest_id = make_uuid_v7().to_string();
  env.segment_id = attempt_id;
  env.fanout_mode = rq.fo.mode;
  env.butler = seg.butler;
  env.tool = "route.execute";
  env.prompt = seg.prompt;
  // The plan store wrote the first dispatch of a new fanout already.
  if (!seg.first_dispatch_stored || seg.attempts != 1)
    persist_segment(self, id, seg, {}, false);
  seg.first_dispatch_stored = false;
  auto butler = seg.butler;
  auto started = std::chrono::steady_clock::now();
  auto failed = [self, id, attempt_id](std::string cls, std::string msg) {
    route_response r = make_error_response(id, std::move(cls), std::move(msg),
                                           true);
    r.segment_id = attempt_id;
    on_outcome(self, std::move(r));
  };
  auto reg = caf::actor_cast<registry_actor>(st.ctx->registry());
  if (!reg) {
    failed("target_unavailable", "no butler registry on this node");
    return;
  }
  auto envelope = make_route_json(env);
  auto parsed = std::make_shared<const route_envelope>(std::move(env));
  // After a transport failure, not the same host again while there is
  // another: the cluster may not have noticed yet that its node is gone.
  caf::actor avoid;
  if (auto f = rq.failed_host.find(seg.segment_id); f != rq.failed_host.end()) {
    avoid = std::move(f->second);
    rq.failed_host.erase(f);
  }
  auto segment_id = seg.segment_id;
  auto send_to = [self, id, attempt_id, envelope, parsed, failed, butler,
                  started, segment_id](const caf::actor& hdl) {
    auto me = caf::actor_cast<caf::actor>(self);
    route_request req{envelope, "route", {}, me, parsed};
    // Only a butler on another node can fail to answer at all.
    auto timeout = hdl.node() == self->node() ? caf::duration{local_call}
                                              : caf::duration{call_timeout};
    self
      ->request(caf::actor_cast<butler_actor>(hdl), timeout, route_atom_v,
                std::move(req))
      .then(
        [self, id, attempt_id, started](route_response& r) {
          if (r.status == "accepted") {
            auto& st = self->state;
            auto it = st.requests.find(id);
            if (it == st.requests.end())
              return;
            auto [base, attempt] = split_attempt(attempt_id);
            auto k = it->second.fo.find(base);
            if (k >= 0
                && it->second.fo.segments[static_cast<size_t>(k)].attempts
                     == attempt)
              it->second.fo.segments[static_cast<size_t>(k)].work_id
                = r.work_id;
            it->second.attempt_deadlines[attempt_id]
              = steady_ns() + int64_t{st.cfg.route_timeout_s} * 1000000000;
            return;
          }
          // Refused at the door. A full butler's refusal is flow
          // control: wait for room. Anything else (validation) is the
          // outcome of this attempt.
          if (r.error_class == "overload_rejected") {
            wait_for_room(self, id, attempt_id, r.error_message);
            return;
          }
          r.request_id = id;
          r.segment_id = attempt_id;
          using ms = std::chrono::duration<double, std::milli>;
          r.duration_ms = ms{std::chrono::steady_clock::now() - started}
                            .count();
          on_outcome(self, std::move(r));
        },
        [self, id, segment_id, hdl, failed, butler](const caf::error& err) {
          // Transport failed before an envelope came back (§6.3).
          auto& st = self->state;
          forget_host(self, butler);
          if (auto it = st.requests.find(id); it != st.requests.end())
            it->second.failed_host[segment_id] = hdl;
          auto code = code_of(err);
          failed(code == butlers_errc::timeout ? "timeout"
                                               : "target_unavailable",
                 "route.execute on '" + butler
                   + "' failed: " + to_string(code));
        });
  };
  if (!avoid) {
    if (auto hdl = known_host(self, butler)) {
      send_to(hdl);
      return;
    }
  }
  self->request(reg, local_call, lookup_atom_v, butler, std::move(avoid))
    .then(
      [self, butler, send_to](const caf::actor& hdl) {
        remember_host(self, butler, hdl);
        send_to(hdl);
      },
      [failed, butler](const caf::error&) {
        failed("target_unavailable",
               "no butler named '" + butler + "' is registered");
      });
}

/// A user-visible error reply (§8): what failed and what to do.
std::string error_reply(const tracked_request& rq, const fanout::verdict_t& v) {
  std::string what;
  if (v.error_class == "overload_rejected")
    what = "is busy right now; please try again in a few minutes";
  else if (v.error_class == "target_unavailable")
    what = "is unavailable right now; please try again later";
  else if (v.error_class == "timeout")
    what = "did not answer in time; please try again later";
  else if (v.error_class == "validation_error")
    what = "could not accept this request; please rephrase it";
  else if (v.error_class == "routing_error")
    what = "could not be reached within this request's budget";
  else
    what = "failed";
  std::vector<std::string> ok, failed;
  for (auto& s : rq.fo.segments)
    (s.state == "ok" ? ok : failed).push_back(s.butler);
  std::string out = "Part of your request could not be completed: ";
  out += v.error_message.substr(0, v.error_message.find(' ')) + " " + what
         + " (" + v.error_class + ").";
  if (!ok.empty()) {
    out += " Done:";
    for (auto& b : ok)
      out += " " + b;
    out += ".";
  }
  out += " Reference: request " + rq.record.context.request_id + ".";
  return out;
}

void finish(switchboard_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.requests.find(id);
  if (it == st.requests.end() || it->second.finishing)
    return;
  auto& rq = it->second;
  rq.finishing = true;
  auto v = rq.fo.verdict();
  std::string outcomes = "[";
  std::string ok_list, failed_list;
  for (size_t i = 0; i < rq.fo.segments.size(); ++i) {
    auto& s = rq.fo.segments[i];
    outcomes += (i ? "," : "");
    outcomes += R"({"segment_id":)" + quote(s.segment_id) + R"(,"butler":)"
                + quote(s.butler) + R"(,"state":)" + quote(s.state)
                + R"(,"attempts":)" + std::to_string(s.attempts)
                + R"(,"work_id":)" + quote(s.work_id) + R"(,"error_class":)"
                + quote(s.error_class) + R"(,"error_message":)"
                + quote(s.error_message) + "}";
    auto& list = s.state == "ok" ? ok_list : failed_list;
    list += (list.empty() ? "" : ",") + quote(s.butler);
  }
  outcomes += "]";
  auto summary = R"({"state":)" + quote(v.state) + R"(,"succeeded":[)" + ok_list
                 + R"(],"failed":[)" + failed_list + "]}";
  auto& ref = rq.ref;
  completion done{ref,      rq.token, v.state, v.error_class, v.error_message,
                  outcomes, summary};
  auto reply = v.state == "errored" ? error_reply(rq, v) : std::string{};
  auto ctx = rq.record.context;
  // Keys the error reply per round: a replayed request that fails again
  // tells the user again.
  uint32_t attempts = 0;
  for (auto& x : rq.fo.segments)
    attempts += x.attempts;
  st.writes.complete(
    self, std::move(done),
    [self, id, v, reply, ctx, attempts](bool applied) {
      auto& st = self->state;
      st.requests.erase(id);
      st.in_progress->set(static_cast<int64_t>(st.requests.size()));
      if (!applied) {
        st.lease_lost->inc();
      } else if (v.state == "parsed") {
        st.lifecycle_parsed->inc();
      } else {
        st.lifecycle_errored->inc();
        hand_to_messenger(self,
                          make_notify_json(envelope_for(ctx), "switchboard",
                                           reply,
                                           "error:" + ctx.request_id + ":"
                                             + std::to_string(attempts)),
                          [id](const route_response& r) {
                            if (r.status == "error")
                              spdlog::warn("request {}: error reply not "
                                           "delivered: {}",
                                           id, r.error_message);
                          });
      }
      pump(self);
    },
    [self, id](const caf::error& err) {
      // Still 'progress': the lease expires and the cold path plans the
      // request again from what is stored.
      auto& st = self->state;
      spdlog::warn("request {}: terminal state not written: {}", id,
                   to_string(err));
      st.requests.erase(id);
      st.in_progress->set(static_cast<int64_t>(st.requests.size()));
      pump(self);
    });
}

void advance(switchboard_ptr self, const std::string& id) {
  auto& st = self->state;
  for (;;) {
    auto it = st.requests.find(id);
    if (it == st.requests.end() || it->second.finishing)
      return;
    auto ready = it->second.fo.ready();
    if (ready.empty())
      break;
    dispatch(self, id, ready.front());
  }
  auto it = st.requests.find(id);
  if (it != st.requests.end() && it->second.fo.done())
    finish(self, id);
}

/// The plan is stored (or was before): track the request, arm its budget,
/// send out what is ready.
void start_fanout(switchboard_ptr self, inbox_ref ref, claim_result claim,
                  const named_result& rows) {
  auto& st = self->state;
  auto id = ref.request_id;
  auto& policy = policy_for(self, claim.record.policy_tier);
  tracked_request rq;
  rq.ref = ref;
  rq.token = claim.lease_token;
  rq.record = std::move(claim.record);
  rq.max_invocations = policy.max_invocations;
  rq.retry_max_attempts = policy.retry_max_attempts;
  rq.wall_clock_s = policy.wall_clock_s;
  for (auto& row : rows.rows) {
    rq.fo.mode = row[0];
    fanout_segment s;
    s.segment_id = row[1];
    s.ordinal = std::stoi(row[2]);
    s.butler = row[3];
    s.prompt = row[4];
    s.state = row[5];
    s.attempts = static_cast<uint32_t>(std::stoul(row[6]));
    s.round_attempts = static_cast<uint32_t>(std::stoul(row[7]));
    s.work_id = row[8];
    s.error_class = row[9];
    s.error_message = row[10];
    s.first_dispatch_stored = row[11] == "true";
    // A dispatch that was out when the request was last processed: its
    // outcome went to a switchboard that is gone. Send the same attempt
    // again: the butler dedupes it, answers at once if it finished, or
    // reports to us when it does.
    if (s.state == "dispatched") {
      s.state = "pending";
      s.redeliver = s.attempts > 0;
    }
    rq.fo.segments.push_back(std::move(s));
  }
  if (rq.fo.segments.empty()) {
    spdlog::error("request {}: stored plan has no segments", id);
    done_classifying(self, id);
    return;
  }
  // Wall-clock budget (§15.7), counted from receipt.
  int64_t deadline_us = rq.record.context.received_at_us
                        + int64_t{rq.wall_clock_s} * 1000000;
  // Processed again (a replay, or after a crash): the budget counts from
  // now, or a replay of an old request could never run.
  bool again = std::any_of(rq.fo.segments.begin(), rq.fo.segments.end(),
                           [](const fanout_segment& x) {
                             return x.attempts > 0;
                           });
  if (again)
    deadline_us = now_us() + int64_t{rq.wall_clock_s} * 1000000;
  auto left = std::max<int64_t>(0, deadline_us - now_us());
  rq.deadline_ns = steady_ns() + std::max<int64_t>(1, left) * 1000;
  // Claimed again while still tracked here (our lease lapsed, the cold path
  // gave the row back to us): the new claim replaces the stale entry.
  st.requests.erase(id);
  st.requests.emplace(id, std::move(rq));
  st.in_progress->set(static_cast<int64_t>(st.requests.size()));
  done_classifying(self, id);
  advance(self, id);
}

/// Applies hard policy to `plan` (counting what it changed) and makes the
/// statement that stores it (or finds the stored one).
named_statement plan_statement(switchboard_ptr self, const inbox_ref& ref,
                               const inbox_record& record, routing_plan& plan) {
  auto& st = self->state;
  std::vector<routing_rule> rules;
  for (auto& r : st.routing.router.rules)
    rules.push_back(routing_rule{r.channels, r.allow, r.deny});
  auto rerouted = apply_policy(plan, record.context.source_channel, rules);
  st.policy_reroutes->inc(rerouted);
  if (plan.fallback) {
    st.fallback_to_general->inc();
    if (plan.fallback_reason.rfind("router_parse_failure", 0) == 0)
      st.router_parse_failure->inc();
    spdlog::info("request {}: routed to general ({})", ref.request_id,
                 plan.fallback_reason);
  }
  // Segment ids are ours: a CLI router's own ids could collide with the
  // attempt suffix (":a2") or leave no room for it within 64 characters.
  for (size_t i = 0; i < plan.segments.size(); ++i)
    plan.segments[i].segment_id = "seg-" + std::to_string(i + 1);
  fanout f;
  f.mode = to_string(st.cfg.fanout_mode);
  f.segments.resize(plan.segments.size());
  // The dispatches that start the fanout are stored with the plan.
  std::vector<bool> first(plan.segments.size(), false);
  for (auto i : f.first_dispatches())
    first[i] = true;
  std::string segments = "[";
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    auto& s = plan.segments[i];
    segments += (i ? "," : "");
    segments += R"({"segment_id":)" + quote(s.segment_id) + R"(,"ordinal":)"
                + std::to_string(i) + R"(,"butler":)" + quote(s.butler)
                + R"(,"prompt":)" + quote(s.prompt) + R"(,"dispatched":)"
                + (first[i] ? "true" : "false") + "}";
  }
  segments += "]";
  char conf[32];
  std::snprintf(conf, sizeof(conf), "%.4f", plan.confidence);
  return named_statement{"fanout_plan_store",
                         {ref.request_id, std::to_string(ref.received_at_us),
                          plan.router, plan.fallback ? "true" : "false",
                          plan.fallback_reason, conf, f.mode, "all",
                          f.abort_policy(), record.policy_tier, to_json(plan),
                          segments}};
}

/// Persists the plan (or finds the stored one) and starts the fanout.
void plan_ready(switchboard_ptr self, inbox_ref ref, claim_result claim,
                routing_plan plan) {
  auto& st = self->state;
  auto stmt = plan_statement(self, ref, claim.record, plan);
  self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
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

/// The rules router's plan for `text` (general takes an empty message).
routing_plan rules_plan(switchboard_ptr self, const std::string& text,
                        const std::vector<registry_entry>& entries) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    // Nothing to decompose (ingest.v1 allows an empty text): general
    // gets it whole, as the fail-safe.
    routing_plan plan;
    plan.router = "rules";
    plan.fallback = true;
    plan.fallback_reason = "no_match: the message has no text";
    plan_segment seg;
    seg.segment_id = "seg-1";
    seg.butler = "general";
    seg.prompt = "(the message has no text)";
    seg.rationale = "empty message";
    plan.segments.push_back(std::move(seg));
    return plan;
  }
  return route_by_rules(text, entries,
                        self->state.routing.router.confidence_threshold);
}

/// The cli router: the CLI runs on a thread of its own; its answer is
/// validated strictly, and anything wrong sends the request to general.
void route_by_cli(switchboard_ptr self, inbox_ref ref, claim_result claim,
                  std::vector<registry_entry> entries) {
  auto& rc = self->state.routing.router;
  auto family = rc.family;
  subprocess_options opts;
  opts.argv = rc.command.empty() ? default_command(family) : rc.command;
  opts.stdin_data = cli_router_prompt(claim.record.normalized_text, entries);
  opts.timeout = std::chrono::seconds{rc.timeout_s};
  opts.max_output_bytes = rc.max_output_bytes;
  opts.kill_grace = 1s;
  auto text = claim.record.normalized_text;
  // The CLI runs on a detached actor of its own (wait() blocks); its
  // final answer comes back as an adapter_result.
  auto proc = std::make_shared<subprocess>(std::move(opts));
  auto runner = self->spawn<caf::detached>(
    [](caf::blocking_actor* b, std::shared_ptr<subprocess> proc,
       cli_family family) {
      b->receive([&](caf::get_atom) {
        adapter_result a;
        auto r = proc->wait();
        if (r.outcome != subprocess_outcome::exited || r.exit_code != 0) {
          a.error_class = "router_failure";
          a.message = std::string{to_string(r.outcome)} + " (exit "
                      + std::to_string(r.exit_code) + ")";
          return a;
        }
        auto answer = parse_cli_output(family, r.out);
        a.ok = answer.ok;
        a.text = answer.text;
        a.message = answer.error;
        return a;
      });
    },
    proc, family);
  self
    ->request(runner, std::chrono::seconds{rc.timeout_s} + 10s, caf::get_atom_v)
    .then(
      [self, ref, claim, text, entries](adapter_result& a) mutable {
        auto plan = plan_from_cli_answer(a.ok ? a.text : std::string{}, text,
                                         entries);
        if (!a.ok && a.error_class == "router_failure")
          plan.fallback_reason = "router_failure: " + a.message;
        plan_ready(self, std::move(ref), std::move(claim), std::move(plan));
      },
      [self, ref, claim, text, entries, proc](const caf::error&) mutable {
        proc->cancel();
        auto plan = plan_from_cli_answer("", text, entries);
        plan.fallback_reason = "router_failure: no answer";
        plan_ready(self, std::move(ref), std::move(claim), std::move(plan));
      });
}

} // namespace

namespace {

/// Asks the registry for its entries and calls `then` with them; frees the
/// worker of `request_id` when there is no registry or no answer (the row
/// stays as it is and the cold path takes it again).
template<class F>
void with_registry(switchboard_ptr self, const std::string& request_id,
                   F then) {
  auto& cache = self->state.registry_cache;
  auto now = self->clock().now();
  if (cache.listed && now - cache.listed_at < registry_ttl) {
    auto entries = cache.entries;
    then(entries);
    return;
  }
  auto reg = caf::actor_cast<registry_actor>(self->state.ctx->registry());
  if (!reg) {
    done_classifying(self, request_id);
    return;
  }
  self->request(reg, local_call, list_atom_v)
    .then(
      [self, now, then](std::vector<registry_entry>& entries) mutable {
        auto& cache = self->state.registry_cache;
        cache.entries = entries;
        cache.listed_at = now;
        cache.listed = true;
        then(entries);
      },
      [self, request_id](const caf::error&) {
        done_classifying(self, request_id);
      });
}

} // namespace

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
                  auto plan = rules_plan(self, claim.record.normalized_text,
                                         entries);
                  plan_ready(self, std::move(ref), std::move(claim),
                             std::move(plan));
                });
}

void plan_and_claim(switchboard_ptr self, inbox_ref ref,
                    std::shared_ptr<const inbox_record> record) {
  auto id = ref.request_id;
  with_registry(self, id,
                [self, ref, record](std::vector<registry_entry>& entries) {
                  auto& st = self->state;
                  auto plan = rules_plan(self, record->normalized_text,
                                         entries);
                  auto stmt = plan_statement(self, ref, *record, plan);
                  // Where the pair stands. With the real writer the claim's
                  // answer comes first (same lane; claims are answered before
                  // statements), but nothing here depends on it. The worker is
                  // freed once.
                  struct pair_state {
                    bool over = false;
                    bool claim_known = false;
                    std::optional<claim_result> claim;
                    std::optional<named_result> rows;
                    std::string plan_error;
                  };
                  auto ps = std::make_shared<pair_state>();
                  auto settle = [self, ps, ref] {
                    if (ps->over || !ps->claim_known)
                      return;
                    if (!ps->claim) {
                      // Not ours (or not answered): still 'accepted' or someone
                      // else's; the cold path or its holder takes it.
                      ps->over = true;
                      done_classifying(self, ref.request_id);
                    } else if (!ps->plan_error.empty()) {
                      // Claimed but not planned: the lease expires and the cold
                      // path plans it again.
                      ps->over = true;
                      spdlog::warn("request {}: plan not stored: {}",
                                   ref.request_id, ps->plan_error);
                      done_classifying(self, ref.request_id);
                    } else if (ps->rows) {
                      ps->over = true;
                      start_fanout(self, ref, std::move(*ps->claim), *ps->rows);
                    }
                  };
                  self->request(st.writer, local_call, claim_atom_v, ref)
                    .then(
                      [ps, settle](claim_result& claim) {
                        ps->claim_known = true;
                        if (claim.claimed)
                          ps->claim = std::move(claim);
                        settle();
                      },
                      [ps, settle](const caf::error&) {
                        ps->claim_known = true;
                        settle();
                      });
                  self
                    ->request(st.writer, local_call, exec_atom_v,
                              std::move(stmt))
                    .then(
                      [ps, settle](named_result& rows) {
                        ps->rows = std::move(rows);
                        settle();
                      },
                      [ps, settle](const caf::error& err) {
                        ps->plan_error = to_string(err);
                        if (ps->plan_error.empty())
                          ps->plan_error = "storage error";
                        settle();
                      });
                  // The plan is made: the worker is free for the next request
                  // while these commit.
                  free_worker(self, ref.request_id);
                });
}

void on_outcome(switchboard_ptr self, route_response r) {
  auto& st = self->state;
  auto it = st.requests.find(r.request_id);
  if (it == st.requests.end()) {
    spdlog::debug("route_response for request {} not in progress here",
                  r.request_id);
    return;
  }
  auto id = r.request_id;
  auto& rq = it->second;
  // The attempt answered: its route timeout no longer applies.
  rq.attempt_deadlines.erase(r.segment_id);
  auto [base, attempt] = split_attempt(r.segment_id);
  auto k = rq.fo.find(base);
  if (k < 0) {
    spdlog::debug("request {}: route_response for segment {} is not ours", id,
                  r.segment_id);
    return;
  }
  auto i = static_cast<size_t>(k);
  auto& seg = rq.fo.segments[i];
  if (seg.state != "dispatched" || seg.attempts != attempt)
    return; // a late answer to an attempt we already gave up on
  // A final answer about a work item: the butler is done with it, so a
  // slot is free there for the oldest segment waiting for room. Woken once
  // this outcome is processed (which may finish this very request).
  struct wake_after {
    switchboard_ptr self;
    std::string butler;
    ~wake_after() {
      if (!butler.empty())
        wake_one(self, butler);
    }
  } wake{self, r.work_id.empty() ? std::string{} : seg.butler};
  // §6.3: the response must be a valid route_response.v1 of this lineage.
  auto raw = to_json(r);
  std::string invalid;
  auto parsed = parse_route_response(raw, &invalid);
  if (!parsed) {
    circuit(self, seg.butler).on_success(); // it answered
    fail_attempt(self, id, i, "validation_error", invalid, false, {});
    return;
  }
  if (r.status == "ok") {
    circuit(self, seg.butler).on_success();
    observe_circuit(self, seg.butler);
    seg.state = "ok";
    seg.error_class.clear();
    seg.error_message.clear();
    if (!r.work_id.empty())
      seg.work_id = r.work_id;
    settle(self, id, i, raw);
    advance(self, id);
    return;
  }
  auto cls = to_string(error_class(normalize_error_class(r.error_class)));
  if (cls != r.error_class && !r.error_class.empty())
    spdlog::info("request {}: downstream class '{}' normalized to {}", id,
                 r.error_class, cls);
  if (cls == std::string{"target_unavailable"} || cls == std::string{"timeout"})
    circuit(self, seg.butler).on_failure(std::chrono::steady_clock::now());
  else
    circuit(self, seg.butler).on_success();
  observe_circuit(self, seg.butler);
  auto retryable = r.retryable && is_retryable_class(cls);
  fail_attempt(self, id, i, cls, r.error_message, retryable, raw);
}

void on_retry(switchboard_ptr self, const std::string& request_id,
              const std::string& segment_id) {
  auto& st = self->state;
  auto it = st.requests.find(request_id);
  if (it == st.requests.end())
    return;
  auto k = it->second.fo.find(segment_id);
  if (k < 0)
    return;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  if (seg.state != "backoff")
    return;
  if (seg.waiting && steady_ns() < seg.wait_until_ns)
    return; // an earlier wait's timer; this wait has its own
  seg.state = "pending";
  set_waiting(self, seg, false);
  advance(self, request_id);
}

namespace {

/// A segment attempt's route timeout, or (empty `attempt_id`) the
/// request's wall-clock budget, passed.
void on_expire(switchboard_ptr self, const std::string& request_id,
               const std::string& attempt_id) {
  auto& st = self->state;
  auto it = st.requests.find(request_id);
  if (it == st.requests.end())
    return;
  auto& rq = it->second;
  if (attempt_id.empty()) {
    // The wall-clock budget (§15.7): an explicit terminal error.
    st.budget_exhausted->inc();
    for (size_t i = 0; i < rq.fo.segments.size(); ++i) {
      auto& s = rq.fo.segments[i];
      if (s.terminal())
        continue;
      if (s.state == "dispatched")
        cancel_work(self, s.butler, s.work_id);
      set_waiting(self, s, false);
      s.state = "error";
      s.error_class = "timeout";
      s.error_message = "wall-clock budget of "
                        + std::to_string(rq.wall_clock_s) + " s exhausted";
      persist_segment(self, request_id, s, {}, true);
    }
    finish(self, request_id);
    return;
  }
  auto [base, attempt] = split_attempt(attempt_id);
  auto k = rq.fo.find(base);
  if (k < 0)
    return;
  auto i = static_cast<size_t>(k);
  auto& seg = rq.fo.segments[i];
  if (seg.state != "dispatched" || seg.attempts != attempt)
    return;
  st.route_timeouts->inc();
  cancel_work(self, seg.butler, seg.work_id);
  circuit(self, seg.butler).on_failure(std::chrono::steady_clock::now());
  observe_circuit(self, seg.butler);
  fail_attempt(self, request_id, i, "timeout",
               "no route_response from '" + seg.butler + "' within "
                 + std::to_string(st.cfg.route_timeout_s) + " s",
               true, {});
}

} // namespace

void expire_due(switchboard_ptr self) {
  auto& st = self->state;
  auto now = steady_ns();
  std::vector<std::pair<std::string, std::string>> due;
  for (auto& [id, rq] : st.requests) {
    if (rq.finishing)
      continue;
    if (rq.deadline_ns != 0 && now >= rq.deadline_ns) {
      rq.deadline_ns = 0;
      due.emplace_back(id, std::string{});
      continue;
    }
    for (auto a = rq.attempt_deadlines.begin();
         a != rq.attempt_deadlines.end();) {
      if (now >= a->second) {
        due.emplace_back(id, a->first);
        a = rq.attempt_deadlines.erase(a);
      } else {
        ++a;
      }
    }
  }
  // Expiring may finish (and forget) a request: by id, after the scan.
  for (auto& [id, attempt] : due)
    on_expire(self, id, attempt);
}

void on_host_change(switchboard_ptr self, const std::string& name,
                    bool available) {
  auto& cb = circuit(self, name);
  if (available) {
    if (cb.held())
      spdlog::info("butler {}: a live host is back, releasing its circuit",
                   name);
    cb.release();
  } else {
    spdlog::warn("butler {}: no live host left, holding its circuit open",
                 name);
    cb.hold_open(std::chrono::steady_clock::now());
  }
  observe_circuit(self, name);
}

void renew_leases(switchboard_ptr self) {
  auto& st = self->state;
  for (auto& [id, rq] : st.requests) {
    named_statement stmt{"inbox_renew",
                         {id, std::to_string(rq.ref.received_at_us),
                          std::to_string(rq.token),
                          std::to_string(st.cfg.lease_s)}};
    auto rid = id;
    self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
      .then(
        [self, rid](const named_result& r) {
          if (!r.rows.empty())
            return;
          // Cancelled by an operator or taken over: stop tracking it.
          auto& st = self->state;
          auto it = st.requests.find(rid);
          if (it == st.requests.end() || it->second.finishing)
            return;
          // Its subrequests keep running: whoever holds the request now
          // re-sends the same attempts and takes their outcomes (an
          // operator's cancel stops them itself).
          spdlog::info("request {}: lease gone, no longer tracked here", rid);
          st.requests.erase(it);
          st.in_progress->set(static_cast<int64_t>(st.requests.size()));
          pump(self);
        },
        [](const caf::error&) {});
  }
}

caf::result<std::string> operate(switchboard_ptr self,
                                 const std::string& action,
                                 const std::string& request_id,
                                 const std::string& who, const std::string& why,
                                 const std::string& arg) {
  auto& st = self->state;
  if (who.empty() || why.empty())
    return caf::error{butlers_errc::validation_error,
                      std::string{"'who' and 'why' are required (audit)"}};
  named_statement stmt;
  if (action == "replay") {
    stmt = {"request_replay", {request_id, who, why}};
  } else if (action == "cancel") {
    stmt = {"request_cancel", {request_id, who, why}};
  } else if (action == "force_complete") {
    if (arg != "parsed" && arg != "errored")
      return caf::error{butlers_errc::validation_error,
                        std::string{"state must be 'parsed' or 'errored'"}};
    stmt = {"request_force_complete", {request_id, who, why, arg}};
  } else if (action == "reroute") {
    auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      return caf::error{butlers_errc::validation_error,
                        std::string{"reroute needs segment_id and butler"}};
    stmt = {"request_reroute",
            {request_id, who, why, arg.substr(0, eq), arg.substr(eq + 1)}};
  } else {
    return caf::error{butlers_errc::not_found, "unknown action " + action};
  }
  auto rp = self->make_response_promise<std::string>();
  self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
    .then(
      [self, rp, action, request_id, who, why,
       arg](const named_result& r) mutable {
        auto& st = self->state;
        if (r.rows.empty()) {
          rp.deliver(caf::error{butlers_errc::conflict,
                                action + " refused for request " + request_id
                                  + ": not in a state that allows it"});
          return;
        }
        auto tracked = st.requests.find(request_id);
        if (action == "replay") {
          inbox_ref ref{request_id, std::stoll(r.rows[0][0])};
          if (offer(self, ref))
            pump(self);
          rp.deliver(R"({"result":"replayed","subrequests":)" + r.rows[0][1]
                     + "}");
          return;
        }
        if (action == "reroute") {
          auto eq = arg.find('=');
          auto seg_id = arg.substr(0, eq);
          auto butler = arg.substr(eq + 1);
          if (tracked != st.requests.end()) {
            auto k = tracked->second.fo.find(seg_id);
            if (k >= 0) {
              auto& s = tracked->second.fo.segments[static_cast<size_t>(k)];
              if (s.state == "pending" || s.state == "backoff")
                s.butler = butler;
            }
          }
          if (r.rows[0][0] == "errored") {
            // Run the new target: replay the request, same lineage.
            self
              ->request(st.writer, local_call, exec_atom_v,
                        named_statement{"request_replay",
                                        {request_id, who, why}})
              .then(
                [self, rp, request_id](const named_result& rr) mutable {
                  if (!rr.rows.empty()) {
                    inbox_ref ref{request_id, std::stoll(rr.rows[0][0])};
                    if (offer(self, ref))
                      pump(self);
                  }
                  rp.deliver(
                    std::string{R"({"result":"rerouted","replayed":true})"});
                },
                [rp](const caf::error& err) mutable {
                  rp.deliver(err);
                });
            return;
          }
          rp.deliver(std::string{R"({"result":"rerouted","replayed":false})"});
          return;
        }
        // cancel, force_complete: whatever runs here for it stops.
        if (tracked != st.requests.end()) {
          for (auto& s : tracked->second.fo.segments) {
            if (s.state == "dispatched")
              cancel_work(self, s.butler, s.work_id);
            set_waiting(self, s, false);
          }
          st.requests.erase(tracked);
          st.in_progress->set(static_cast<int64_t>(st.requests.size()));
        }
        if (action == "cancel")
          st.lifecycle_cancelled->inc();
        rp.deliver(action == "cancel"
                     ? std::string{R"({"result":"cancelled"})"}
                     : R"({"result":"completed","state":)" + quote(arg) + "}");
        pump(self);
      },
      [rp](const caf::error& err) mutable {
        rp.deliver(err);
      });
  return rp;
}

caf::actor known_host(switchboard_ptr self, const std::string& butler) {
  auto& hosts = self->state.registry_cache.local_hosts;
  auto i = hosts.find(butler);
  if (i == hosts.end()
      || self->clock().now() - i->second.second >= registry_ttl)
    return {};
  return i->second.first;
}

void remember_host(switchboard_ptr self, const std::string& butler,
                   const caf::actor& hdl) {
  if (hdl && hdl.node() == self->node())
    self->state.registry_cache.local_hosts[butler] = {hdl, self->clock().now()};
}

void forget_host(switchboard_ptr self, const std::string& butler) {
  self->state.registry_cache.local_hosts.erase(butler);
}

} // namespace butlers
