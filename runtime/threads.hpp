#pragma once

// Conversation threads (spec 003): the messages the thread actors exchange
// and the pure logic around them: reading a turn body, the thread id rule,
// and the JSON of the thread and summary events. No actors here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace butlers {

/// One user turn for a thread (`POST /v1/threads/{id}/turns`).
struct thread_turn {
  std::string thread_id;
  /// Client-chosen id; UNIQUE per thread, so a retry is idempotent.
  std::string message_id;
  std::string text;
  /// "steer" (default), "queue", "interrupt" or "reject".
  std::string mode = "steer";
  /// "" when the caller does not care which run is active.
  std::string expected_run_id;
  /// Target butler; "" means `general`.
  std::string butler;
  /// Who sends it (e.g. "web:<id>"); "" means "api".
  std::string sender;
  /// The model the run this turn starts uses; "" means the butler's.
  std::string model;
  /// Most steps (model calls, scripted turns) of the run this turn
  /// starts; 0 means the butler's limit.
  uint32_t max_steps = 0;
  /// Files sent with the turn, stored before it (references as JSON,
  /// runtime/attachments.hpp; "" for none).
  std::string attachments;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, thread_turn& x) {
  return f(caf::meta::type_name("thread_turn"), x.thread_id, x.message_id,
           x.text, x.mode, x.expected_run_id, x.butler, x.sender, x.model,
           x.max_steps, x.attachments);
}

/// What a turn asks of the run it starts (the sender its route.v1
/// envelope names, and route.v1 run_options); stored with the run.
struct run_options {
  std::string sender;
  std::string model;
  uint32_t max_steps = 0;
};

inline run_options options_of(const thread_turn& t) {
  return {t.sender, t.model, t.max_steps};
}

/// Largest `options.max_steps` a turn takes.
constexpr uint32_t max_turn_steps = 1000;

/// A model name a turn (or a route.v1 run_options) may carry: 1..128 of
/// [A-Za-z0-9._:/@+-].
bool valid_model_name(std::string_view x);

/// The answer to a turn: the run it went to and how, or why it was refused.
struct turn_result {
  std::string run_id;
  /// "start", "steer", "queued" or "collect".
  std::string kind;
  /// HTTP status: 200 on success, else 400, 404, 409, 429 or 503.
  uint32_t status = 200;
  /// Error code when refused: "run_changed", "run_active",
  /// "overload_rejected", "not_found", "database_unavailable", ...
  std::string error;
  std::string message;
  /// The thread's active run for the butler when refused with 409.
  std::string active_run_id;
  /// The transcript cursor of the stored user message (0 when refused).
  int64_t cursor = 0;
  /// True when the message_id was already stored: the original answer.
  bool duplicate = false;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, turn_result& x) {
  return f(caf::meta::type_name("turn_result"), x.run_id, x.kind, x.status,
           x.error, x.message, x.active_run_id, x.cursor, x.duplicate);
}

/// User input for a running run, applied at its next safe boundary.
struct steer_input {
  std::string message_id;
  std::string text;
  /// When the thread actor accepted it (durable), Unix µs.
  int64_t accepted_us = 0;
  /// When the session received it, Unix µs (set by the session).
  int64_t arrived_us = 0;
  /// The turn during (or before) which it arrived (set by the session).
  uint32_t arrived_turn = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, steer_input& x) {
  return f(caf::meta::type_name("steer_input"), x.message_id, x.text,
           x.accepted_us, x.arrived_us, x.arrived_turn);
}

/// A session applied steer inputs at a boundary: before runtime turn `turn`
/// (1-based).
struct steer_applied {
  std::string work_id;
  uint32_t turn = 0;
  /// When the boundary was reached, Unix µs.
  int64_t applied_us = 0;
  std::vector<steer_input> inputs;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, steer_applied& x) {
  return f(caf::meta::type_name("steer_applied"), x.work_id, x.turn,
           x.applied_us, x.inputs);
}

/// Thread ids: 1..128 of [A-Za-z0-9._:-].
bool valid_thread_id(std::string_view x);

/// Reads a turn body `{message_id, text, mode?, expected_run_id?, butler?,
/// sender?, model?, options?: {max_steps?, mode?}}` into `out` (thread_id
/// is left alone). Returns "" when valid, else a message naming the field;
/// an unknown field is refused.
std::string parse_turn_body(std::string_view body, thread_turn& out);

/// One server-sent event frame: `event: <type>`, `data: <json>`, and an
/// `id:` line when `id` is not empty.
std::string sse_frame(std::string_view type, std::string_view json,
                      std::string_view id = {});

/// Unix µs now (system clock).
int64_t unix_now_us();

/// Unix ms now (system clock).
inline int64_t unix_now_ms() {
  return unix_now_us() / 1000;
}

} // namespace butlers
