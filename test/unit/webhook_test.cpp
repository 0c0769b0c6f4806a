#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/webhook.hpp"

using namespace butlers;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

// -- a scripted HTTP receiver on 127.0.0.1 ------------------------------------

/// One request as the receiver saw it.
struct recorded_request {
  std::string request_line;
  /// Names lower-cased, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  std::string header(const std::string& name) const {
    for (auto& [k, v] : headers)
      if (k == name)
        return v;
    return "<absent>";
  }
};

/// What the receiver does with the n-th connection, after reading its
/// request in full.
struct action {
  enum kind_t {
    /// Send `raw`, then close.
    reply,
    /// Keep the connection open and silent until the receiver is destroyed.
    hang,
  };
  kind_t kind = reply;
  std::string raw;
};

std::string reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Whatever";
  }
}

action respond(int status, const std::string& body = "",
               const std::string& extra_headers = "") {
  return {action::reply,
          "HTTP/1.1 " + std::to_string(status) + " " + reason(status)
            + "\r\nContent-Length: " + std::to_string(body.size())
            + "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body};
}

action raw(std::string bytes) {
  return {action::reply, std::move(bytes)};
}

action hang() {
  return {action::hang, {}};
}

/// Accepts connections one at a time, reads each request (Content-Length
/// framed), records it, and answers per the script; connections beyond the
/// script get its last action.
class test_receiver {
 public:
  explicit test_receiver(std::vector<action> script)
    : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0
        || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
        || ::listen(listen_fd_, 16) != 0
        || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len)
             != 0
        || ::pipe2(wake_, O_CLOEXEC) != 0)
      ADD_FAILURE() << "test receiver setup failed";
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] {
      run();
    }};
  }

  ~test_receiver() {
    char c = 'x';
    if (::write(wake_[1], &c, 1) != 1)
      ADD_FAILURE() << "cannot wake the receiver";
    thread_.join();
    for (int fd : held_)
      ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  http_url url(const std::string& target = "/hook") const {
    http_url u;
    u.host = "127.0.0.1";
    u.port = port_;
    u.target = target;
    return u;
  }

  /// Called on the receiver thread after a request is recorded, before the
  /// reply goes out.
  void on_request(std::function<void(size_t n)> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    on_request_ = std::move(f);
  }

  /// Waits (bounded) until `n` requests were recorded, then returns all.
  std::vector<recorded_request> requests(size_t n) {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait_for(guard, 5s, [&] {
      return requests_.size() >= n;
    });
    return requests_;
  }

 private:
  /// Waits for `fd` or the wake pipe; false when woken or after 5 s.
  bool wait_readable(int fd) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    return ::poll(p, 2, 5000) > 0 && p[1].revents == 0;
  }

  void run() {
    for (size_t n = 0;; ++n) {
      if (!wait_readable(listen_fd_))
        return;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0)
        continue;
      recorded_request req;
      if (!read_request(fd, req)) {
        ::close(fd);
        continue;
      }
      std::function<void(size_t)> hook;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        requests_.push_back(req);
        hook = on_request_;
      }
      cv_.notify_all();
      if (hook)
        hook(n + 1);
      const action& a = script_[std::min(n, script_.size() - 1)];
      if (a.kind == action::hang) {
        held_.push_back(fd);
        continue;
      }
      size_t off = 0;
      while (off < a.raw.size()) {
        auto k = ::send(fd, a.raw.data() + off, a.raw.size() - off,
                        MSG_NOSIGNAL);
        if (k <= 0)
          break;
        off += static_cast<size_t>(k);
      }
      ::close(fd);
    }
  }

  bool read_request(int fd, recorded_request& req) {
    std::string buf;
    char chunk[8192];
    size_t head_end = std::string::npos;
    size_t content_length = 0;
    for (;;) {
      if (head_end == std::string::npos) {
        head_end = buf.find("\r\n\r\n");
        if (head_end != std::string::npos)
          parse_head(buf.substr(0, head_end), req, content_length);
      }
      if (head_end != std::string::npos
          && buf.size() >= head_end + 4 + content_length) {
        req.body = buf.substr(head_end + 4, content_length);
        return true;
      }
      if (!wait_readable(fd))
        return false;
      auto k = ::recv(fd, chunk, sizeof(chunk), 0);
      if (k <= 0)
        return false;
      buf.append(chunk, static_cast<size_t>(k));
    }
  }

  static void parse_head(const std::string& head, recorded_request& req,
                         size_t& content_length) {
    size_t pos = head.find("\r\n");
    req.request_line = head.substr(0, pos);
    while (pos != std::string::npos) {
      size_t start = pos + 2;
      pos = head.find("\r\n", start);
      auto line = head.substr(start, pos == std::string::npos
                                       ? std::string::npos
                                       : pos - start);
      auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) {
                       return std::tolower(c);
                     });
      std::string value = line.substr(colon + 2);
      if (name == "content-length")
        content_length = std::stoul(value);
      req.headers.emplace_back(name, value);
    }
  }

  std::vector<action> script_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
  /// Connections kept open by `hang`; owned by the receiver thread until it
  /// has been joined.
  std::vector<int> held_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<recorded_request> requests_;
  std::function<void(size_t)> on_request_;
};

/// A loopback port that refuses connections: bound, never listening, and
/// held so no one else takes it during the test.
class refusing_port {
 public:
  refusing_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
        || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      ADD_FAILURE() << "cannot reserve a port";
    port_ = ntohs(addr.sin_port);
  }
  ~refusing_port() {
    ::close(fd_);
  }
  uint16_t port() const {
    return port_;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Fast retries: the backoff never dominates a test.
webhook_policy quick_policy(uint32_t retries) {
  webhook_policy p;
  p.timeout = 300ms;
  p.retries = retries;
  p.backoff_base = 1ms;
  p.backoff_cap = 5ms;
  return p;
}

int64_t ms_since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start)
    .count();
}

} // namespace

// -- URL parsing --------------------------------------------------------------

TEST(http_url_parse, defaults_port_and_target) {
  std::string error;
  auto u = parse_http_url("http://example.org", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "example.org");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->str(), "http://example.org/");
}

TEST(http_url_parse, accepts_https_with_its_default_port) {
  std::string error;
  auto u = parse_http_url("HTTPS://api.example.org/bot1/send?x=1#f", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/bot1/send?x=1");
  EXPECT_EQ(u->str(), "https://api.example.org/bot1/send?x=1");
  u = parse_http_url("https://[::1]:8443", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->str(), "https://[::1]:8443/");
}

TEST(http_url_parse, keeps_path_and_query_drops_fragment) {
  std::string error;
  auto u = parse_http_url("http://10.1.2.3:8080/a/b?x=1&y=%20#frag", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->host, "10.1.2.3");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/a/b?x=1&y=%20");
  u = parse_http_url("HTTP://Host-1.example:1?q", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->host, "Host-1.example");
  EXPECT_EQ(u->port, 1);
  EXPECT_EQ(u->target, "/?q");
  u = parse_http_url("http://[::1]:9000/hook", &error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->target, "/hook");
}

TEST(http_url_parse, rejects_bad_urls_with_reasons) {
  auto error_of = [](const char* url) {
    std::string error;
    EXPECT_FALSE(parse_http_url(url, &error)) << url;
    return error;
  };
  EXPECT_TRUE(
    contains(error_of("ftp://example.org"), "unsupported scheme 'ftp'"));
  EXPECT_TRUE(contains(error_of("example.org/x"), "has no scheme"));
  EXPECT_TRUE(contains(error_of("http:///path"), "has no host"));
  EXPECT_TRUE(contains(error_of("http://:8080/path"), "has no host"));
  EXPECT_EQ(error_of("http://h:0/"), "port 0 is out of range 1-65535");
  EXPECT_EQ(error_of("http://h:65536/"), "port 65536 is out of range 1-65535");
  EXPECT_EQ(error_of("http://h:9999999/"),
            "port 9999999 is out of range 1-65535");
  EXPECT_EQ(error_of("http://h:80x/"), "bad port '80x'");
  EXPECT_EQ(error_of("http://h:/"), "bad port ''");
  EXPECT_TRUE(contains(error_of("http://u:p@h/"), "user info"));
  EXPECT_TRUE(contains(error_of("http://h/a b"), "space or control"));
  EXPECT_TRUE(contains(error_of("http://h/a\r\nX: y"), "space or control"));
  EXPECT_TRUE(contains(error_of("http://::1/"), "need brackets"));
  EXPECT_TRUE(contains(error_of("http://[::1/"), "unterminated"));
  EXPECT_TRUE(contains(error_of("http://h%41/"), "bad character '%'"));
  EXPECT_FALSE(parse_http_url("nope", nullptr));
}

// -- delivery with retries ----------------------------------------------------

TEST(deliver_webhook, delivers_on_2xx_with_key_and_token) {
  test_receiver rx{{respond(200)}};
  auto policy = quick_policy(3);
  policy.token = "s3cret";
  auto out = deliver_webhook(rx.url(), R"({"a":1})", "key-42", policy);
  EXPECT_TRUE(out.delivered) << out.error;
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.attempts, 1u);
  EXPECT_FALSE(out.retryable);
  EXPECT_TRUE(out.error.empty());
  auto reqs = rx.requests(1);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].header("idempotency-key"), "key-42");
  EXPECT_EQ(reqs[0].header("authorization"), "Bearer s3cret");
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  EXPECT_EQ(reqs[0].request_line, "POST /hook HTTP/1.1");
  EXPECT_EQ(reqs[0].body, R"({"a":1})");
}

TEST(deliver_webhook, retries_500_then_succeeds_with_the_same_key) {
  test_receiver rx{{respond(500, "oops"), respond(200)}};
  auto out = deliver_webhook(rx.url(), "{}", "key-7", quick_policy(3));
  EXPECT_TRUE(out.delivered) << out.error;
  EXPECT_EQ(out.attempts, 2u);
  auto reqs = rx.requests(2);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].header("idempotency-key"), "key-7");
  EXPECT_EQ(reqs[1].header("idempotency-key"), "key-7");
}

TEST(deliver_webhook, gives_up_after_retries) {
  test_receiver rx{{respond(503, "down")}};
  auto out = deliver_webhook(rx.url(), "{}", "k", quick_policy(2));
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 3u);
  EXPECT_EQ(out.status, 503);
  EXPECT_TRUE(out.retryable);
  EXPECT_EQ(out.error, "HTTP 503: down");
  EXPECT_EQ(rx.requests(3).size(), 3u);
}

TEST(deliver_webhook, does_not_retry_400) {
  test_receiver rx{{respond(400, "bad field"), respond(200)}};
  auto out = deliver_webhook(rx.url(), "{}", "k", quick_policy(3));
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 1u);
  EXPECT_EQ(out.status, 400);
  EXPECT_FALSE(out.retryable);
  EXPECT_EQ(out.error, "HTTP 400: bad field");
  EXPECT_EQ(rx.requests(1).size(), 1u);
}

TEST(deliver_webhook, classifies_statuses) {
  struct expectation {
    int status;
    uint32_t attempts; // with one retry allowed
  };
  for (auto [status, attempts] :
       {expectation{401, 1}, expectation{404, 1}, expectation{422, 1},
        expectation{301, 1}, expectation{408, 2}, expectation{429, 2},
        expectation{502, 2}}) {
    test_receiver rx{{respond(status)}};
    auto out = deliver_webhook(rx.url(), "{}", "k", quick_policy(1));
    EXPECT_EQ(out.attempts, attempts) << status;
    EXPECT_EQ(out.retryable, attempts > 1) << status;
    EXPECT_EQ(out.status, status);
  }
}

TEST(deliver_webhook, honours_retry_after_capped_by_backoff_cap) {
  test_receiver rx{{respond(429, "", "Retry-After: 1\r\n"), respond(200)}};
  auto policy = quick_policy(3);
  policy.backoff_base = 1ms;
  policy.backoff_cap = 150ms;
  auto start = steady::now();
  auto out = deliver_webhook(rx.url(), "{}", "k", policy);
  auto took = ms_since(start);
  EXPECT_TRUE(out.delivered) << out.error;
  EXPECT_EQ(out.attempts, 2u);
  // Jitter alone would wait at most 1 ms; Retry-After: 1 s, capped, 150 ms.
  EXPECT_GE(took, 150);
  EXPECT_LT(took, 1000);
}

TEST(deliver_webhook, retries_a_connection_closed_mid_response) {
  test_receiver rx{{raw("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\npartial"),
                    respond(200)}};
  auto out = deliver_webhook(rx.url(), "{}", "k", quick_policy(3));
  EXPECT_TRUE(out.delivered) << out.error;
  EXPECT_EQ(out.attempts, 2u);
}

TEST(deliver_webhook, times_out_and_retries_a_silent_server) {
  test_receiver rx{{hang()}};
  auto policy = quick_policy(1);
  policy.timeout = 150ms;
  auto start = steady::now();
  auto out = deliver_webhook(rx.url(), "{}", "k", policy);
  auto took = ms_since(start);
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 2u);
  EXPECT_TRUE(out.retryable);
  EXPECT_EQ(out.status, 0);
  EXPECT_TRUE(contains(out.error, "timed out after 15")) << out.error;
  EXPECT_GE(took, 2 * (150 - 5)); // curl rounds its clock to milliseconds
  EXPECT_LT(took, 2 * 150 + 5 + 300);
  EXPECT_EQ(rx.requests(2).size(), 2u);
}

TEST(deliver_webhook, retries_connection_refused) {
  refusing_port closed;
  http_url url;
  url.host = "127.0.0.1";
  url.port = closed.port();
  auto out = deliver_webhook(url, "{}", "k", quick_policy(2));
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 3u);
  EXPECT_TRUE(out.retryable);
  EXPECT_TRUE(contains(out.error, "Failed to connect to 127.0.0.1 port "
                                    + std::to_string(closed.port())))
    << out.error;
}

TEST(deliver_webhook, cancel_before_start_makes_no_attempt) {
  test_receiver rx{{respond(200)}};
  std::atomic<bool> cancel{true};
  auto out = deliver_webhook(rx.url(), "{}", "k", quick_policy(3), &cancel);
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 0u);
  EXPECT_EQ(out.error, "cancelled");
  EXPECT_TRUE(out.retryable);
}

TEST(deliver_webhook, cancel_interrupts_the_attempt_or_the_backoff_sleep) {
  test_receiver rx{{respond(500)}};
  std::atomic<bool> cancel{false};
  // Raised while the first attempt is in flight: the attempt sees it, or
  // the backoff that follows (up to 10 s) does, whichever looks first.
  rx.on_request([&](size_t) {
    cancel = true;
  });
  auto policy = quick_policy(3);
  policy.backoff_base = 10s;
  policy.backoff_cap = 10s;
  auto start = steady::now();
  auto out = deliver_webhook(rx.url(), "{}", "k", policy, &cancel);
  auto took = ms_since(start);
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 1u);
  EXPECT_TRUE(out.error == "cancelled"
              || out.error == "cancelled (last error: HTTP 500)")
    << out.error;
  EXPECT_TRUE(out.retryable);
  EXPECT_LT(took, 300);
  EXPECT_EQ(rx.requests(1).size(), 1u);
}

TEST(deliver_webhook, cancel_ends_an_attempt_that_waits_for_a_silent_server) {
  test_receiver rx{{hang()}};
  std::atomic<bool> cancel{false};
  rx.on_request([&](size_t) {
    cancel = true;
  });
  auto policy = quick_policy(3);
  policy.timeout = 10s;
  auto start = steady::now();
  auto out = deliver_webhook(rx.url(), "{}", "k", policy, &cancel);
  auto took = ms_since(start);
  EXPECT_FALSE(out.delivered);
  EXPECT_EQ(out.attempts, 1u);
  EXPECT_EQ(out.error, "cancelled");
  EXPECT_TRUE(out.retryable);
  EXPECT_LT(took, 500);
}
