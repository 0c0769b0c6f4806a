#include "runtime/butler_trace.hpp"

#include <utility>

namespace butlers {

namespace {

/// Names the run's ids: one item's runs under different leases differ.
std::string run_key(const work_run_record& r) {
  return "butler:" + r.work_id + ":" + std::to_string(r.lease_token);
}

bool is_thread_run(const work_run_record& r) {
  return !r.conversation_id.empty();
}

span root_span(const work_run_record& r, const request_trace& t) {
  auto root = span::root_of(t,
                            is_thread_run(r) ? "butlers.thread.run"
                                             : "butlers.butler.route.process",
                            r.accepted_ns);
  root.kind = is_thread_run(r) ? span_kind::internal : span_kind::consumer;
  root.set("request.id", r.request_id)
    .set("butler.name", r.butler)
    .set("work.id", r.work_id)
    .set("attempt", static_cast<int64_t>(r.attempt) + 1)
    .set("outcome", r.state)
    .set("trigger.source", r.trigger_source);
  if (!r.subrequest_id.empty())
    root.set("subrequest.id", r.subrequest_id);
  if (!r.segment_id.empty())
    root.set("segment.id", r.segment_id);
  if (!r.node.empty())
    root.set("node.name", r.node);
  if (is_thread_run(r))
    root.set("gen_ai.conversation.id", r.conversation_id);
  if (auto dispatch = parse_traceparent(r.traceparent)) {
    span_link link;
    link.context = *dispatch;
    link.context.tracestate = r.tracestate;
    link.attributes.push_back(attribute{"request.id", r.request_id});
    root.links.push_back(std::move(link));
  }
  return root;
}

/// `invoke_agent {butler}` (OpenTelemetry GenAI agent spans: the agent runs
/// in this process, so kind INTERNAL).
span agent_span(const work_run_record& r, const request_trace& t) {
  auto s = span::child_of(t, t.root.span,
                          derive_span_id(run_key(r), "invoke_agent"),
                          "invoke_agent " + r.butler, r.started_ns);
  s.kind = span_kind::internal;
  s.set("gen_ai.operation.name", "invoke_agent")
    .set("gen_ai.agent.name", r.butler)
    .set("request.id", r.request_id);
  if (!r.provider.empty())
    s.set("gen_ai.provider.name", r.provider);
  if (!r.request_model.empty())
    s.set("gen_ai.request.model", r.request_model);
  if (!r.usage.model.empty())
    s.set("gen_ai.response.model", r.usage.model);
  if (r.usage.calls > 0 || r.usage.input_tokens > 0
      || r.usage.output_tokens > 0) {
    s.set("gen_ai.usage.input_tokens", r.usage.input_tokens)
      .set("gen_ai.usage.output_tokens", r.usage.output_tokens)
      .set("butlers.model_calls", static_cast<uint64_t>(r.usage.calls));
  }
  if (is_thread_run(r))
    s.set("gen_ai.conversation.id", r.conversation_id);
  return s;
}

} // namespace

request_trace butler_trace_of(const work_run_record& r, double sample_ratio) {
  auto key = run_key(r);
  request_trace t;
  t.root.trace = derive_trace_id(key);
  t.root.span = derive_span_id(key, "root");
  bool sampled = false;
  if (auto dispatch = parse_traceparent(r.traceparent))
    sampled = dispatch->sampled();
  else
    sampled = sampled_by_ratio(t.root.trace, sample_ratio);
  t.root.flags = sampled ? 0x01 : 0x00;
  return t;
}

model_call_parent model_call_parent_of(const std::string& work_id,
                                       int64_t lease_token,
                                       const std::string& traceparent,
                                       double sample_ratio) {
  work_run_record r;
  r.work_id = work_id;
  r.lease_token = lease_token;
  r.traceparent = traceparent;
  model_call_parent p;
  p.trace = butler_trace_of(r, sample_ratio);
  p.agent = derive_span_id(run_key(r), "invoke_agent");
  return p;
}

span model_call_span(const model_call_parent& p, const model_call_record& c) {
  auto s = span::child_of(p.trace, p.agent, random_span_id(),
                          "chat " + c.request_model, c.start_ns);
  s.kind = span_kind::client;
  s.set("gen_ai.operation.name", "chat");
  if (!c.provider.empty())
    s.set("gen_ai.provider.name", c.provider);
  if (!c.request_model.empty())
    s.set("gen_ai.request.model", c.request_model);
  if (!c.response_model.empty())
    s.set("gen_ai.response.model", c.response_model);
  if (c.usage_seen) {
    s.set("gen_ai.usage.input_tokens", c.input_tokens)
      .set("gen_ai.usage.output_tokens", c.output_tokens);
  }
  if (c.status != 0)
    s.set("http.response.status_code", static_cast<int64_t>(c.status));
  if (!c.server_address.empty())
    s.set("server.address", c.server_address);
  if (c.server_port != 0)
    s.set("server.port", static_cast<int64_t>(c.server_port));
  if (!c.error_class.empty()) {
    s.set("error.type", c.error_class);
    s.fail(c.error_class, c.error_message);
  }
  s.end(c.end_ns);
  return s;
}

std::vector<span> butler_spans(const work_run_record& r, double sample_ratio) {
  std::vector<span> out;
  auto t = butler_trace_of(r, sample_ratio);
  if (!t.sampled())
    return out;
  auto started = r.started_ns != 0 ? r.started_ns : r.accepted_ns;
  auto root = root_span(r, t);
  auto wait = span::child_of(t, t.root.span,
                             derive_span_id(run_key(r), "queue_wait"),
                             "butlers.butler.queue_wait", r.accepted_ns);
  wait.set("butler.name", r.butler).set("request.id", r.request_id);
  wait.end(started);
  auto agent = agent_span(r, t);
  agent.start_ns = started;
  agent.end(r.ended_ns);
  if (r.state != "ok") {
    root.fail(r.error_class, r.error_message);
    agent.fail(r.error_class, r.error_message);
  }
  root.end(r.ended_ns);
  out.reserve(3);
  out.push_back(std::move(root));
  out.push_back(std::move(wait));
  out.push_back(std::move(agent));
  return out;
}

} // namespace butlers
