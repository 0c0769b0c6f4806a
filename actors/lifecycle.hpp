#pragma once

// Where the actors hand things to the messenger: the switchboard's
// hand-over of a notify.v1 (a durable messenger work item), and the
// lifecycle reactions of spec 001 §8 (runtime/lifecycle.hpp) — who emits
// which signal, and when:
//
// * the switchboard, once a request is claimed and its plan stored:
//   `progress`;
// * a butler whose item must wait for a session slot: `queued`, and
//   `progress` again when the item starts;
// * the switchboard, when a request is finished: `parsed` or `errored`,
//   handed over (with the error reply of an errored request) *before* its
//   terminal transition is written, so a crash right after that write loses
//   neither: the messenger holds them as durable work items.
//
// Every signal is for requests whose channel reacts (`node_context::
// lifecycle`); for the others these functions build and send nothing.

#include <functional>
#include <string>

#include "actors/butler.hpp"
#include "actors/switchboard.hpp"
#include "runtime/lifecycle.hpp"

namespace butlers {

// -- the switchboard ----------------------------------------------------------

/// Hands a notify.v1 to this node's messenger (route.v1 with
/// input.context.notify_request, segment "notify:<idempotency_key>");
/// `done` gets its response (`accepted` once the work item is durable).
void hand_to_messenger(switchboard_ptr self, std::string notify,
                       std::function<void(route_response)> done);

/// Shows `x` on the source message of the request `ctx` describes, if its
/// channel reacts (fire and forget: a failed hand-over is logged).
void show_lifecycle(switchboard_ptr self, const request_context& ctx,
                    lifecycle_state x);

/// Hands over what finished request `f` owes its sender before its
/// terminal transition is written: its terminal reaction (if its channel
/// reacts) and, when it errored, the error reply. Calls `then` with the
/// transition to write and true once the messenger holds them (at once
/// when there is nothing to hand over), or false when one could not be
/// handed over for now (the transition must wait: the request stays in
/// progress, and the cold path takes it again after its lease).
void hand_over_owed(switchboard_ptr self, finished_request f,
                    std::function<void(completion, bool)> then);

/// Whether finished request `f` owes its sender anything (see
/// `owe_terminal`).
inline bool owes(switchboard_ptr self, const finished_request& f) {
  return !f.notify.empty()
         || self->state.ctx->lifecycle.reacts(f.context.source_channel);
}

/// `hand_over_owed`, with a request that owes nothing (a parsed request on
/// a channel without reactions: nearly all of them) going on at once,
/// without allocating.
template<class F>
void owe_terminal(switchboard_ptr self, finished_request f, F then) {
  if (!owes(self, f)) {
    then(std::move(f.done), true);
    return;
  }
  hand_over_owed(self, std::move(f), std::move(then));
}

// -- butlers ------------------------------------------------------------------

/// Item `work_id` of a butler may wait for a session slot: if it does,
/// shows `queued`, once, if its request's channel reacts (never for the
/// messenger's own deliveries or for thread runs). Callers check
/// `node_context::lifecycle` first, so other channels pay nothing.
void show_waiting(butler_ptr self, const std::string& work_id);

/// `held` starts its session: shows `progress` again if `queued` was shown.
void show_started(butler_ptr self, const held_item& held);

} // namespace butlers
