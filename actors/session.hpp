#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/config.hpp"
#include "runtime/route.hpp"
#include "runtime/scripted.hpp"
#include "runtime/session_pool.hpp"

namespace butlers {

class subprocess;

/// What a session needs to know about its butler.
struct session_params {
  std::string butler;
  /// The adapter: kind "scripted", "cli", or "delivery" (the messenger).
  runtime_config runtime;
  std::chrono::milliseconds timeout{600000};
  /// delivery: the messenger's channel adapters (empty: one outbox,
  /// "outbox.jsonl" in the working directory).
  std::vector<delivery_adapter_config> adapters;
  /// delivery: the messenger's threads for the blocking sends (null: a
  /// thread of its own per delivery).
  std::shared_ptr<blocking_pool> pool;
};

struct session_state {
  static inline const char* name = "session";
  session_params params;
  work_item item;
  route_envelope env;
  butler_actor butler;
  std::chrono::steady_clock::time_point started;
  /// scripted: the script and the turns done so far.
  scripted_script script;
  uint32_t turn = 0;
  /// Steer inputs not yet applied (drained at the next boundary), and who
  /// hears about applied ones.
  std::vector<steer_input> steer_inbox;
  caf::actor observer;
  /// scripted: one JSON object per turn begun, with its start time and the
  /// message ids of the steer inputs applied at the boundary before it.
  std::string turn_log;
  /// scripted: turns added because steer input arrived during the last one.
  uint32_t extra_turns = 0;
  /// cli: the running program (its group is killed on cancel and exit).
  std::shared_ptr<subprocess> proc;
  /// delivery: set to stop retrying.
  std::shared_ptr<std::atomic<bool>> stop;
  /// The outcome went to the butler; later events are ignored.
  bool finished = false;
};

/// A running session (see `session_actor`).
session_actor::behavior_type session(
  session_actor::stateful_pointer<session_state> self, session_params params,
  work_item item, route_envelope env, butler_actor butler, session_steer steer);

/// A delivery's `session_outcome`, as its session would report it, from
/// what its adapters did.
session_outcome delivery_outcome(const work_item& item,
                                 const route_envelope& env,
                                 std::chrono::steady_clock::time_point started,
                                 adapter_result r);

/// The messenger's delivery of `item` when only outbox adapters serve its
/// channel (or it is refused outright): no session actor, since nothing
/// blocks, nothing can be steered and nothing needs a timer of its own
/// (each session actor's start and end cost as much CPU as the delivery).
/// The lines go to their files' writer threads and `butler` gets the
/// `session_outcome` (done_atom) as from a session. Returns false, doing
/// nothing, when a webhook serves the channel: then a session runs it.
bool deliver_without_session(const session_params& params,
                             const work_item& item, const route_envelope& env,
                             butler_actor butler);

/// The prompt a CLI runtime gets: the butler's role, the request context as
/// data, and the user's text fenced as untrusted data (spec 001 §6.1).
std::string cli_prompt(const std::string& butler, const route_envelope& env);

} // namespace butlers
