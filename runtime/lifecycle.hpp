#pragma once

// Lifecycle reactions (spec 001 §8): the states a request shows its sender
// on an interactive channel, and the notify.v1 (intent "react") that asks
// the messenger to show one. Signals come from the switchboard (a claim:
// progress; the terminal write: parsed or errored) and the butlers (an item
// that waits for a session slot: queued, then progress when it starts),
// each as a durable messenger work item of its own; the messenger's
// outbound ledger orders them (a later state wins, a terminal state is
// never replaced by a non-terminal one). Only channels that a reacting
// adapter serves get any: elsewhere nothing is built or sent.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/route.hpp"

namespace butlers {

enum class lifecycle_state : uint8_t {
  /// PROGRESS: received, processing started (or resumed after a wait).
  progress,
  /// Waiting for a session slot of a busy butler.
  queued,
  /// PARSED: every target succeeded (terminal).
  parsed,
  /// ERRORED: a target or the processing failed (terminal).
  errored,
};

/// "progress", "queued", "parsed", "errored".
const char* to_string(lifecycle_state x);

/// The state `text` names.
std::optional<lifecycle_state> lifecycle_state_of(std::string_view text);

/// parsed and errored.
constexpr bool is_terminal(lifecycle_state x) {
  return x == lifecycle_state::parsed || x == lifecycle_state::errored;
}

/// Added to the rank of terminal states: above every non-terminal one.
constexpr int64_t terminal_rank = int64_t{1} << 60;

/// The order of reactions on one message: by the time the state was reached
/// (Unix microseconds), terminal states above all others.
constexpr int64_t reaction_rank(lifecycle_state x, int64_t at_us) {
  return is_terminal(x) ? terminal_rank + at_us : at_us;
}

/// The emoji `cfg` gives state `x`.
const std::string& reaction_emoji(const reaction_config& cfg,
                                  lifecycle_state x);

/// Which source channels get lifecycle reactions: those that a messenger
/// adapter setting reactions serves (a telegram adapter: telegram; a slack
/// adapter: slack).
class lifecycle_policy {
 public:
  /// Reacts nowhere.
  lifecycle_policy() = default;

  /// From the messenger's adapters.
  explicit lifecycle_policy(const std::vector<delivery_adapter_config>& ads);

  /// Whether requests from `channel` get reactions.
  bool reacts(std::string_view channel) const {
    return (telegram_ && channel == "telegram")
           || (slack_ && channel == "slack");
  }

 private:
  bool telegram_ = false;
  bool slack_ = false;
};

/// The notify.v1 that asks the messenger to show state `x`, reached at
/// `at_us`, on the source message of the request `env` describes (its
/// request context). Its idempotency key "react:<state>:<at_us>" makes a
/// repeated hand-over of the same signal one delivery.
std::string make_react_notify(const route_envelope& env, lifecycle_state x,
                              int64_t at_us);

} // namespace butlers
