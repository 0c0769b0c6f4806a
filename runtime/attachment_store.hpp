#pragma once

// Where attachments' bytes are stored (runtime/attachments.md): the table
// `attachments` through connections of the store's own, never through the
// inbox writer, so a megabyte photo does not sit in the group commit every
// other message waits for. Blocking (libpq): call it from a source's
// thread, an HTTP thread or a detached actor, never from the scheduler.
// At most `connections` writes run at once; a caller beyond them waits
// for one to finish (each write is at most `limits.max_bytes`).

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection>

#include "runtime/attachments.hpp"

namespace butlers {

class attachment_store {
 public:
  attachment_store(std::string url, attachment_limits limits,
                   size_t connections = 2);
  ~attachment_store();

  attachment_store(const attachment_store&) = delete;
  attachment_store& operator=(const attachment_store&) = delete;

  const attachment_limits& limits() const {
    return limits_;
  }

  /// Stores `bytes` (idempotent: the key is their hash) and returns their
  /// reference; nullopt with `*error` set when they are over
  /// `limits.max_bytes` (nothing is written) or the database failed.
  /// Sweeps rows past the retention now and then.
  std::optional<attachment_ref> put(std::string_view bytes,
                                    std::string media_type, std::string name,
                                    std::string* error);

  /// Deletes rows past the retention (at most `batch`); how many went.
  size_t sweep(size_t batch = 1000);

 private:
  std::unique_ptr<pqxx::connection> take();
  void give_back(std::unique_ptr<pqxx::connection> conn);

  std::string url_;
  attachment_limits limits_;
  size_t max_connections_;
  std::mutex mtx_;
  std::condition_variable cv_;
  /// Idle connections, and how many exist (idle or in use).
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  size_t open_ = 0;
  /// Writes since the last sweep.
  uint64_t puts_since_sweep_ = 0;
};

} // namespace butlers
