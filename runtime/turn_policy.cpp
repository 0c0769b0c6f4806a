#include "runtime/turn_policy.hpp"

namespace butlers {

namespace {

turn_decision refuse(turn_refusal why, std::string_view active,
                     size_t count = 0) {
  return turn_decision{turn_action::refuse, why, std::string{active}, count};
}

turn_decision act(turn_action what, std::string_view active = {}) {
  return turn_decision{what, turn_refusal::none, std::string{active}, 0};
}

} // namespace

turn_mode turn_mode_of(std::string_view name) {
  if (name == "queue")
    return turn_mode::queue;
  if (name == "interrupt")
    return turn_mode::interrupt;
  if (name == "reject")
    return turn_mode::reject;
  return turn_mode::steer;
}

std::string_view stored_kind(turn_action x) {
  switch (x) {
    case turn_action::steer: return "steer";
    case turn_action::queue: return "queued";
    case turn_action::collect: return "collect";
    default: return "start";
  }
}

uint32_t status_of(turn_refusal x) {
  switch (x) {
    case turn_refusal::run_changed:
    case turn_refusal::run_active: return 409;
    case turn_refusal::turns_full:
    case turn_refusal::queue_full: return 429;
    default: return 200;
  }
}

std::optional<turn_decision> turn_policy::admit(size_t waiting) const {
  if (waiting >= max_pending_turns_)
    return refuse(turn_refusal::turns_full, {}, waiting);
  return std::nullopt;
}

turn_decision turn_policy::decide(const thread_turn& turn,
                                  std::string_view active_run_id, size_t queued,
                                  std::string_view collecting_run_id) const {
  auto& expected = turn.expected_run_id;
  if (active_run_id.empty() && collect_) {
    // Whatever the mode, the turn joins the butler's collecting run (a new
    // one when none is open), unless it expected another run.
    if (!expected.empty() && expected != collecting_run_id)
      return refuse(turn_refusal::run_changed, collecting_run_id);
    return act(turn_action::collect, collecting_run_id);
  }
  if (active_run_id.empty()) {
    // Whatever the mode, with no active run the turn starts one, unless it
    // expected one.
    if (!expected.empty())
      return refuse(turn_refusal::run_changed, {});
    return act(turn_action::start);
  }
  if (!expected.empty() && expected != active_run_id)
    return refuse(turn_refusal::run_changed, active_run_id);
  switch (turn_mode_of(turn.mode)) {
    case turn_mode::reject:
      return refuse(turn_refusal::run_active, active_run_id);
    case turn_mode::queue:
      if (queued >= max_queued_runs_)
        return refuse(turn_refusal::queue_full, active_run_id, queued);
      return act(turn_action::queue, active_run_id);
    case turn_mode::interrupt:
      return act(turn_action::interrupt, active_run_id);
    default: return act(turn_action::steer, active_run_id);
  }
}

turn_result refusal_result(const turn_decision& d, const thread_turn& turn,
                           std::string_view butler) {
  turn_result r;
  r.status = status_of(d.refusal);
  r.active_run_id = d.active_run_id;
  auto count = std::to_string(d.count);
  switch (d.refusal) {
    case turn_refusal::turns_full:
      r.error = "overload_rejected";
      r.message = "thread has " + count
                  + " turns waiting (threads.max_pending_turns)";
      break;
    case turn_refusal::run_changed:
      r.error = "run_changed";
      r.message = "expected run " + turn.expected_run_id;
      if (d.active_run_id.empty())
        r.message += " but the thread has no active run for butler '"
                     + std::string{butler} + "'";
      else
        r.message += " but run " + d.active_run_id + " is active";
      break;
    case turn_refusal::run_active:
      r.error = "run_active";
      r.message = "run " + d.active_run_id + " is active (mode reject)";
      break;
    case turn_refusal::queue_full:
      r.error = "overload_rejected";
      r.message = "thread has " + count
                  + " queued runs (threads.max_queued_runs)";
      break;
    default: break;
  }
  return r;
}

} // namespace butlers
