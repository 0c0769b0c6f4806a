#include "runtime/request_log.hpp"

#include <chrono>

#include "runtime/messages.hpp"
#include "runtime/route.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

std::string request_trace_id_hex(std::string_view request_id,
                                 std::string_view traceparent) {
  if (auto tp = parse_traceparent(traceparent))
    return to_hex(tp->trace);
  return to_hex(derive_trace_id(request_id));
}

log_fields request_log_fields(const request_context& ctx) {
  log_fields f;
  f.add("request_id", ctx.request_id)
    .add("source", ctx.source_channel)
    .add("trace_id", request_trace_id_hex(ctx.request_id, ctx.trace_parent));
  return f;
}

log_fields route_log_fields(const route_envelope& env) {
  log_fields f;
  f.add("request_id", env.request_id)
    .add("source", env.source_channel)
    .add("destination_butler", env.butler)
    .add("trace_id", request_trace_id_hex(env.request_id, env.trace_parent));
  return f;
}

void log_request_finished(const request_context& ctx, const completion& done) {
  auto f = request_log_fields(ctx);
  f.add("lifecycle_state", done.state)
    .add("error_class", done.error_class)
    .add_ms("total_ms", ms_since_unix_us(ctx.received_at_us));
  auto level = done.state == "parsed" ? spdlog::level::info
                                      : spdlog::level::warn;
  log_with(level, f, "request {}: {}", ctx.request_id, done.state);
}

void log_work_finished(const route_envelope& env, const session_outcome& out,
                       int64_t queue_wait_ms, int64_t session_ms) {
  auto f = route_log_fields(env);
  f.add("work_id", out.work_id)
    .add("lifecycle_state", out.state)
    .add("error_class", out.response.status == "error"
                          ? std::string_view{out.response.error_class}
                          : std::string_view{})
    .add_ms("queue_wait_ms", queue_wait_ms)
    .add_ms("session_ms", session_ms);
  auto level = out.state == "ok" ? spdlog::level::info : spdlog::level::warn;
  log_with(level, f, "butler {}: work {} {}", env.butler, out.work_id,
           out.state);
}

int64_t ms_since_unix_us(int64_t since_us) {
  if (since_us == 0)
    return -1;
  using namespace std::chrono;
  auto now_us = duration_cast<microseconds>(
                  system_clock::now().time_since_epoch())
                  .count();
  return now_us > since_us ? (now_us - since_us) / 1000 : 0;
}

} // namespace butlers
