#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace butlers {

// -- requests and responses ---------------------------------------------------

/// Why a transfer produced no complete response.
enum class http_failure {
  /// A complete response arrived (whatever its status).
  none,
  /// No connection: name resolution, connection refused, unreachable, a
  /// proxy that could not be reached. Nothing was sent.
  connect,
  /// `timeout` or `connect_timeout` ran out.
  timeout,
  /// TLS handshake or certificate verification (peer or host name) failed.
  tls,
  /// The body exceeded `max_response_bytes`.
  too_large,
  /// `cancel` was set, or `on_data` returned false.
  cancelled,
  /// Connected, but the exchange broke: the peer closed or reset the
  /// connection, sent nothing, or sent something that is not HTTP. The
  /// request may have been processed.
  protocol,
  /// Anything else: a malformed URL, an unsupported scheme, out of memory.
  other,
};

/// Lower-case name of `f` ("none", "connect", ...), for logs and metrics.
const char* to_string(http_failure f);

/// One request. Redirects are not followed; the caller sees the 3xx.
struct http_request {
  /// GET, POST, PUT, DELETE, ... (any verb curl takes).
  std::string method = "GET";
  /// `http://` or `https://`.
  std::string url;
  /// Sent in order; a value with CR or LF makes the request fail (other).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Sent when non-empty or when `method` is POST (then possibly empty).
  std::string body;
  /// Bound on the whole transfer, from connect to the last byte.
  std::chrono::milliseconds timeout{30000};
  /// Bound on connecting (TCP and TLS handshake).
  std::chrono::milliseconds connect_timeout{10000};
  /// A bigger response body fails the transfer with too_large.
  size_t max_response_bytes = size_t{1} << 20;
  /// When set, each body chunk goes here instead of into the response's
  /// `body` (streaming, e.g. SSE); returning false aborts the transfer
  /// (failure = cancelled). `max_response_bytes` does not apply then.
  std::function<bool(std::string_view)> on_data;
};

/// What came back.
struct http_response {
  /// none: a complete response arrived; `status`, `headers` and `body` are
  /// valid. Otherwise they hold whatever arrived before the failure.
  http_failure failure = http_failure::none;
  /// Status code of the final response; 0 when none arrived.
  int status = 0;
  /// Headers of the final response (interim 1xx dropped), in order, names
  /// lower-cased, values without surrounding whitespace.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The body (empty when the request had `on_data`).
  std::string body;
  /// libcurl's description when failure != none.
  std::string error;

  /// The first header named `lower_name` (lower case), or null.
  const std::string* header(std::string_view lower_name) const;

  /// `Retry-After` in seconds (delta form), when present and valid; the
  /// HTTP-date form yields nullopt.
  std::optional<std::chrono::seconds> retry_after() const;
};

// -- the client
// -----------------------------------------------------------------

/// How an http_client connects.
struct http_client_options {
  /// CA bundle (PEM) trusted instead of the system's (tests use their
  /// own CA); "" = the system's.
  std::string ca_file;
  /// Certificate and host name checks. Only tests turn it off; no config
  /// key does.
  bool verify_peer = true;
  /// Idle connections kept for reuse at most.
  size_t max_idle_connections = 16;
  /// The User-Agent header.
  std::string user_agent = "butlers";
};

/// Outbound HTTP(S) on libcurl. Connections (keep-alive), DNS answers and
/// TLS sessions are kept and reused across calls and threads. The proxy
/// environment variables (`http_proxy`, `https_proxy`, `HTTPS_PROXY`,
/// `all_proxy`, `no_proxy`, ...) apply as libcurl defines them.
class http_client {
 public:
  using options = http_client_options;

  explicit http_client(options o = {});
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Blocking. Only from threads that may block (runtime/blocking_pool
  /// jobs, detached actors, dedicated threads), never from a cooperatively
  /// scheduled actor. Thread-safe. `cancel`, when set, is polled during the
  /// transfer (every 50 ms at least; failure = cancelled). Never throws.
  http_response perform(const http_request& req,
                        const std::atomic<bool>* cancel = nullptr) const;

  /// Connections opened so far (new TCP connections, not reuses); tests
  /// check reuse with it.
  size_t connections_opened() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The process-wide client (one connection cache for every caller); its
/// `ca_file` is the environment variable BUTLERS_CA_FILE when set.
http_client& shared_http_client();

} // namespace butlers
