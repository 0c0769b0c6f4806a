#include "actors/registry.hpp"

#include <caf/event_based_actor.hpp>

namespace butlers {

registry_actor::behavior_type registry(
  registry_actor::stateful_pointer<registry_state> self, std::string node) {
  self->state.node = std::move(node);
  return {
    [self](lookup_atom, const std::string& name) -> caf::result<caf::actor> {
      auto& bs = self->state.butlers;
      auto i = bs.find(name);
      if (i == bs.end() || !i->second.handle)
        return caf::error{butlers_errc::target_unavailable,
                          "no butler named '" + name + "'"};
      return i->second.handle;
    },
    [self](list_atom) {
      std::vector<registry_entry> out;
      for (auto& [name, slot] : self->state.butlers)
        out.push_back(slot.entry);
      return out;
    },
    [self](register_atom, registry_entry& entry, caf::actor& hdl) {
      auto name = entry.name;
      self->state.butlers[name] = registry_state::slot{std::move(entry),
                                                       std::move(hdl)};
    },
  };
}

} // namespace butlers
