#include "actors/registry.hpp"

#include <set>

#include <caf/event_based_actor.hpp>

namespace butlers {

namespace {

int rank(const std::string& status) {
  if (status == "active")
    return 0;
  if (status == "stale")
    return 1;
  return 2;
}

using registry_ptr = registry_actor::stateful_pointer<registry_state>;

/// Whether each butler is routable now (merged status "active").
std::map<std::string, bool> routable(registry_ptr self) {
  std::map<std::string, bool> out;
  for (auto& [name, hosts] : self->state.butlers)
    out[name] = merged_entry(hosts).status == "active";
  return out;
}

/// The merged entries of the butlers whose routability differs from
/// `before` (a butler that appeared counts when it is routable, one that
/// disappeared as not routable).
std::vector<registry_entry> changed(registry_ptr self,
                                    const std::map<std::string, bool>& before) {
  std::vector<registry_entry> out;
  auto& bs = self->state.butlers;
  std::set<std::string> names;
  for (auto& kv : before)
    names.insert(kv.first);
  for (auto& kv : bs)
    names.insert(kv.first);
  for (auto& name : names) {
    auto b = before.find(name);
    bool was = b != before.end() && b->second;
    auto i = bs.find(name);
    registry_entry e;
    if (i != bs.end() && !i->second.empty()) {
      e = merged_entry(i->second);
    } else {
      e.name = name;
      e.status = "quarantined";
    }
    if (was != (e.status == "active"))
      out.push_back(std::move(e));
  }
  return out;
}

} // namespace

registry_entry merged_entry(const std::vector<registry_state::slot>& hosts) {
  registry_entry out = hosts.front().entry;
  std::string nodes;
  for (auto& h : hosts) {
    if (!nodes.empty())
      nodes += ",";
    nodes += h.entry.node;
    if (rank(h.entry.status) < rank(out.status))
      out.status = h.entry.status;
  }
  out.node = std::move(nodes);
  return out;
}

namespace {

/// A live host of `name`: this node's first, else round robin. `avoid` is
/// passed over while another live host remains.
caf::result<butler_actor> lookup(registry_ptr self, const std::string& name,
                                 const butler_actor& avoid) {
  auto& st = self->state;
  auto i = st.butlers.find(name);
  if (i == st.butlers.end())
    return caf::error{butlers_errc::target_unavailable,
                      "no butler named '" + name + "'"};
  std::vector<const registry_state::slot*> live;
  const registry_state::slot* avoided = nullptr;
  for (auto& h : i->second) {
    if (h.entry.status != "active" || !h.handle)
      continue;
    if (avoid && h.handle == avoid)
      avoided = &h;
    else
      live.push_back(&h);
  }
  if (live.empty() && avoided)
    return avoided->handle; // the avoided host is all there is
  if (live.empty())
    return caf::error{butlers_errc::target_unavailable,
                      "butler '" + name + "' has no live host"};
  for (auto* h : live)
    if (h->entry.node == st.node)
      return h->handle; // local first: no network hop
  auto& n = st.next[name];
  return live[n++ % live.size()]->handle;
}

} // namespace

registry_actor::behavior_type registry(
  registry_actor::stateful_pointer<registry_state> self, std::string node) {
  self->state.node = std::move(node);
  return {
    [self](lookup_atom, const std::string& name) -> caf::result<butler_actor> {
      return lookup(self, name, butler_actor{});
    },
    [self](lookup_atom, const std::string& name,
           const butler_actor& avoid) -> caf::result<butler_actor> {
      return lookup(self, name, avoid);
    },
    [self](list_atom) {
      std::vector<registry_entry> out;
      for (auto& [name, hosts] : self->state.butlers)
        if (!hosts.empty())
          out.push_back(merged_entry(hosts));
      return out;
    },
    [self](hosts_atom) {
      std::vector<registry_entry> out;
      for (auto& [name, hosts] : self->state.butlers)
        for (auto& h : hosts)
          out.push_back(h.entry);
      return out;
    },
    [self](register_atom, registry_entry& entry, butler_actor& hdl) {
      auto& st = self->state;
      entry.node = st.node;
      auto& hosts = st.butlers[entry.name];
      for (auto& h : hosts) {
        if (h.entry.node == st.node) {
          h = registry_state::slot{std::move(entry), std::move(hdl)};
          return;
        }
      }
      hosts.insert(hosts.begin(),
                   registry_state::slot{std::move(entry), std::move(hdl)});
    },
    [self](register_atom, const std::string& node,
           std::vector<registry_entry>& entries,
           std::vector<butler_actor>& handles) {
      auto& st = self->state;
      auto before = routable(self);
      for (auto i = st.butlers.begin(); i != st.butlers.end();) {
        auto& hosts = i->second;
        hosts.erase(std::remove_if(hosts.begin(), hosts.end(),
                                   [&](const registry_state::slot& h) {
                                     return h.entry.node == node;
                                   }),
                    hosts.end());
        i = hosts.empty() ? st.butlers.erase(i) : std::next(i);
      }
      for (size_t k = 0; k < entries.size() && k < handles.size(); ++k) {
        auto& e = entries[k];
        e.node = node;
        e.status = "active";
        auto& hosts = st.butlers[e.name];
        hosts.push_back(
          registry_state::slot{std::move(e), std::move(handles[k])});
      }
      return changed(self, before);
    },
    [self](mark_atom, const std::string& node, const std::string& status) {
      auto before = routable(self);
      for (auto& [name, hosts] : self->state.butlers)
        for (auto& h : hosts)
          if (h.entry.node == node)
            h.entry.status = status;
      return changed(self, before);
    },
  };
}

} // namespace butlers
