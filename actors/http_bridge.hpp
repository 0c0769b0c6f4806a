#pragma once

#include <chrono>
#include <tuple>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>

namespace butlers {

/// The one bridge from a thread outside the actor system (an HTTP thread)
/// to an actor's request/response: spawns a short-lived actor that sends
/// `msg...` to `hdl` and hands the `Reply` to `on_reply`, or the failure
/// (no answer within `timeout` included) to `on_error`. Either runs once,
/// on a CAF thread inside that actor, which then ends. `Handle` is a typed
/// handle, so the compiler checks that `hdl` answers `msg...` with `Reply`.
template<class Reply, class Handle, class OnReply, class OnError, class... Ts>
void bridge(caf::actor_system& sys, Handle hdl,
            std::chrono::milliseconds timeout, OnReply on_reply,
            OnError on_error, Ts... msg) {
  sys.spawn(
    [](caf::event_based_actor* self, Handle hdl,
       std::chrono::milliseconds timeout, OnReply on_reply, OnError on_error,
       std::tuple<Ts...> msg) {
      std::apply(
        [&](auto&... xs) {
          self->request(hdl, timeout, std::move(xs)...)
            .then(
              [on_reply](Reply& r) mutable {
                on_reply(r);
              },
              [on_error](const caf::error& err) mutable {
                on_error(err);
              });
        },
        msg);
    },
    std::move(hdl), timeout, std::move(on_reply), std::move(on_error),
    std::make_tuple(std::move(msg)...));
}

} // namespace butlers
