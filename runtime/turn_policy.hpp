#pragma once

// What a conversation thread does with a user turn (spec 003 §5): against
// the active run of the turn's butler, the turn's mode and expected run,
// and the thread's limits, it starts a run, steers the active one, queues
// behind it, interrupts it, collects the turn for a run that starts when its
// collect window closes (collect mode, no run active), or refuses the turn
// with a typed reason. Pure: the thread actor carries the decision out
// (metrics, writes, replies).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/config.hpp"
#include "runtime/threads.hpp"

namespace butlers {

/// How a turn meets the active run of its butler (`thread_turn::mode`).
enum class turn_mode {
  /// Join the active run as steer input (the default).
  steer,
  /// Run once the active run ends.
  queue,
  /// Cancel the active run and start a new one.
  interrupt,
  /// Refuse the turn while a run is active.
  reject,
};

/// The mode named `name`; `steer` for any other name (turn bodies are
/// validated before they reach a thread, see `parse_turn_body`).
turn_mode turn_mode_of(std::string_view name);

/// What the thread does with a turn.
enum class turn_action {
  /// No run of the butler is active: start one.
  start,
  /// Hand the turn to the active run as steer input.
  steer,
  /// Store a new run that starts when the active one ends.
  queue,
  /// Cancel the active run, then start a new one.
  interrupt,
  /// Collect mode, no run of the butler active: store the turn for the
  /// butler's collecting run (a new one when none is open), which starts
  /// when its window closes.
  collect,
  /// Answer the refusal; nothing is stored.
  refuse,
};

/// Why a turn is refused.
enum class turn_refusal {
  none,
  /// 429: `threads.max_pending_turns` turns already wait for the thread.
  turns_full,
  /// 409: the turn expected a run that is not the butler's active run.
  run_changed,
  /// 409: mode reject while a run of the butler is active.
  run_active,
  /// 429: `threads.max_queued_runs` runs are already queued.
  queue_full,
};

/// The rule's answer for one turn.
struct turn_decision {
  turn_action action = turn_action::refuse;
  turn_refusal refusal = turn_refusal::none;
  /// The butler's active run ("" when none): the one steered into,
  /// interrupted, or named in a refusal.
  std::string active_run_id;
  /// For a limit refusal, how many turns or runs filled the limit.
  size_t count = 0;
};

/// The kind a decided turn is stored as (`thread_turn_insert` $5): "start"
/// (also for an interrupt), "steer", "queued" or "collect".
std::string_view stored_kind(turn_action x);

/// The HTTP status of a refusal: 409 for conflicts with the active run,
/// 429 for full limits.
uint32_t status_of(turn_refusal x);

class turn_policy {
 public:
  explicit turn_policy(const threads_config& cfg)
    : max_pending_turns_(cfg.max_pending_turns),
      max_queued_runs_(cfg.max_queued_runs), collect_(cfg.collect_ms > 0) {
    // nop
  }

  /// Whether one more turn may wait for the thread while `waiting` turns
  /// already do: nothing when it may, else the refusal.
  std::optional<turn_decision> admit(size_t waiting) const;

  /// Decides `turn` for its butler, whose active run is `active_run_id`
  /// ("" when it has none), while the thread holds `queued` queued runs.
  /// The checks against the active run come before the limits. In collect
  /// mode a turn with no active run joins `collecting_run_id` (the run the
  /// butler's open collect window gathers turns for, "" when none): action
  /// `collect`, unless it expected another run.
  turn_decision decide(const thread_turn& turn, std::string_view active_run_id,
                       size_t queued,
                       std::string_view collecting_run_id = {}) const;

  /// Whether collect mode is on (`threads.collect_ms` > 0).
  bool collects() const {
    return collect_;
  }

 private:
  size_t max_pending_turns_;
  size_t max_queued_runs_;
  bool collect_;
};

/// The answer to a refused turn to butler `butler`: its status, error code
/// and a message naming the runs or the limit.
turn_result refusal_result(const turn_decision& d, const thread_turn& turn,
                           std::string_view butler);

} // namespace butlers
