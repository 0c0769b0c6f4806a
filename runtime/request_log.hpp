#pragma once

// The fields of spec 001 §12.4 for log lines that concern a request, so that
// logs, traces and persisted lifecycle rows join on `request_id` (and the
// trace on `trace_id`).

#include <string>
#include <string_view>

#include "runtime/log.hpp"
#include "runtime/request_context.hpp"

namespace butlers {

struct completion;
struct route_envelope;
struct session_outcome;

/// The trace id (32 lowercase hex digits) of a request's switchboard
/// trace: the one of `traceparent` when that is a valid W3C traceparent,
/// else the one derived from `request_id` (runtime/tracing.hpp).
std::string request_trace_id_hex(std::string_view request_id,
                                 std::string_view traceparent);

/// `request_id`, `source` (the channel) and `trace_id` of a request.
log_fields request_log_fields(const request_context& ctx);

/// `request_id`, `source`, `destination_butler` and `trace_id` of a
/// subrequest as a butler received it (route.v1). Its `trace_id` is the
/// request's: the switchboard's trace, which the butler's own trace links
/// to.
log_fields route_log_fields(const route_envelope& env);

/// Logs a request's terminal transition (`request <id>: <state>`, info
/// when parsed, else warn) with `lifecycle_state`, `error_class` and
/// `total_ms` (received → terminal) beside the request's fields.
void log_request_finished(const request_context& ctx, const completion& done);

/// Logs how a butler's work item ended (`butler <name>: work <id> <state>`,
/// info when ok, else warn) with `lifecycle_state` (the work item's state),
/// `error_class`, `queue_wait_ms` (accepted → a slot took it) and
/// `session_ms` beside the subrequest's fields.
void log_work_finished(const route_envelope& env, const session_outcome& out,
                       int64_t queue_wait_ms, int64_t session_ms);

/// Milliseconds from `since_us` (Unix microseconds) to now; -1 when
/// `since_us` is 0 (unknown).
int64_t ms_since_unix_us(int64_t since_us);

} // namespace butlers
