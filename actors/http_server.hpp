#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/http_router.hpp"

namespace butlers {

/// The node's HTTP surface (restinio on its own asio threads, answering
/// asynchronously so a request waiting on an actor holds no thread): the
/// API of actors/README.md "HTTP API", one row per route in the table of
/// http_server.cpp. Binds loopback unless a token or a credential is
/// configured (checked by config validation); with either, every route that
/// is not open needs `Authorization: Bearer <token>` of a credential with a
/// role the route admits (actors/README.md "Roles").
class http_server {
 public:
  http_server(caf::actor_system& sys, const node_settings& settings,
              node_context_ptr ctx, supervisor_actor sup);
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds and starts serving. Returns the bound port, or throws
  /// std::runtime_error naming the address when it cannot bind.
  uint16_t start();

  /// Waits until no request is in flight or `timeout` passes; returns true
  /// when idle. Intake is refused while `status.draining` is set.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Stops accepting, closes connections and joins the threads.
  void stop();

  /// Reloads the credentials from the config file (SIGHUP); a file that
  /// does not validate leaves the old ones in force (logged).
  void reload_credentials();

  /// One row of the route table: its methods ("GET", "POST" or "ANY"), its
  /// path pattern and the roles it admits.
  struct route_row {
    std::string methods;
    std::string pattern;
    http_roles roles;
  };

  /// Every row of the route table, in order, read from the table itself.
  static std::vector<route_row> route_rows();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace butlers
