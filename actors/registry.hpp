#pragma once

#include <map>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"

namespace butlers {

struct registry_state {
  static inline const char* name = "registry";
  /// One host of a butler: its entry (`node`, `status`) and handle.
  struct slot {
    registry_entry entry;
    butler_actor handle;
  };
  /// By butler name: its hosts, this node's first.
  std::map<std::string, std::vector<slot>> butlers;
  /// Round-robin position per butler among its live remote hosts.
  std::map<std::string, size_t> next;
  /// The node this registry belongs to.
  std::string node;
};

/// One entry per butler name: `node` lists the hosts ("a,b"), `status` is
/// the best of theirs (active > stale > quarantined).
registry_entry merged_entry(const std::vector<registry_state::slot>& hosts);

/// The butler registry (see `registry_actor`) of node `node`. (It takes an
/// argument on purpose: CAF 0.17.6 dereferences a null argument tuple when
/// a function actor is spawned without any.)
registry_actor::behavior_type registry(
  registry_actor::stateful_pointer<registry_state> self, std::string node);

} // namespace butlers
