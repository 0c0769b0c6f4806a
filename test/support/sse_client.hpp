#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace butlers::test {

/// A server-sent event stream read over a real loopback socket: sends one
/// GET and collects everything the server writes on a thread of its own
/// until `close()` (or the destructor). Tests look at what arrived with
/// `text()`, `count()` and `eventually(...)`.
class sse_client {
 public:
  sse_client(uint16_t port, const std::string& path);
  ~sse_client();

  sse_client(const sse_client&) = delete;
  sse_client& operator=(const sse_client&) = delete;

  /// True once the response headers arrived with status 200.
  bool open() const;

  /// Everything received so far (headers and chunk framing included; each
  /// event frame arrives whole inside one chunk).
  std::string text() const;

  /// Occurrences of `needle` in what arrived so far.
  size_t count(const std::string& needle) const;

  /// Stops reading and closes the socket.
  void close();

 private:
  void run();

  int fd_ = -1;
  std::atomic<bool> stop_{false};
  mutable std::mutex mtx_;
  std::string data_;
  std::thread reader_;
};

} // namespace butlers::test
