#include "actors/butler_tracing.hpp"

#include <chrono>

#include "runtime/butler_trace.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

namespace {

/// The wall-clock time (Unix ns) of steady time point `t`, `now_ns` being
/// the wall clock at `steady_now`.
uint64_t unix_ns_of(std::chrono::steady_clock::time_point t,
                    std::chrono::steady_clock::time_point steady_now,
                    uint64_t now_ns) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  auto ago = duration_cast<nanoseconds>(steady_now - t).count();
  if (ago <= 0)
    return now_ns;
  auto back = static_cast<uint64_t>(ago);
  return back < now_ns ? now_ns - back : now_ns;
}

} // namespace

void trace_work_run(butler_ptr self, const running_session& ended,
                    const session_outcome& out) {
  auto& st = self->state;
  auto& tr = *st.ctx->traces;
  if (!tr.enabled())
    return;
  const auto& held = ended.held;
  const auto& cfg = st.params.cfg;
  work_run_record r;
  r.node = st.params.node;
  r.butler = cfg.name;
  r.work_id = held.item.work_id;
  r.request_id = held.env.request_id;
  r.subrequest_id = held.env.subrequest_id;
  r.segment_id = held.env.segment_id;
  r.trigger_source = held.item.trigger_source;
  r.traceparent = held.env.trace_parent;
  r.tracestate = held.env.trace_state;
  if (held.item.trigger_source == "thread")
    r.conversation_id = held.env.source_thread_identity;
  r.attempt = held.item.attempts;
  r.lease_token = held.item.lease_token;
  r.provider = to_string(cfg.runtime.kind);
  r.request_model = cfg.runtime.model;
  auto now_ns = unix_nanos_now();
  auto steady_now = std::chrono::steady_clock::now();
  r.accepted_ns = unix_ns_of(held.since, steady_now, now_ns);
  r.started_ns = unix_ns_of(ended.started, steady_now, now_ns);
  r.ended_ns = now_ns;
  r.state = out.state;
  if (out.response.status == "error") {
    r.error_class = out.response.error_class;
    r.error_message = out.response.error_message;
  }
  r.usage = out.usage;
  for (auto& s : butler_spans(r, tr.sample_ratio()))
    tr.record(std::move(s));
}

} // namespace butlers
