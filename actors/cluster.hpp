#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"

namespace butlers {

struct cluster_state {
  static inline const char* name = "cluster";
  /// One node this node has met.
  struct peer {
    /// Its last introduction.
    cluster_hello hello;
    /// "active", "stale" or "quarantined".
    std::string status = "active";
    /// Bumped on every loss and return: a quarantine timer of an older
    /// epoch is void.
    uint64_t epoch = 0;
    /// The "host:port" we dial it at; "" when it dialled us.
    std::string address;
  };
  cluster_config cfg;
  /// This node's name.
  std::string node;
  node_context_ptr ctx;
  /// This node's introduction (set by the supervisor).
  cluster_hello local;
  /// Bumped whenever `local` changes: a hello answered after that went
  /// out stale and is sent again.
  uint64_t local_version = 0;
  /// The current local registry; null until the supervisor reports.
  registry_actor registry;
  /// By node name.
  std::map<std::string, peer> peers;
  /// Failed dials in a row, by "host:port" (the backoff exponent).
  std::map<std::string, uint32_t> failures;
  /// Introductions refused because the peer has this node's name, by
  /// the peer's address (log lines are rate-limited by it).
  std::map<std::string, uint32_t> refusals;
};

/// The node's cluster actor (see `cluster_actor`). The node publishes it on
/// `cluster.port`; it dials every `cluster.peers` entry itself.
cluster_actor::behavior_type cluster(
  cluster_actor::stateful_pointer<cluster_state> self, cluster_config cfg,
  std::string node, node_context_ptr ctx);

} // namespace butlers
