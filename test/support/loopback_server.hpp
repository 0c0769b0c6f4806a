#pragma once

// A TCP listener on 127.0.0.1 (ephemeral port) that serves each connection
// on its own thread: the base of the wire-protocol fakes (fake Telegram Bot
// API, SMTP sink). Stopping shuts every socket down and joins every thread,
// so a handler blocked in `read` returns at once; a handler blocked on its
// own condition must also watch `stopping()`.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace butlers::test {

/// One accepted connection, handed to the handler on its thread.
class loopback_connection {
 public:
  explicit loopback_connection(int fd) : fd_(fd) {
    // nop
  }

  /// Reads what is there (blocking until at least one byte); appends it to
  /// `buf`. False on EOF, error or when the server stops.
  bool read_some(std::string& buf);

  /// Writes all of `data`; false when the peer is gone.
  bool write_all(std::string_view data);

  /// Closes the connection now (the handler may return afterwards).
  void shutdown();

  int fd() const {
    return fd_;
  }

 private:
  int fd_;
};

/// The listener; see the file comment.
class loopback_server {
 public:
  using handler = std::function<void(loopback_connection&)>;

  /// Binds 127.0.0.1:`port` (0: an ephemeral one) and listens; throws
  /// std::runtime_error when it cannot.
  explicit loopback_server(handler h, uint16_t port = 0);
  /// Same as stop().
  ~loopback_server();

  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  uint16_t port() const {
    return port_;
  }

  /// Stops accepting, shuts down every open connection and joins every
  /// thread. Idempotent.
  void stop();

  /// True once stop() has begun.
  bool stopping() const {
    return stopping_.load();
  }

  /// Connections accepted so far.
  size_t accepted() const {
    return accepted_.load();
  }

 private:
  struct worker {
    int fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void accept_loop();
  void reap_finished();

  handler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> accepted_{0};
  std::mutex mtx_;
  std::list<worker> workers_; ///< guarded by mtx_
  std::thread acceptor_;
};

} // namespace butlers::test
