#pragma once

// A reusable harness for testing butlers across several real node
// processes: it writes each node's configuration from fragments, picks free
// loopback ports, starts N `butlers-node` processes sharing one PostgreSQL
// database, waits until each is ready, and can SIGKILL and restart any of
// them. See test/README.md "Testing your butlers on a cluster".

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test/support/http_client.hpp"
#include "test/support/node_process.hpp"

namespace butlers::test {

/// One node of a harness cluster.
struct cluster_node_spec {
  /// The harness's name of the node (what `peers` refer to), and its
  /// `node.name` unless `node_name` is set.
  std::string name;
  /// `node.name` when it must differ from `name` (e.g. two nodes named
  /// alike); "" means `name`.
  std::string node_name;
  /// Extra lines inside `[node]` (e.g. "log_level = \"debug\"").
  std::string node_extra;
  /// `cluster.switchboard`: runs the switchboard (and the messenger).
  bool switchboard = true;
  /// `cluster.butlers`: which configured butlers it hosts ("*" = all).
  std::vector<std::string> butlers = {"*"};
  /// Names of harness nodes this node dials (`cluster.peers`).
  std::vector<std::string> peers;
  /// Extra lines inside `[cluster]` (e.g. "quarantine_after_ms = 500").
  std::string cluster_extra;
  /// `[cluster.tls]` files; all empty for none.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  /// TOML appended after the common fragment: whole tables of this node
  /// only (e.g. a `[switchboard]` table).
  std::string fragment;
};

/// Starts and stops the nodes of a loopback cluster. Every node gets the
/// `common` TOML (typically the `[[butler]]` tables, so that every node
/// knows every butler) and `BUTLERS_DATABASE_URL` = `database_url`.
/// The destructor stops every node that still runs.
class cluster_harness {
 public:
  cluster_harness(std::string database_url, std::string common);
  ~cluster_harness();

  cluster_harness(const cluster_harness&) = delete;
  cluster_harness& operator=(const cluster_harness&) = delete;

  /// Adds a node (not started yet) and picks its cluster port; returns its
  /// index.
  size_t add(cluster_node_spec spec);

  /// Starts node `i` (again, after `kill` or `stop`) with the same ports;
  /// returns false (with the log in `why`) unless it listens and answers
  /// /readyz 200 within `timeout`.
  bool start(size_t i, std::string* why = nullptr,
             std::chrono::milliseconds timeout = std::chrono::seconds{30});

  /// Starts every node in order (a switchboard node first lets it apply
  /// the migrations before the others).
  bool start_all(std::string* why = nullptr);

  /// SIGKILLs node `i` and waits until it is gone.
  void kill(size_t i);

  /// Sends `sig` to node `i` (SIGSTOP freezes it, SIGCONT thaws it).
  void signal(size_t i, int sig);

  /// SIGTERMs node `i` and waits for its exit; its exit code (-1 if killed).
  int stop(size_t i);

  /// Whether node `i` runs.
  bool running(size_t i) const;

  /// An HTTP client for node `i`'s API (valid while it runs).
  http_client& http(size_t i);

  uint16_t cluster_port(size_t i) const;

  /// The configuration node `i` was (last) started with.
  std::string config(size_t i) const;

  /// Node `i`'s log so far (of its current or last run).
  std::string log(size_t i) const;

  /// GET /v1/butlers on node `i`: (butler, hosting node) → status; empty
  /// when the node does not answer.
  std::map<std::pair<std::string, std::string>, std::string> hosts(size_t i);

  /// The value of one series (`name{labels}` exactly as exposed) in node
  /// `i`'s /metrics; 0 when absent.
  double metric(size_t i, const std::string& series);

  size_t size() const {
    return nodes_.size();
  }

 private:
  struct node {
    cluster_node_spec spec;
    uint16_t cluster_port = 0;
    std::unique_ptr<node_process> proc;
    std::unique_ptr<http_client> http;
    std::string last_log;
  };

  std::string render(const node& n) const;

  std::string url_;
  std::string common_;
  std::vector<node> nodes_;
};

/// A TCP port on 127.0.0.1 that nothing listened on a moment ago.
uint16_t free_loopback_port();

} // namespace butlers::test
