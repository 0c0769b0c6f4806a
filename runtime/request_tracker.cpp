#include "runtime/request_tracker.hpp"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "runtime/budget.hpp"
#include "runtime/error.hpp"
#include "runtime/json.hpp"
#include "runtime/scripted.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

using json::quote;

std::chrono::nanoseconds seconds_ns(uint32_t s) {
  return std::chrono::seconds{s};
}

} // namespace

request_tracker::request_tracker(const switchboard_config& cfg,
                                 std::vector<policy_config> policies,
                                 metrics_registry& metrics, uint64_t seed)
  : cfg_(cfg), policies_(std::move(policies)), rng_(seed), metrics_(metrics),
    retries_(metrics.get_counter("butlers_switchboard_route_retries_total",
                                 "Subrequests dispatched again after a "
                                 "retryable failure")),
    dead_letters_(metrics.get_counter("butlers_switchboard_dead_letters_total",
                                      "Subrequests moved to dead_letters "
                                      "after their retries")),
    budget_exhausted_(metrics.get_counter("butlers_switchboard_budget_"
                                          "exhausted_total",
                                          "Requests ended by their wall-clock "
                                          "or invocation budget")),
    route_timeouts_(metrics.get_counter("butlers_switchboard_route_timeouts_"
                                        "total",
                                        "Subrequests without a route_response "
                                        "within route_timeout_s")),
    overload_waits_(metrics.get_counter("butlers_switchboard_overload_waits_"
                                        "total",
                                        "Dispatches a full butler refused "
                                        "(overload_rejected); the subrequest "
                                        "waits for room")),
    segments_waiting_(metrics.get_gauge("butlers_switchboard_segments_waiting",
                                        "Subrequests waiting for room at a "
                                        "full butler")),
    in_progress_(metrics.get_gauge("butlers_switchboard_requests_in_progress",
                                   "Requests whose subrequests are out")) {
  // nop
}

// -- the requests -------------------------------------------------------------

bool request_tracker::start(inbox_ref ref, int64_t token, inbox_record record,
                            const named_result& rows, int64_t wall_now_us,
                            clock::time_point now, tracker_actions& out) {
  auto id = ref.request_id;
  auto& policy = policy_for(record.policy_tier);
  tracked_request rq;
  rq.ref = std::move(ref);
  rq.token = token;
  rq.record = std::move(record);
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
    return false;
  }
  // Wall-clock budget (§15.7), counted from receipt. Processed again (a
  // replay, or after a crash): from now, or a replay of an old request
  // could never run.
  bool again = std::any_of(rq.fo.segments.begin(), rq.fo.segments.end(),
                           [](const fanout_segment& x) {
                             return x.attempts > 0;
                           });
  auto budget_us = int64_t{rq.wall_clock_s} * 1000000;
  auto deadline_us = again ? wall_now_us + budget_us
                           : rq.record.context.received_at_us + budget_us;
  auto left = std::max<int64_t>(1, deadline_us - wall_now_us);
  rq.deadline = now + std::chrono::microseconds{left};
  // Claimed again while still tracked here (our lease lapsed, the cold path
  // gave the row back to us): the new claim replaces the stale entry.
  requests_.erase(id);
  requests_.emplace(id, std::move(rq));
  count_in_progress();
  advance(id, now, out);
  return true;
}

const tracked_request* request_tracker::find(
  const std::string& request_id) const {
  auto i = requests_.find(request_id);
  return i == requests_.end() ? nullptr : &i->second;
}

void request_tracker::forget(const std::string& request_id) {
  requests_.erase(request_id);
  count_in_progress();
}

bool request_tracker::drop_unless_finishing(const std::string& request_id) {
  auto i = requests_.find(request_id);
  if (i == requests_.end() || i->second.finishing)
    return false;
  requests_.erase(i);
  count_in_progress();
  return true;
}

void request_tracker::cancel(const std::string& request_id,
                             tracker_actions& out) {
  auto i = requests_.find(request_id);
  if (i == requests_.end())
    return;
  for (auto& s : i->second.fo.segments) {
    if (s.state == "dispatched" && !s.work_id.empty())
      out.cancels.push_back(work_cancel{s.butler, s.work_id});
    set_waiting(s, false, out);
  }
  requests_.erase(i);
  count_in_progress();
}

void request_tracker::reroute(const std::string& request_id,
                              const std::string& segment_id,
                              const std::string& butler) {
  auto i = requests_.find(request_id);
  if (i == requests_.end())
    return;
  auto k = i->second.fo.find(segment_id);
  if (k < 0)
    return;
  auto& s = i->second.fo.segments[static_cast<size_t>(k)];
  if (s.state == "pending" || s.state == "backoff")
    s.butler = butler;
}

std::vector<std::pair<inbox_ref, int64_t>> request_tracker::leases() const {
  std::vector<std::pair<inbox_ref, int64_t>> out;
  out.reserve(requests_.size());
  for (auto& [id, rq] : requests_)
    out.emplace_back(rq.ref, rq.token);
  return out;
}

// -- events -------------------------------------------------------------------

void request_tracker::on_accepted(const std::string& request_id,
                                  const std::string& attempt_id,
                                  const std::string& work_id,
                                  clock::time_point now) {
  auto it = requests_.find(request_id);
  if (it == requests_.end())
    return;
  auto [base, attempt] = split_attempt(attempt_id);
  auto k = it->second.fo.find(base);
  if (k >= 0
      && it->second.fo.segments[static_cast<size_t>(k)].attempts == attempt)
    it->second.fo.segments[static_cast<size_t>(k)].work_id = work_id;
  it->second.attempt_deadlines[attempt_id] = now
                                             + seconds_ns(cfg_.route_timeout_s);
}

void request_tracker::on_door_answer(const std::string& request_id,
                                     const std::string& attempt_id,
                                     route_response r, double duration_ms,
                                     clock::time_point now,
                                     tracker_actions& out) {
  if (r.status == "accepted") {
    on_accepted(request_id, attempt_id, r.work_id, now);
    return;
  }
  // A full butler's refusal is flow control: wait for room. Anything else
  // (validation) is the outcome of this attempt.
  if (r.error_class == "overload_rejected") {
    on_refused_full(request_id, attempt_id, std::move(r.error_message), now,
                    out);
    return;
  }
  r.request_id = request_id;
  r.segment_id = attempt_id;
  r.duration_ms = duration_ms;
  on_outcome(r, now, out);
}

void request_tracker::on_refused_full(const std::string& request_id,
                                      const std::string& attempt_id,
                                      std::string message,
                                      clock::time_point now,
                                      tracker_actions& out) {
  auto it = requests_.find(request_id);
  if (it == requests_.end())
    return;
  auto [base, attempt] = split_attempt(attempt_id);
  auto k = it->second.fo.find(base);
  if (k < 0)
    return;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  if (seg.state != "dispatched" || seg.attempts != attempt)
    return;
  circuit(seg.butler).on_success(); // it answered
  observe_circuit(seg.butler);
  overload_waits_.inc();
  seg.state = "backoff";
  seg.redeliver = true; // the same attempt: nothing of it ran
  seg.error_class = "overload_rejected";
  seg.error_message = std::move(message);
  ++seg.waits;
  auto delay = backoff_delay(std::min<uint32_t>(seg.waits, 16),
                             std::chrono::milliseconds{cfg_.retry_base_ms},
                             std::chrono::milliseconds{cfg_.retry_cap_ms},
                             rng_);
  seg.wait_until_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        (now + delay).time_since_epoch())
                        .count();
  auto& line = waiting_[seg.butler];
  line.push_back(waiting_entry{request_id, seg.segment_id, seg.waits});
  set_waiting(seg, true, out);
  // Sweep stale entries once they outnumber the live waits.
  if (line.size() > 2 * size_t{waiting_count_} + 16) {
    auto butler = seg.butler;
    line.erase(std::remove_if(line.begin(), line.end(),
                              [&](const waiting_entry& e) {
                                return live_wait(e, butler) == nullptr;
                              }),
               line.end());
  }
  persist(request_id, seg, {}, false, out);
  out.retries.push_back(retry_timer{request_id, seg.segment_id, delay});
}

void request_tracker::on_outcome(const route_response& r, clock::time_point now,
                                 tracker_actions& out) {
  auto it = requests_.find(r.request_id);
  if (it == requests_.end()) {
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
  // A final answer about a work item: the butler is done with it, so a slot
  // is free there for the oldest segment waiting for room, woken once this
  // outcome is processed (which may finish this very request).
  auto freed = r.work_id.empty() ? std::string{} : seg.butler;
  // §6.3: the response must be a valid route_response.v1 of this lineage.
  auto raw = to_json(r);
  std::string invalid;
  if (!parse_route_response(raw, &invalid)) {
    circuit(seg.butler).on_success(); // it answered
    fail_attempt(id, i, "validation_error", invalid, false, {}, now, out);
  } else if (r.status == "ok") {
    circuit(seg.butler).on_success();
    observe_circuit(seg.butler);
    seg.state = "ok";
    seg.error_class.clear();
    seg.error_message.clear();
    if (!r.work_id.empty())
      seg.work_id = r.work_id;
    settle(id, i, raw, out);
    advance(id, now, out);
  } else {
    // `database_unavailable` is no class of the taxonomy a downstream may
    // report; this node's own butlers report it when the shared database
    // failed them, and it counts as a retryable target_unavailable.
    auto reported = r.error_class
                        == to_string(butlers_errc::database_unavailable)
                      ? butlers_errc::database_unavailable
                      : normalize_error_class(r.error_class);
    auto cls = to_string(error_class(reported));
    if (cls != r.error_class && !r.error_class.empty())
      spdlog::info("request {}: downstream class '{}' normalized to {}", id,
                   r.error_class, cls);
    if (reported == butlers_errc::database_unavailable) {
      // The node's database failed the butler, not the butler itself: a
      // database blip must not open every butler's circuit (and fail the
      // requests after it fast). Its circuit is left as it is; the attempt
      // is retried.
    } else if (cls == std::string{"target_unavailable"}
               || cls == std::string{"timeout"})
      circuit(seg.butler).on_failure(now);
    else
      circuit(seg.butler).on_success();
    observe_circuit(seg.butler);
    auto retryable = r.retryable && is_retryable_class(cls);
    fail_attempt(id, i, cls, r.error_message, retryable, raw, now, out);
  }
  if (!freed.empty())
    wake_one(freed, now, out);
}

void request_tracker::on_retry(const std::string& request_id,
                               const std::string& segment_id,
                               clock::time_point now, tracker_actions& out) {
  auto it = requests_.find(request_id);
  if (it == requests_.end())
    return;
  auto k = it->second.fo.find(segment_id);
  if (k < 0)
    return;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  if (seg.state != "backoff")
    return;
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  now.time_since_epoch())
                  .count();
  if (seg.waiting && now_ns < seg.wait_until_ns)
    return; // an earlier wait's timer; this wait has its own
  seg.state = "pending";
  set_waiting(seg, false, out);
  advance(request_id, now, out);
}

void request_tracker::expire_due(clock::time_point now, tracker_actions& out) {
  std::vector<std::pair<std::string, std::string>> due;
  for (auto& [id, rq] : requests_) {
    if (rq.finishing)
      continue;
    if (rq.deadline != clock::time_point{} && now >= rq.deadline) {
      rq.deadline = clock::time_point{};
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
  // Expiring may finish a request: by id, after the scan.
  for (auto& [id, attempt] : due) {
    auto it = requests_.find(id);
    if (it == requests_.end())
      continue;
    if (attempt.empty())
      expire_budget(it->second, out);
    else
      expire_attempt(id, attempt, now, out);
  }
}

void request_tracker::on_host_change(const std::string& name, bool available,
                                     clock::time_point now) {
  auto& cb = circuit(name);
  if (available) {
    if (cb.held())
      spdlog::info("butler {}: a live host is back, releasing its circuit",
                   name);
    cb.release();
  } else {
    spdlog::warn("butler {}: no live host left, holding its circuit open",
                 name);
    cb.hold_open(now);
  }
  observe_circuit(name);
}

// -- internals ----------------------------------------------------------------

const policy_config& request_tracker::policy_for(
  const std::string& tier) const {
  static const policy_config defaults = [] {
    policy_config p;
    p.tier = "default";
    return p;
  }();
  for (auto& p : policies_)
    if (p.tier == tier)
      return p;
  for (auto& p : policies_)
    if (p.tier == "default")
      return p;
  return defaults;
}

circuit_breaker& request_tracker::circuit(const std::string& butler) {
  auto i = circuits_.find(butler);
  if (i == circuits_.end())
    i = circuits_
          .emplace(butler,
                   circuit_breaker{cfg_.circuit_failure_threshold,
                                   std::chrono::seconds{cfg_.circuit_open_s}})
          .first;
  return i->second;
}

/// Logs and counts a circuit's transition, if it made one.
void request_tracker::observe_circuit(const std::string& butler) {
  auto& cb = circuit(butler);
  circuit_breaker::state from, to;
  if (!cb.take_transition(from, to))
    return;
  spdlog::warn("circuit {}: {} -> {}", butler, to_string(from), to_string(to));
  metrics_
    .get_counter("butlers_switchboard_circuit_transitions_total",
                 "Circuit breaker transitions by target and new state",
                 "butler=\"" + butler + "\",to=\"" + to_string(to) + "\"")
    .inc();
  metrics_
    .get_gauge("butlers_switchboard_circuit_open",
               "1 while the target's circuit is open or half-open",
               "butler=\"" + butler + "\"")
    .set(to == circuit_breaker::state::closed ? 0 : 1);
}

void request_tracker::persist(const std::string& request_id,
                              const fanout_segment& seg, const std::string& raw,
                              bool log, tracker_actions& out) const {
  auto state = seg.state == "backoff" ? std::string{"pending"} : seg.state;
  out.writes.push_back(
    named_statement{"fanout_segment_update",
                    {request_id, seg.segment_id, state,
                     std::to_string(seg.attempts),
                     std::to_string(seg.round_attempts), seg.work_id,
                     seg.error_class, seg.error_message, raw, log ? "log" : "",
                     seg.butler, ""}});
}

/// Ends segment `i` of request `id` (its state is set) and persists what
/// that rules out.
void request_tracker::settle(const std::string& id, size_t i,
                             const std::string& raw, tracker_actions& out) {
  auto& rq = requests_.at(id);
  persist(id, rq.fo.segments[i], raw, true, out);
  for (auto j : rq.fo.settle(i))
    persist(id, rq.fo.segments[j], {}, false, out);
}

/// Sets or clears a segment's `waiting` flag, keeping the count the hot
/// path is gated on.
void request_tracker::set_waiting(fanout_segment& seg, bool on,
                                  tracker_actions& out) {
  if (seg.waiting == on)
    return;
  seg.waiting = on;
  if (on)
    ++waiting_count_;
  else
    --waiting_count_;
  segments_waiting_.set(static_cast<int64_t>(waiting_count_));
  if (!on)
    out.room_freed = true;
}

/// The live segment an entry of butler `butler`'s waiting line stands for,
/// or nullptr when it is stale.
fanout_segment* request_tracker::live_wait(const waiting_entry& e,
                                           const std::string& butler) {
  auto it = requests_.find(e.request_id);
  if (it == requests_.end())
    return nullptr;
  auto k = it->second.fo.find(e.segment_id);
  if (k < 0)
    return nullptr;
  auto& seg = it->second.fo.segments[static_cast<size_t>(k)];
  bool live = seg.waiting && seg.waits == e.wait && seg.butler == butler;
  return live ? &seg : nullptr;
}

/// Butler `butler` reported an outcome, so it has a free slot: the oldest
/// segment waiting for it goes out again.
void request_tracker::wake_one(const std::string& butler, clock::time_point now,
                               tracker_actions& out) {
  auto q = waiting_.find(butler);
  if (q == waiting_.end())
    return;
  while (!q->second.empty()) {
    auto e = std::move(q->second.front());
    q->second.pop_front();
    if (auto* seg = live_wait(e, butler)) {
      seg->state = "pending";
      set_waiting(*seg, false, out);
      if (q->second.empty())
        waiting_.erase(q);
      advance(e.request_id, now, out);
      return;
    }
  }
  waiting_.erase(q);
}

/// A failed attempt: retried after a full-jitter backoff while the class is
/// retryable and attempts and budget remain; else the segment ends `error`
/// (dead-lettered when it ran out of retries).
void request_tracker::fail_attempt(const std::string& id, size_t i,
                                   std::string cls, std::string message,
                                   bool retryable, const std::string& raw,
                                   clock::time_point now,
                                   tracker_actions& out) {
  auto& rq = requests_.at(id);
  auto& seg = rq.fo.segments[i];
  seg.error_class = cls;
  seg.error_message = message;
  if (retryable && seg.round_attempts < rq.retry_max_attempts
      && rq.invocations < rq.max_invocations) {
    seg.state = "backoff";
    retries_.inc();
    auto delay = backoff_delay(seg.round_attempts,
                               std::chrono::milliseconds{cfg_.retry_base_ms},
                               std::chrono::milliseconds{cfg_.retry_cap_ms},
                               rng_);
    persist(id, seg, raw, true, out);
    out.retries.push_back(retry_timer{id, seg.segment_id, delay});
    return;
  }
  seg.state = "error";
  if (retryable) {
    // Out of retries (or budget): the dead-letter surface, for replay.
    dead_letters_.inc();
    out.writes.push_back(
      named_statement{"dead_letter_insert",
                      {id, seg.segment_id, seg.butler, cls, message,
                       std::to_string(seg.attempts)}});
  }
  settle(id, i, raw, out);
  advance(id, now, out);
}

void request_tracker::dispatch(const std::string& id, size_t i,
                               clock::time_point now, tracker_actions& out) {
  auto& rq = requests_.at(id);
  auto& seg = rq.fo.segments[i];
  if (rq.invocations >= rq.max_invocations) {
    budget_exhausted_.inc();
    seg.state = "error";
    seg.error_class = "routing_error";
    seg.error_message = "invocation budget of "
                        + std::to_string(rq.max_invocations)
                        + " dispatches exhausted";
    settle(id, i, {}, out);
    return;
  }
  auto allowed = circuit(seg.butler).allow(now);
  observe_circuit(seg.butler);
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
    fail_attempt(id, i, "target_unavailable",
                 "circuit open for butler '" + seg.butler + "'", true, {}, now,
                 out);
    return;
  }
  // The plan store wrote the first dispatch of a new fanout already.
  if (!seg.first_dispatch_stored || seg.attempts != 1)
    persist(id, seg, {}, false, out);
  seg.first_dispatch_stored = false;
  dispatch_order d;
  d.request_id = id;
  d.segment_id = seg.segment_id;
  d.butler = seg.butler;
  d.envelope = envelope_for(rq.record.context);
  d.envelope.subrequest_id = make_uuid_v7().to_string();
  d.envelope.segment_id = attempt_segment_id(seg.segment_id, seg.attempts);
  d.envelope.fanout_mode = rq.fo.mode;
  d.envelope.butler = seg.butler;
  d.envelope.tool = "route.execute";
  d.envelope.prompt = seg.prompt;
  d.envelope.attachments = rq.record.attachments;
  out.dispatches.push_back(std::move(d));
}

void request_tracker::advance(const std::string& id, clock::time_point now,
                              tracker_actions& out) {
  for (;;) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.finishing)
      return;
    auto ready = it->second.fo.ready();
    if (ready.empty())
      break;
    dispatch(id, ready.front(), now, out);
  }
  auto it = requests_.find(id);
  if (it != requests_.end() && it->second.fo.done())
    finish(id, out);
}

void request_tracker::finish(const std::string& id, tracker_actions& out) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.finishing)
    return;
  auto& rq = it->second;
  rq.finishing = true;
  auto v = rq.fo.verdict();
  std::string outcomes = "[";
  std::string ok_list, failed_list;
  uint32_t attempts = 0;
  for (size_t i = 0; i < rq.fo.segments.size(); ++i) {
    auto& s = rq.fo.segments[i];
    attempts += s.attempts;
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
  finished_request f;
  f.done = completion{rq.ref,          rq.token, v.state, v.error_class,
                      v.error_message, outcomes, summary};
  f.context = rq.record.context;
  if (v.state == "errored")
    f.notify = make_notify_json(envelope_for(f.context), "switchboard",
                                error_reply(rq, v),
                                "error:" + f.context.request_id + ":"
                                  + std::to_string(attempts));
  out.finished.push_back(std::move(f));
}

/// The wall-clock budget (§15.7) passed: an explicit terminal error.
void request_tracker::expire_budget(tracked_request& rq, tracker_actions& out) {
  budget_exhausted_.inc();
  for (auto& s : rq.fo.segments) {
    if (s.terminal())
      continue;
    if (s.state == "dispatched" && !s.work_id.empty())
      out.cancels.push_back(work_cancel{s.butler, s.work_id});
    set_waiting(s, false, out);
    s.state = "error";
    s.error_class = "timeout";
    s.error_message = "wall-clock budget of " + std::to_string(rq.wall_clock_s)
                      + " s exhausted";
    persist(rq.ref.request_id, s, {}, true, out);
  }
  finish(rq.ref.request_id, out);
}

/// An attempt's route timeout passed.
void request_tracker::expire_attempt(const std::string& id,
                                     const std::string& attempt_id,
                                     clock::time_point now,
                                     tracker_actions& out) {
  auto& rq = requests_.at(id);
  auto [base, attempt] = split_attempt(attempt_id);
  auto k = rq.fo.find(base);
  if (k < 0)
    return;
  auto i = static_cast<size_t>(k);
  auto& seg = rq.fo.segments[i];
  if (seg.state != "dispatched" || seg.attempts != attempt)
    return;
  route_timeouts_.inc();
  if (!seg.work_id.empty())
    out.cancels.push_back(work_cancel{seg.butler, seg.work_id});
  circuit(seg.butler).on_failure(now);
  observe_circuit(seg.butler);
  fail_attempt(id, i, "timeout",
               "no route_response from '" + seg.butler + "' within "
                 + std::to_string(cfg_.route_timeout_s) + " s",
               true, {}, now, out);
}

void request_tracker::count_in_progress() {
  in_progress_.set(static_cast<int64_t>(requests_.size()));
}

// -- free functions -----------------------------------------------------------

std::string error_reply(const tracked_request& rq, const fanout::verdict_t& v) {
  // A budget refused or stopped it: say which (runtime/budget.hpp).
  if (v.error_class == "validation_error" && is_budget_message(v.error_message))
    return budget_reply(v.error_message) + " Reference: request "
           + rq.record.context.request_id + ".";
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
  std::vector<std::string> ok;
  for (auto& s : rq.fo.segments)
    if (s.state == "ok")
      ok.push_back(s.butler);
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

route_envelope envelope_for(const request_context& ctx) {
  route_envelope env;
  env.request_id = ctx.request_id;
  env.received_at = rfc3339_utc(ctx.received_at_us);
  env.source_channel = ctx.source_channel;
  env.source_endpoint_identity = ctx.source_endpoint_identity;
  env.source_sender_identity = ctx.source_sender_identity;
  env.source_thread_identity = ctx.source_thread_identity;
  env.trace_parent = ctx.trace_parent;
  env.trace_state = ctx.trace_state;
  return env;
}

} // namespace butlers
