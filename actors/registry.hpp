#pragma once

#include <map>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"

namespace butlers {

struct registry_state {
  static inline const char* name = "registry";
  struct slot {
    registry_entry entry;
    caf::actor handle;
  };
  /// By butler name.
  std::map<std::string, slot> butlers;
  /// The node this registry belongs to.
  std::string node;
};

/// The butler registry (see `registry_actor`) of node `node`. (It takes an
/// argument on purpose: CAF 0.17.6 dereferences a null argument tuple when
/// a function actor is spawned without any.)
registry_actor::behavior_type registry(
  registry_actor::stateful_pointer<registry_state> self, std::string node);

} // namespace butlers
