#include "runtime/switchboard_trace.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <utility>

#include "runtime/fanout.hpp"

namespace butlers {

namespace {

std::string span_name(std::string_view suffix) {
  std::string out{switchboard_span_prefix};
  out += suffix;
  return out;
}

uint64_t us_to_ns(int64_t us) {
  return us > 0 ? static_cast<uint64_t>(us) * 1000 : unix_nanos_now();
}

/// RFC 3339 UTC with microseconds of a Unix time in microseconds.
std::string rfc3339_us(int64_t us) {
  auto secs = static_cast<time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ",
                static_cast<long long>(us % 1000000));
  return buf;
}

} // namespace

switchboard_tracing::switchboard_tracing(tracer_ptr t, router_kind router,
                                         cli_family family,
                                         std::string fanout_mode,
                                         size_t max_entries)
  : tracer_(std::move(t)), fanout_mode_(std::move(fanout_mode)),
    max_entries_(max_entries) {
  on_ = tracer_ != nullptr && tracer_->enabled();
  if (router == router_kind::cli) {
    decision_name_ = span_name("routing.llm_decision");
    model_family_ = to_string(family);
    // The router's prompt is built into the binary (runtime/cli_router).
    prompt_version_ = "cli_router.v1";
  } else {
    decision_name_ = span_name("routing.rules_decision");
    model_family_ = "rules";
    prompt_version_ = "none";
  }
}

switchboard_tracing::entry* switchboard_tracing::find(
  const std::string& request_id) {
  auto i = entries_.find(request_id);
  return i == entries_.end() ? nullptr : &i->second;
}

switchboard_tracing::entry* switchboard_tracing::find_or_add(
  const std::string& request_id) {
  if (auto e = find(request_id))
    return e;
  if (entries_.size() >= max_entries_)
    return nullptr;
  return &entries_[request_id];
}

void switchboard_tracing::emit(span&& s) {
  tracer_->record(std::move(s));
}

span switchboard_tracing::child(const entry& e, std::string_view name,
                                uint64_t start_ns) const {
  return span::child_of(e.trace, e.trace.root.span, random_span_id(),
                        span_name(name), start_ns);
}

void switchboard_tracing::stored(const inbox_record* rec,
                                 const std::string& dedupe_key,
                                 uint64_t handed_ns, size_t batch_size,
                                 bool duplicate) {
  if (!on_ || duplicate || rec == nullptr)
    return; // a duplicate is the original request's, traced there
  auto& ctx = rec->context;
  auto tr = tracer_->trace_for(ctx.request_id, ctx.trace_parent,
                               ctx.trace_state);
  if (!tr.sampled())
    return;
  auto now = unix_nanos_now();
  auto root = tr.root.span;
  auto normalize = span::child_of(tr, root, random_span_id(),
                                  span_name("ingress.normalize"),
                                  us_to_ns(ctx.received_at_us));
  normalize.set("request.id", ctx.request_id)
    .set("request.source_channel", ctx.source_channel)
    .set("request.schema_version", rec->schema_version)
    .end(std::max(handed_ns, normalize.start_ns));
  emit(std::move(normalize));
  auto dedupe = span::child_of(tr, root, random_span_id(),
                               span_name("ingress.dedupe"), handed_ns);
  dedupe.set("request.id", ctx.request_id)
    .set("dedupe.key_kind", dedupe_key.substr(0, dedupe_key.find(':')))
    .set("dedupe.duplicate", false)
    .end(now);
  emit(std::move(dedupe));
  auto write = span::child_of(tr, root, random_span_id(),
                              span_name("persistence.write"), handed_ns);
  write.set("request.id", ctx.request_id)
    .set("db.statement", "inbox_append")
    .set("db.batch_size", static_cast<int64_t>(batch_size))
    .end(now);
  emit(std::move(write));
}

void switchboard_tracing::started(const std::string& request_id) {
  if (!on_)
    return;
  if (auto e = find_or_add(request_id))
    e->routing_ns = unix_nanos_now();
}

void switchboard_tracing::planned(const inbox_record& rec,
                                  const routing_plan& plan,
                                  const std::string& statement) {
  if (!on_)
    return;
  auto e = find_or_add(rec.context.request_id);
  if (e == nullptr)
    return;
  e->trace = tracer_->trace_for(rec.context.request_id,
                                rec.context.trace_parent,
                                rec.context.trace_state);
  e->known = true;
  e->context = rec.context;
  e->policy_tier = rec.policy_tier;
  // Records the inbox hands back (claim, cold path) do not carry it; the
  // ingest boundary accepts ingest.v1 only.
  e->schema_version = rec.schema_version.empty() ? "ingest.v1"
                                                 : rec.schema_version;
  e->planned_ns = unix_nanos_now();
  e->plan_statement = statement;
  e->segments = plan.segments.size();
  e->fallback = plan.fallback;
  if (!e->trace.sampled())
    return;
  auto s = child(*e,
                 std::string_view{decision_name_}.substr(
                   switchboard_span_prefix.size()),
                 e->routing_ns != 0 ? e->routing_ns : e->planned_ns);
  s.set("request.id", rec.context.request_id)
    .set("routing.router", plan.router)
    .set("routing.segment_count", static_cast<int64_t>(plan.segments.size()))
    .set("routing.confidence", plan.confidence)
    .set("routing.fallback", plan.fallback);
  if (plan.fallback)
    s.set("routing.fallback_reason", plan.fallback_reason);
  emit(std::move(s.end(e->planned_ns)));
}

void switchboard_tracing::fanned_out(const std::string& request_id,
                                     bool reacts) {
  if (!on_)
    return;
  auto e = find(request_id);
  if (e == nullptr || !e->known)
    return;
  e->fanout_ns = unix_nanos_now();
  if (!e->trace.sampled())
    return;
  auto start = e->planned_ns != 0 ? e->planned_ns : e->fanout_ns;
  auto plan = child(*e, "routing.plan_fanout", start);
  plan.set("request.id", request_id)
    .set("routing.fanout_mode", fanout_mode_)
    .set("routing.segment_count", static_cast<int64_t>(e->segments))
    .end(e->fanout_ns);
  emit(std::move(plan));
  auto write = child(*e, "persistence.write", start);
  write.set("request.id", request_id)
    .set("db.statement", e->plan_statement)
    .end(e->fanout_ns);
  emit(std::move(write));
  auto signal = child(*e, "lifecycle.signal", e->fanout_ns);
  signal.set("request.id", request_id)
    .set("lifecycle.state", "progress")
    .set("lifecycle.reaction", reacts)
    .end(e->fanout_ns);
  emit(std::move(signal));
}

void switchboard_tracing::dispatching(dispatch_order& d) {
  if (!on_)
    return;
  auto e = find(d.request_id);
  if (e == nullptr || !e->known)
    return;
  auto& attempt_id = d.envelope.segment_id;
  auto s = child(*e, "route.dispatch", 0);
  s.kind = span_kind::producer;
  // The butler continues the trace from here (sampled or not).
  d.envelope.trace_parent = to_traceparent(s.context());
  d.envelope.trace_state = s.tracestate;
  if (!e->trace.sampled())
    return;
  s.set("request.id", d.request_id)
    .set("routing.destination_butler", d.butler)
    .set("routing.segment_id", d.segment_id)
    .set("routing.fanout_mode", d.envelope.fanout_mode)
    .set("routing.attempt",
         static_cast<int64_t>(split_attempt(attempt_id).second))
    .set("routing.subrequest_id", d.envelope.subrequest_id);
  auto old = e->dispatches.find(attempt_id);
  if (old != e->dispatches.end()) // re-sent (the butler was full)
    end_dispatch(*e, attempt_id, nullptr, "resent");
  e->dispatches.emplace(attempt_id, std::move(s));
}

void switchboard_tracing::end_dispatch(entry& e, const std::string& attempt_id,
                                       const route_response* r,
                                       std::string_view outcome) {
  auto i = e.dispatches.find(attempt_id);
  if (i == e.dispatches.end())
    return;
  auto& s = i->second;
  s.set("routing.outcome", std::string{outcome});
  if (r != nullptr && r->status == "error")
    s.fail(r->error_class, r->error_message);
  else if (r == nullptr && outcome != "ok")
    s.fail(outcome == "resent" ? "" : "abandoned");
  emit(std::move(s.end()));
  e.dispatches.erase(i);
}

void switchboard_tracing::door_answer(const std::string& request_id,
                                      const std::string& attempt_id,
                                      const route_response& r) {
  if (!on_ || r.status == "accepted")
    return;
  if (auto e = find(request_id))
    end_dispatch(*e, attempt_id, &r,
                 r.error_class == "overload_rejected" ? "refused_full"
                                                      : "rejected");
}

void switchboard_tracing::outcome(const route_response& r) {
  if (!on_)
    return;
  if (auto e = find(r.request_id))
    end_dispatch(*e, r.segment_id, &r, r.status == "ok" ? "ok" : "error");
}

void switchboard_tracing::finished(const finished_request& f, bool owes) {
  if (!on_)
    return;
  auto e = find(f.context.request_id);
  if (e == nullptr || !e->known)
    return;
  e->finished_ns = unix_nanos_now();
  e->state = f.done.state;
  e->error_class = f.done.error_class;
  if (!e->trace.sampled())
    return;
  auto s = child(*e, "route.aggregate",
                 e->fanout_ns != 0 ? e->fanout_ns : e->finished_ns);
  s.set("request.id", f.context.request_id)
    .set("routing.segment_count", static_cast<int64_t>(e->segments))
    .set("lifecycle.state", f.done.state)
    .set("lifecycle.owes_sender", owes);
  if (f.done.state == "errored")
    s.fail(f.done.error_class, f.done.error_message);
  emit(std::move(s.end(e->finished_ns)));
}

void switchboard_tracing::handed_over(const std::string& request_id,
                                      bool owed) {
  if (!on_)
    return;
  auto e = find(request_id);
  if (e == nullptr || !e->known || e->finished_ns == 0)
    return;
  e->handed_ns = unix_nanos_now();
  if (!e->trace.sampled())
    return;
  auto s = child(*e, "lifecycle.signal", e->finished_ns);
  s.set("request.id", request_id)
    .set("lifecycle.state", e->state)
    .set("lifecycle.handed_over", owed);
  if (!owed)
    s.fail("target_unavailable", "messenger did not take it");
  emit(std::move(s.end(e->handed_ns)));
}

void switchboard_tracing::completed(const std::string& request_id, bool applied,
                                    std::string_view error) {
  if (!on_)
    return;
  auto i = entries_.find(request_id);
  if (i == entries_.end())
    return;
  auto& e = i->second;
  if (e.known && e.trace.sampled()) {
    auto now = unix_nanos_now();
    auto s = child(e, "persistence.write",
                   e.handed_ns != 0 ? e.handed_ns : now);
    s.set("request.id", request_id)
      .set("db.statement", "inbox_complete")
      .set("db.applied", applied);
    if (!error.empty())
      s.fail("internal_error", std::string{error});
    emit(std::move(s.end(now)));
    end_root(e, now);
  }
  entries_.erase(i);
}

void switchboard_tracing::end_root(entry& e, uint64_t end_ns) {
  for (auto& [attempt, s] : e.dispatches) {
    s.set("routing.outcome", "no_answer").fail("timeout");
    emit(std::move(s.end(end_ns)));
  }
  e.dispatches.clear();
  auto& c = e.context;
  auto root = span::root_of(e.trace, span_name("message"),
                            us_to_ns(c.received_at_us));
  root.set("request.id", c.request_id)
    .set("request.received_at", rfc3339_us(c.received_at_us))
    .set("request.source_channel", c.source_channel)
    .set("request.source_endpoint_identity", c.source_endpoint_identity)
    .set("request.source_thread_identity", c.source_thread_identity)
    .set("request.schema_version", e.schema_version)
    .set("switchboard.policy_tier", e.policy_tier)
    .set("switchboard.prompt_version", prompt_version_)
    .set("switchboard.model_family", model_family_)
    .set("routing.fanout_mode", fanout_mode_)
    .set("routing.segment_count", static_cast<int64_t>(e.segments))
    .set("lifecycle.state", e.state);
  if (e.state == "errored")
    root.fail(e.error_class);
  emit(std::move(root.end(end_ns)));
}

void switchboard_tracing::expire(uint64_t now_ns, uint64_t stale_ns) {
  if (!on_)
    return;
  for (auto i = entries_.begin(); i != entries_.end();) {
    auto& e = i->second;
    auto last = std::max(e.routing_ns, e.planned_ns);
    if (e.fanout_ns == 0 && last + stale_ns < now_ns)
      i = entries_.erase(i);
    else
      ++i;
  }
}

void switchboard_tracing::forget(const std::string& request_id) {
  if (!on_)
    return;
  auto i = entries_.find(request_id);
  if (i == entries_.end())
    return;
  if (i->second.known && i->second.trace.sampled())
    for (auto& [attempt, s] : i->second.dispatches) {
      s.set("routing.outcome", "abandoned").fail("abandoned");
      emit(std::move(s.end()));
    }
  entries_.erase(i);
}

} // namespace butlers
