#pragma once

// The node's shared context: status, metrics and the typed handles of the
// actors that the supervisor restarts (the HTTP threads and other groups
// find the current ones here).

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/interfaces.hpp"
#include "runtime/event_hub.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/mcp.hpp"
#include "runtime/metrics.hpp"
#include "runtime/node_status.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

/// What every actor of a node shares: status, metrics, and the current
/// switchboard (it changes when the supervisor restarts its group). Created
/// once by the node before the actor system and outliving it.
struct node_context {
  node_status status;
  metrics_registry metrics;

  /// Publishes the switchboard the HTTP surface should talk to (null while
  /// the supervisor restarts it).
  void set_switchboard(switchboard_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    switchboard_ = std::move(hdl);
  }
  switchboard_actor switchboard() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return switchboard_;
  }

  /// Publishes the butler registry (null while the supervisor restarts its
  /// group).
  void set_registry(registry_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    registry_ = std::move(hdl);
  }
  registry_actor registry() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return registry_;
  }

  /// Publishes this node's messenger, the only outbound delivery path (null
  /// while the supervisor restarts its group, and on a node without a
  /// switchboard).
  void set_messenger(butler_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    messenger_ = std::move(hdl);
  }
  butler_actor messenger() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return messenger_;
  }

  /// The node's cluster actor; null with the cluster
  /// off. Set once, before the supervisor starts.
  void set_cluster(cluster_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    cluster_ = std::move(hdl);
  }
  cluster_actor cluster() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return cluster_;
  }

  /// Publishes the database reader.
  void set_reader(db_reader_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    reader_ = std::move(hdl);
  }
  db_reader_actor reader() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return reader_;
  }

  /// Publishes the thread directory (null while the supervisor
  /// restarts its group).
  void set_threads(thread_directory_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    threads_ = std::move(hdl);
  }
  thread_directory_actor threads() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return threads_;
  }

  /// Publishes the connector actors of the current group by name (empty
  /// while the supervisor restarts it, and on a node without a
  /// switchboard).
  void set_connectors(std::map<std::string, connector_actor> hdls) {
    std::lock_guard<std::mutex> guard{mtx_};
    connectors_ = std::move(hdls);
  }
  /// The connector called `name`; null when none runs.
  connector_actor connector(const std::string& name) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = connectors_.find(name);
    return i == connectors_.end() ? connector_actor{} : i->second;
  }

  // -- connector health and statistics -------------------

  /// Publishes the connector heartbeat queue and rollups (null while the
  /// supervisor restarts its group, and on a node without a switchboard).
  void set_connector_stats(connector_stats_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    connector_stats_ = std::move(hdl);
  }
  connector_stats_actor connector_stats() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return connector_stats_;
  }

  /// Publishes the tool server (null while the supervisor restarts its
  /// group).
  void set_tool_server(tool_server_actor hdl) {
    std::lock_guard<std::mutex> guard{mtx_};
    tool_server_ = std::move(hdl);
  }

  tool_server_actor tool_server() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return tool_server_;
  }

  /// The capability tokens of this node's sessions (never null).
  tool_tokens_ptr tools = std::make_shared<tool_tokens>();

  /// The MCP sessions of /mcp (never null).
  std::shared_ptr<mcp::sessions>
    mcp_sessions = std::make_shared<mcp::sessions>();

  /// The MCP endpoint sessions are given (set by the node once it listens;
  /// "" while there is none).
  void set_mcp_url(std::string url) {
    std::lock_guard<std::mutex> guard{mtx_};
    mcp_url_ = std::move(url);
  }

  std::string mcp_url() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return mcp_url_;
  }

  /// The thread API's event streams (set by the node before any actor
  /// starts; null when the node serves none).
  std::shared_ptr<event_hub> events;

  /// Which source channels get lifecycle reactions (set by the node from
  /// the messenger's adapters before any actor starts; none by default).
  lifecycle_policy lifecycle;

  /// The node's tracer (runtime/tracing.hpp); never null, disabled unless
  /// `[telemetry] otlp_endpoint` is set (replaced by the node before any
  /// actor starts).
  tracer_ptr traces = std::make_shared<tracer>();

 private:
  mutable std::mutex mtx_;
  switchboard_actor switchboard_;
  registry_actor registry_;
  butler_actor messenger_;
  db_reader_actor reader_;
  cluster_actor cluster_;
  thread_directory_actor threads_;
  std::map<std::string, connector_actor> connectors_;
  connector_stats_actor connector_stats_;
  tool_server_actor tool_server_;
  std::string mcp_url_;
};

using node_context_ptr = std::shared_ptr<node_context>;

} // namespace butlers
