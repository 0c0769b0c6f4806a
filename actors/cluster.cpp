#include "actors/cluster.hpp"

#include <algorithm>
#include <random>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

using cluster_ptr = cluster_actor::stateful_pointer<cluster_state>;

constexpr auto hello_timeout = 5s;

std::string names_of(const cluster_hello& h) {
  std::string out;
  for (auto& e : h.entries)
    out += (out.empty() ? "" : ",") + e.name;
  return out.empty() ? "(none)" : out;
}

void count_transition(cluster_ptr self, const std::string& node,
                      const std::string& to) {
  auto& m = self->state.ctx->metrics;
  m.get_counter("butlers_cluster_transitions_total",
                "Liveness transitions of peer nodes by node and new state",
                "node=\"" + node + "\",to=\"" + to + "\"")
    .inc();
  m.get_gauge("butlers_cluster_peer_up",
              "1 while the peer node is connected, 0 while it is lost",
              "node=\"" + node + "\"")
    .set(to == "active" ? 1 : 0);
}

/// Tells this node's switchboard which butlers gained or lost their last
/// live host (their circuits follow).
void apply_changes(cluster_ptr self, const std::vector<registry_entry>& xs) {
  auto& st = self->state;
  if (!st.cfg.switchboard)
    return;
  auto sb = st.ctx->switchboard();
  for (auto& e : xs) {
    spdlog::info("cluster: butler {} is {} (hosts: {})", e.name,
                 e.status == "active" ? "routable" : "not routable",
                 e.node.empty() ? "none" : e.node);
    if (sb)
      caf::anon_send(sb, circuit_atom_v, e.name, e.status == "active");
  }
}

/// A peer's butler handles as they came over the wire (a `cluster_hello`
/// carries untyped handles), typed for the registry.
std::vector<butler_actor> butler_handles(const cluster_hello& hello) {
  std::vector<butler_actor> out;
  out.reserve(hello.handles.size());
  for (auto& h : hello.handles)
    out.push_back(caf::actor_cast<butler_actor>(h));
  return out;
}

/// Writes a peer's butlers into the registry with its current status.
void register_peer(cluster_ptr self, const cluster_state::peer& p) {
  auto& st = self->state;
  if (!st.registry)
    return;
  auto node = p.hello.node;
  auto status = p.status;
  self
    ->request(st.registry, hello_timeout, register_atom_v, node,
              p.hello.entries, butler_handles(p.hello))
    .then(
      [self, node, status](std::vector<registry_entry>& changes) {
        if (status == "active") {
          apply_changes(self, changes);
          return;
        }
        self
          ->request(self->state.registry, hello_timeout, mark_atom_v, node,
                    status)
          .then(
            [self](std::vector<registry_entry>& more) {
              apply_changes(self, more);
            },
            [](const caf::error&) {});
      },
      [](const caf::error&) {});
}

void mark(cluster_ptr self, const std::string& node,
          const std::string& status) {
  auto& st = self->state;
  if (!st.registry)
    return;
  self->request(st.registry, hello_timeout, mark_atom_v, node, status)
    .then(
      [self](std::vector<registry_entry>& changes) {
        apply_changes(self, changes);
      },
      [](const caf::error&) {});
}

/// On a butler-only node: outcomes and deliveries go to a connected
/// switchboard node (null when none is connected).
void pick_switchboard(cluster_ptr self) {
  auto& st = self->state;
  if (st.cfg.switchboard)
    return;
  caf::actor sb;
  for (auto& [name, p] : st.peers)
    if (p.status == "active" && p.hello.switchboard) {
      sb = p.hello.switchboard;
      break;
    }
  st.ctx->set_switchboard(caf::actor_cast<switchboard_actor>(sb));
}

void dial_later(cluster_ptr self, const std::string& address) {
  auto& st = self->state;
  auto n = st.failures[address]++;
  auto base = std::chrono::milliseconds{100}
              * (1u << std::min<uint32_t>(n, 16));
  auto capped = std::min<std::chrono::milliseconds>(base,
                                                    std::chrono::milliseconds{
                                                      st.cfg.reconnect_cap_ms});
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter{0.5, 1.0};
  auto delay = std::chrono::duration_cast<caf::timespan>(capped * jitter(rng));
  self->delayed_send(self, delay, connect_atom_v, address);
}

/// Where this node listens, as peers should name it ("" when it does not).
std::string listen_address(const cluster_config& cfg) {
  if (cfg.port == 0)
    return {};
  auto host = cfg.bind.find(':') == std::string::npos ? cfg.bind
                                                      : "[" + cfg.bind + "]";
  return host + ":" + std::to_string(cfg.port);
}

/// True for an introduction from another node that carries this node's
/// own `node.name` (a node that dialled itself is not one).
bool duplicate_name(cluster_ptr self, const cluster_hello& hello) {
  return !hello.node.empty() && hello.node == self->state.node
         && hello.cluster != caf::actor_cast<caf::actor>(self);
}

/// Refuses a peer that calls itself by this node's name: its butlers are
/// not registered, it is not monitored; counted and logged (the first time
/// and every tenth time after, per address). `how` says which side dialled.
void refuse_duplicate(cluster_ptr self, const std::string& address,
                      const char* how) {
  auto& st = self->state;
  st.ctx->metrics
    .get_counter("butlers_cluster_peers_refused_total",
                 "Introductions of peer nodes this node refused, by reason",
                 "reason=\"duplicate_name\"")
    .inc();
  auto n = st.refusals[address]++;
  if (n % 10 != 0)
    return;
  spdlog::error("cluster: refused peer at {} ({}): it is also named '{}', "
                "this node's node.name; no butlers are shared until one of "
                "them is renamed (refused {} time(s))",
                address, how, st.node, n + 1);
}

/// A peer introduced itself (in its hello, or in the answer to ours).
void accept_peer(cluster_ptr self, cluster_hello hello,
                 const std::string& address) {
  auto& st = self->state;
  if (hello.node.empty() || hello.node == st.node || !hello.cluster)
    return;
  auto& p = st.peers[hello.node];
  bool is_new = !p.hello.cluster;
  bool returned = p.status != "active";
  if (p.hello.cluster != hello.cluster)
    self->monitor(hello.cluster);
  p.hello = std::move(hello);
  if (!address.empty())
    p.address = address;
  if (is_new || returned) {
    ++p.epoch;
    spdlog::info("cluster: node {} {} (butlers: {})", p.hello.node,
                 is_new ? "joined" : "is back, " + p.status + " -> active",
                 names_of(p.hello));
    count_transition(self, p.hello.node, "active");
  }
  p.status = "active";
  register_peer(self, p);
  pick_switchboard(self);
}

void say_hello(cluster_ptr self, const caf::actor& peer,
               const std::string& address) {
  auto hdl = caf::actor_cast<cluster_actor>(peer);
  auto version = self->state.local_version;
  self->request(hdl, hello_timeout, hello_atom_v, self->state.local)
    .then(
      [self, address, peer, version](cluster_hello& reply) {
        if (duplicate_name(self, reply)) {
          refuse_duplicate(self, address.empty() ? "(unknown)" : address,
                           "this node dialled it");
          if (!address.empty())
            dial_later(self, address);
          return;
        }
        if (!address.empty())
          self->state.failures[address] = 0;
        accept_peer(self, std::move(reply), address);
        // Our group (re)started while this hello was out, before the peer
        // was known here: tell it again, with the current butlers.
        if (version != self->state.local_version)
          say_hello(self, peer, address);
      },
      [self, address](const caf::error& err) {
        spdlog::warn("cluster: hello to {} failed: {}",
                     address.empty() ? "a peer" : address,
                     self->system().render(err));
        if (!address.empty())
          dial_later(self, address);
      });
}

void on_down(cluster_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto& [name, p] : st.peers) {
    if (!p.hello.cluster || p.hello.cluster.address() != dm.source)
      continue;
    if (p.status != "active")
      return;
    p.status = "stale";
    ++p.epoch;
    spdlog::warn("cluster: node {} lost ({}): butlers {} active -> stale, "
                 "quarantined in {} ms unless it returns",
                 name, self->system().render(dm.reason), names_of(p.hello),
                 st.cfg.quarantine_after_ms);
    count_transition(self, name, "stale");
    mark(self, name, "stale");
    pick_switchboard(self);
    self->delayed_send(self,
                       std::chrono::milliseconds{st.cfg.quarantine_after_ms},
                       expire_atom_v, name, p.epoch);
    if (!p.address.empty()) {
      st.failures[p.address] = 0;
      dial_later(self, p.address);
    }
    return;
  }
}

/// Dials "host:port" on a thread of its own (remote_actor blocks) and
/// reports the outcome to `parent`.
void dialer(caf::blocking_actor* self, cluster_actor parent,
            std::string address, bool tls) {
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto port = static_cast<uint16_t>(std::stoul(address.substr(colon + 1)));
  auto& sys = self->system();
  auto hdl = tls ? caf::openssl::remote_actor<cluster_actor>(sys, host, port)
                 : sys.middleman().remote_actor<cluster_actor>(host, port);
  if (hdl)
    caf::anon_send(parent, peer_atom_v, address, cluster_peer_actor{*hdl},
                   std::string{});
  else
    caf::anon_send(parent, peer_atom_v, address, cluster_peer_actor{},
                   sys.render(hdl.error()));
}

} // namespace

cluster_actor::behavior_type cluster(
  cluster_actor::stateful_pointer<cluster_state> self, cluster_config cfg,
  std::string node, node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.node = std::move(node);
  st.ctx = std::move(ctx);
  st.local.node = st.node;
  st.local.cluster = caf::actor_cast<caf::actor>(self);
  st.local.address = listen_address(st.cfg);
  self->set_down_handler([self](const caf::down_msg& dm) {
    on_down(self, dm);
  });
  for (auto& address : st.cfg.peers)
    self->send(self, connect_atom_v, address);
  return {
    [self](hello_atom, cluster_hello& hello) -> cluster_hello {
      if (duplicate_name(self, hello)) {
        auto from = !hello.address.empty()
                      ? hello.address
                      : "a node that does not listen, CAF node "
                          + (hello.cluster ? to_string(hello.cluster.node())
                                           : std::string{"?"});
        refuse_duplicate(self, from, "it dialled this node");
        // Only the name: the dialler sees it and refuses too.
        cluster_hello refusal;
        refusal.node = self->state.node;
        return refusal;
      }
      accept_peer(self, std::move(hello), {});
      return self->state.local;
    },
    [self](local_atom, cluster_hello& hello, registry_actor& reg) {
      auto& st = self->state;
      hello.node = st.node;
      hello.cluster = caf::actor_cast<caf::actor>(self);
      hello.address = listen_address(st.cfg);
      st.local = std::move(hello);
      ++st.local_version;
      st.registry = std::move(reg);
      // A new group: a new registry to fill, new handles to announce.
      for (auto& [name, p] : st.peers) {
        register_peer(self, p);
        if (p.status == "active")
          say_hello(self, p.hello.cluster, p.address);
      }
      pick_switchboard(self);
    },
    [self](connect_atom, const std::string& address) {
      auto me = caf::actor_cast<cluster_actor>(self);
      self->system().spawn(dialer, me, address, self->state.cfg.tls());
    },
    [self](peer_atom, const std::string& address, cluster_peer_actor& hdl,
           const std::string& error) {
      if (!hdl) {
        auto n = self->state.failures[address];
        if (n == 0 || n % 10 == 0)
          spdlog::warn("cluster: cannot reach peer {}: {} (retrying with "
                       "backoff)",
                       address, error);
        dial_later(self, address);
        return;
      }
      say_hello(self, caf::actor_cast<caf::actor>(hdl), address);
    },
    [self](expire_atom, const std::string& name, uint64_t epoch) {
      auto& st = self->state;
      auto i = st.peers.find(name);
      if (i == st.peers.end() || i->second.epoch != epoch
          || i->second.status != "stale")
        return;
      i->second.status = "quarantined";
      spdlog::warn("cluster: node {} still lost after {} ms: butlers {} "
                   "stale -> quarantined",
                   name, st.cfg.quarantine_after_ms, names_of(i->second.hello));
      count_transition(self, name, "quarantined");
      mark(self, name, "quarantined");
    },
  };
}

} // namespace butlers
