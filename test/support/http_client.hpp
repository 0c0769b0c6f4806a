#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace butlers::test {

/// Extra request header lines, name and value, sent in order.
using http_headers = std::vector<std::pair<std::string, std::string>>;

/// A parsed HTTP/1.1 response.
struct http_response {
  /// Status code; 0 when the connection failed.
  int status = 0;
  /// Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
  /// Why status is 0.
  std::string error;
};

/// A deliberately small blocking HTTP/1.1 client over loopback TCP for
/// tests: one request per connection (`Connection: close`), every socket
/// operation bounded by `timeout`.
class http_client {
 public:
  http_client(std::string host, uint16_t port,
              std::chrono::milliseconds timeout = std::chrono::seconds{10});

  /// Sets the bearer token sent with every request (empty: none).
  void token(std::string value) {
    token_ = std::move(value);
  }

  http_response get(const std::string& path) const;

  /// POSTs `body`; `headers` go after the token's Authorization (a
  /// client that brings its own leaves `token` empty).
  http_response post(const std::string& path, const std::string& body,
                     const std::string& content_type = "application/json",
                     const http_headers& headers = {}) const;

  /// Sends `raw` bytes as-is and reads the response (for malformed input).
  http_response raw(const std::string& raw) const;

 private:
  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::string token_;
};

} // namespace butlers::test
