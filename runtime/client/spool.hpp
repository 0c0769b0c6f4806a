#pragma once

// The client's optional local spool: an append-only file of operations,
// each fsynced before its enqueue_ack, and of completion records, so that a
// restarted client sends again, in order, what it acknowledged but did not
// finish.
//
// One record per line: 8 hex digits of the CRC-32 of the JSON, a space, the
// JSON, a newline:
//   {"t":"op","seq":N,"kind":K,"key":..,"path":..,"id":..,"body":..}
//   {"t":"done","seq":N,"failed":B}
//   {"t":"base","next":N}       (first record after a compaction)
// A crash can leave only the last line torn (no newline, or a bad CRC); it is
// cut at open. A bad line before the last one is corruption: open refuses.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/client/butlers_client.hpp"

namespace butlers::client {

/// CRC-32 (IEEE 802.3, as zlib's crc32).
uint32_t crc32(const std::string& data);

class spool {
 public:
  struct record {
    uint64_t seq = 0;
    operation op;
  };

  /// What the file held at open.
  struct contents {
    /// Operations without a completion record, in sequence order.
    std::vector<record> pending;
    /// The sequence the next operation gets.
    uint64_t next_seq = 1;
    /// Bytes of a torn tail that were cut.
    size_t torn_bytes = 0;
  };

  /// Opens (creating) `path`, reads it, cuts a torn tail. Throws
  /// std::runtime_error when it cannot, or on corruption before the tail.
  static std::unique_ptr<spool> open(const std::string& path, contents& out);

  ~spool();
  spool(const spool&) = delete;
  spool& operator=(const spool&) = delete;

  /// Appends an operation and fsyncs (fdatasync) before returning true.
  bool append_op(uint64_t seq, const operation& op, std::string* error);

  /// Appends a completion record (no fsync: losing it only means a replay
  /// that the node deduplicates).
  void append_done(uint64_t seq, bool failed);

  /// With nothing pending: replaces the file by one `base` record (written
  /// to a temporary file, fsynced, renamed over the spool).
  bool compact(uint64_t next_seq, std::string* error);

  /// The file's size now (tests).
  size_t size() const;

 private:
  spool(std::string path, int fd);
  bool write_line(const std::string& json, bool sync, std::string* error);

  std::string path_;
  int fd_ = -1;
};

} // namespace butlers::client
