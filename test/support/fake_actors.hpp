#pragma once

// Typed fakes for actor tests: each implements the same interface as the
// real actor (the compiler checks it), with the handlers a test cares about
// given as functions and the rest answering as an idle actor would.

#include <functional>
#include <string>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/error.hpp"

namespace butlers::test {

/// What a fake butler answers to `route.execute`.
using route_fn = std::function<route_response(route_request&)>;

/// A butler that answers `route` with `on_route` (by default: accepted)
/// and has nothing running.
inline butler_actor::behavior_type fake_butler(butler_actor::pointer,
                                               route_fn on_route) {
  return {
    [on_route](route_atom, route_request& req) {
      if (on_route)
        return on_route(req);
      route_response r;
      r.status = "accepted";
      return r;
    },
    [](cancel_atom, const std::string&) {
      return false;
    },
    [](steer_atom, const std::string&, steer_input&) {
      return false;
    },
    [](status_atom) {
      return butler_status{};
    },
    [](done_atom, session_outcome&) {},
    [](caf::tick_atom) {},
    [](caf::tick_atom, const std::string&) {},
    [](schedule_atom, uint32_t) {},
    [](caf::timeout_atom) {},
    [](worker_atom, worker_call&) {
      return worker_reply{};
    },
    [](worker_atom, uint64_t) {},
    [](drain_atom, caf::timespan) {
      return uint32_t{0};
    },
    [](drain_atom) {},
    [](done_atom, route_response&) {},
  };
}

/// What a fake registry does for the requests a test cares about.
struct registry_fns {
  /// `list`; none: no butlers.
  std::function<std::vector<registry_entry>()> list;
  /// `lookup` of a name, passing over `avoid` (null when none); none: no
  /// host.
  std::function<butler_actor(const std::string&, const butler_actor&)> lookup;
};

inline registry_actor::behavior_type fake_registry(registry_actor::pointer,
                                                   registry_fns fns) {
  auto lookup = [fns](const std::string& name,
                      const butler_actor& avoid) -> caf::result<butler_actor> {
    if (fns.lookup)
      if (auto hdl = fns.lookup(name, avoid))
        return hdl;
    return caf::error{butlers_errc::target_unavailable,
                      "no butler named '" + name + "'"};
  };
  return {
    [lookup](lookup_atom, const std::string& name) {
      return lookup(name, {});
    },
    [lookup](lookup_atom, const std::string& name, const butler_actor& avoid) {
      return lookup(name, avoid);
    },
    [fns](list_atom) {
      return fns.list ? fns.list() : std::vector<registry_entry>{};
    },
    [](hosts_atom) {
      return std::vector<registry_entry>{};
    },
    [](register_atom, registry_entry&, butler_actor&) {},
    [](register_atom, const std::string&, std::vector<registry_entry>&,
       std::vector<butler_actor>&) {
      return std::vector<registry_entry>{};
    },
    [](mark_atom, const std::string&, const std::string&) {
      return std::vector<registry_entry>{};
    },
  };
}

} // namespace butlers::test
