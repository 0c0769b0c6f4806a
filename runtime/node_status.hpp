#pragma once

#include <atomic>
#include <mutex>
#include <string>

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

} // namespace butlers
