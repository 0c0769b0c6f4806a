#pragma once

// A scripted HTTP/1.1 server on 127.0.0.1 for client tests: keep-alive,
// optional TLS, one thread per connection, every request recorded with the
// connection it came on. A handler decides each reply: bytes to send (the
// connection stays open unless told otherwise), a stall (nothing more is
// read or sent until the server is destroyed) or an immediate close.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <openssl/ssl.h>

namespace butlers::test {

/// One request as the server read it.
struct seen_request {
  /// 1 for the first accepted connection, 2 for the next, ...
  size_t connection = 0;
  /// "GET /x HTTP/1.1" (a proxy sees the absolute URI here).
  std::string request_line;
  std::string method;
  std::string target;
  /// Names lower-cased, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first header named `lower_name`, or "<absent>".
  std::string header(const std::string& lower_name) const;
};

/// What the server does after reading a request.
struct server_reply {
  enum kind_t {
    /// Send `raw`; close afterwards when `close` is set.
    send,
    /// Keep the connection open and silent until the server is destroyed.
    stall,
    /// Close the connection without answering.
    drop,
  };
  kind_t kind = send;
  std::string raw;
  bool close = false;
  /// Sent in pieces of this size with a flush between them (0: at once).
  size_t piece = 0;
};

/// "HTTP/1.1 <status> X\r\nContent-Length: ..\r\n<extra>\r\n<body>".
server_reply http_reply(int status, const std::string& body = "",
                        const std::string& extra_headers = "");

class scripted_http_server {
 public:
  using handler = std::function<server_reply(const seen_request&)>;

  /// Listens on 127.0.0.1 (an ephemeral port). With `tls` (a server
  /// context with certificate and key), every connection speaks TLS.
  explicit scripted_http_server(handler h, SSL_CTX* tls = nullptr);
  ~scripted_http_server();
  scripted_http_server(const scripted_http_server&) = delete;
  scripted_http_server& operator=(const scripted_http_server&) = delete;

  uint16_t port() const {
    return port_;
  }

  /// "http[s]://127.0.0.1:<port><path>".
  std::string url(const std::string& path = "/") const;

  /// Connections accepted so far.
  size_t connections() const;

  /// Requests read so far, in order.
  std::vector<seen_request> requests() const;

 private:
  struct connection;
  void accept_loop();
  void serve(std::shared_ptr<connection> c);

  handler handler_;
  SSL_CTX* tls_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mtx_;
  std::condition_variable stopped_cv_;
  bool stopping_ = false;
  size_t accepted_ = 0;
  std::vector<seen_request> requests_;
  std::vector<std::shared_ptr<connection>> live_;
  std::vector<std::thread> workers_;
};

// -- a test PKI
// ----------------------------------------------------------------

/// A CA and a server certificate it signed (EC P-256, valid for an hour),
/// made in memory with OpenSSL's API; the CA certificate is also written to
/// `ca_file` for clients that want a path.
class test_pki {
 public:
  /// Writes the CA's PEM under `dir`. `san`: the server certificate's
  /// subjectAltName.
  explicit test_pki(const std::string& dir,
                    const std::string& san = "IP:127.0.0.1,DNS:localhost");
  ~test_pki();
  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;

  /// A TLS server context with the server certificate and key.
  SSL_CTX* server_context() const {
    return server_ctx_;
  }

  /// Path of the CA certificate (PEM).
  const std::string& ca_file() const {
    return ca_file_;
  }

 private:
  SSL_CTX* server_ctx_ = nullptr;
  std::string ca_file_;
};

} // namespace butlers::test
