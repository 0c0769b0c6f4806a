#pragma once

// The butler side of tracing (spec 001 §12.3, spec 000 §4.4): a work item a
// butler ran is a trace of its own, linked to the switchboard's dispatch
// span (whose context came in route.v1 `trace_context.traceparent`) and
// carrying the request id, so the two join by link and by `request.id`
// even across cluster nodes:
//
//   butlers.butler.route.process   (root, CONSUMER, link → dispatch span)
//     butlers.butler.queue_wait    (accepted → a slot took it)
//     invoke_agent {butler}        (the session, GenAI conventions)
//       chat {model}               (one per model call the runtime reported)
//
// A thread's run (no switchboard trace) is rooted the same way, without a
// link, and carries `gen_ai.conversation.id` = the thread id.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/messages.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

/// What the butler knows about one finished run of a work item.
struct work_run_record {
  std::string node;
  std::string butler;
  std::string work_id;
  std::string request_id;
  std::string subrequest_id;
  std::string segment_id;
  /// "route", "thread", "trigger", "schedule", ...
  std::string trigger_source;
  /// The dispatch span's traceparent from route.v1 ("" = none).
  std::string traceparent;
  /// The tracestate that came with it ("" = none), kept on the link.
  std::string tracestate;
  /// A thread run's thread id ("" otherwise): `gen_ai.conversation.id`.
  std::string conversation_id;
  /// Sessions started for the item before this one (0 = first run).
  int32_t attempt = 0;
  /// The lease the run held (tells runs of one item apart).
  int64_t lease_token = 0;
  /// The runtime (`gen_ai.provider.name`) and the model configured.
  std::string provider;
  std::string request_model;
  /// Unix nanoseconds: accepted (or recovered), a slot took it, it ended.
  uint64_t accepted_ns = 0;
  uint64_t started_ns = 0;
  uint64_t ended_ns = 0;
  /// "ok", "error" or "cancelled".
  std::string state;
  std::string error_class;
  std::string error_message;
  session_usage usage;
};

/// The trace of a work item's run: its own trace id and root span id
/// (derived from work id and lease token, so a re-run after recovery is a
/// new trace), and whether it is sampled — as the dispatch span said when
/// one is linked, else by `sample_ratio`.
request_trace butler_trace_of(const work_run_record& r, double sample_ratio);

/// The spans of `r`'s run, root first; empty when not sampled.
std::vector<span> butler_spans(const work_run_record& r, double sample_ratio);

/// Where a session's model-call spans go: its run's trace and the id of
/// the run's `invoke_agent` span (computed from what the session knows, so
/// the butler and the session need not talk about it).
struct model_call_parent {
  request_trace trace;
  span_id agent{};
};

/// The parent of the model calls of the run of `work_id` under
/// `lease_token`; `traceparent` is the dispatch span's (route.v1).
model_call_parent model_call_parent_of(const std::string& work_id,
                                       int64_t lease_token,
                                       const std::string& traceparent,
                                       double sample_ratio);

/// One model call as the runtime reported it.
struct model_call_record {
  /// `gen_ai.provider.name`: "openai", "anthropic", ...
  std::string provider;
  std::string request_model;
  /// The model that answered ("" when the stream did not say).
  std::string response_model;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  /// Tokens of this call; `usage_seen` false when the stream reported none.
  bool usage_seen = false;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  /// HTTP status, 0 when none came.
  int status = 0;
  /// "" when the call succeeded.
  std::string error_class;
  std::string error_message;
  /// `server.address` (the API's host) and `server.port`, when known.
  std::string server_address;
  int server_port = 0;
};

/// The `chat {model}` span of a call (GenAI client spans: kind CLIENT,
/// `gen_ai.operation.name` = chat), child of `p.agent`.
span model_call_span(const model_call_parent& p, const model_call_record& c);

} // namespace butlers
