#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor.hpp>

#include "runtime/event_hub.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// State that the HTTP threads read on every request without a round trip
/// through an actor's mailbox: readiness and draining. Written by the actors
/// that own the facts (the inbox writer, the node's shutdown sequence).
struct node_status {
  /// Set once shutdown begins: intake answers 503, /readyz turns 503.
  std::atomic<bool> draining{false};
  /// A database is configured for this node.
  bool database_configured = false;
  /// The database answered and every migration is applied.
  std::atomic<bool> database_ready{false};

  /// Records the last database error (empty once healthy again).
  void set_database_error(std::string text) {
    std::lock_guard<std::mutex> guard{mtx_};
    database_error_ = std::move(text);
  }
  std::string database_error() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return database_error_;
  }

  /// Ready to take work: not draining, and the database (if any) is ready.
  bool ready() const {
    return !draining.load() && (!database_configured || database_ready.load());
  }

 private:
  mutable std::mutex mtx_;
  std::string database_error_;
};

/// What every actor of a node shares: status, metrics, and the current
/// switchboard (it changes when the supervisor restarts its group). Created
/// once by the node before the actor system and outliving it.
struct node_context {
  node_status status;
  metrics_registry metrics;

  /// Publishes the switchboard the HTTP surface should talk to (null while
  /// the supervisor restarts it).
  void set_switchboard(caf::actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    switchboard_ = std::move(hdl);
  }
  caf::actor switchboard() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return switchboard_;
  }

  /// Publishes the butler registry (a `registry_actor`; null while the
  /// supervisor restarts its group).
  void set_registry(caf::actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    registry_ = std::move(hdl);
  }
  caf::actor registry() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return registry_;
  }

  /// The node's cluster actor (a `cluster_actor`); null with the cluster
  /// off. Set once, before the supervisor starts.
  void set_cluster(caf::actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    cluster_ = std::move(hdl);
  }
  caf::actor cluster() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return cluster_;
  }

  /// Publishes the database reader (a `db_reader_actor`).
  void set_reader(caf::actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    reader_ = std::move(hdl);
  }
  caf::actor reader() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return reader_;
  }

  /// Publishes the thread directory (a `thread_directory_actor`; null
  /// while the supervisor restarts its group).
  void set_threads(caf::actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    threads_ = std::move(hdl);
  }
  caf::actor threads() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return threads_;
  }

  /// The thread API's event streams (set by the node before any actor
  /// starts; null when the node serves none).
  std::shared_ptr<event_hub> events;

 private:
  mutable std::mutex mtx_;
  caf::actor switchboard_;
  caf::actor registry_;
  caf::actor reader_;
  caf::actor cluster_;
  caf::actor threads_;
};

using node_context_ptr = std::shared_ptr<node_context>;

} // namespace butlers
