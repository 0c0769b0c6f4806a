// runtime/http_client against real HTTP(S) servers on loopback
// (test/support/scripted_http_server): requests and responses, timeouts,
// cancellation, size caps, connection reuse, TLS with a test CA, and the
// proxy environment variables.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/http_client.hpp"
#include "test/support/scripted_http_server.hpp"
#include "test/support/temp_dir.hpp"

using namespace butlers;
using namespace butlers::test;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

int64_t ms_since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start)
    .count();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

http_request get(const std::string& url) {
  http_request req;
  req.url = url;
  req.timeout = 5s;
  return req;
}

using butlers::test::temp_dir;

/// Sets (or unsets, with nullopt) an environment variable for one scope
/// and restores it afterwards. Tests run one at a time, so nothing reads
/// the environment meanwhile except the code under test.
class scoped_env {
 public:
  scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A loopback port nothing listens on (bound, held, never listening).
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

} // namespace

// -- requests and responses
// -----------------------------------------------------

TEST(http_client, gets_status_headers_and_body) {
  scripted_http_server server{[](const seen_request&) {
    return http_reply(200, "hello",
                      "X-Mixed-Case:   spaced value  \r\nSet-Cookie: a=1\r\n"
                      "Set-Cookie: b=2\r\n");
  }};
  http_client client;
  auto r = client.perform(get(server.url("/path?q=1")));
  ASSERT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.error.empty());
  ASSERT_NE(r.header("x-mixed-case"), nullptr);
  EXPECT_EQ(*r.header("x-mixed-case"), "spaced value");
  EXPECT_EQ(*r.header("content-length"), "5");
  EXPECT_EQ(*r.header("set-cookie"), "a=1");    // the first of two
  EXPECT_EQ(r.header("X-Mixed-Case"), nullptr); // names are lower case
  EXPECT_EQ(r.header("absent"), nullptr);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request_line, "GET /path?q=1 HTTP/1.1");
  EXPECT_EQ(reqs[0].header("host"),
            "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(reqs[0].header("user-agent"), "butlers");
  EXPECT_EQ(reqs[0].body, "");
}

TEST(http_client, posts_body_and_headers_intact) {
  scripted_http_server server{[](const seen_request& req) {
    return http_reply(201, "got " + std::to_string(req.body.size()));
  }};
  http_client client;
  http_request req;
  req.method = "POST";
  req.url = server.url("/hook");
  // Larger than curl's 1 MiB Expect: 100-continue threshold.
  req.body = R"({"pad":")" + std::string(1500000, 'p') + "\"}";
  req.headers = {{"Content-Type", "application/json"},
                 {"Idempotency-Key", "k-1"},
                 {"X-Empty", ""}};
  auto r = client.perform(req);
  ASSERT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "got " + std::to_string(req.body.size()));
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request_line, "POST /hook HTTP/1.1");
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  EXPECT_EQ(reqs[0].header("content-length"), std::to_string(req.body.size()));
  EXPECT_EQ(reqs[0].header("idempotency-key"), "k-1");
  EXPECT_EQ(reqs[0].header("x-empty"), "");
  EXPECT_EQ(reqs[0].header("expect"), "<absent>");
  EXPECT_EQ(reqs[0].body, req.body);
}

TEST(http_client, sends_other_verbs_and_an_empty_post) {
  scripted_http_server server{[](const seen_request&) {
    return http_reply(204);
  }};
  http_client client;
  for (auto [method, body] :
       {std::pair<std::string, std::string>{"PUT", "{\"x\":1}"},
        {"DELETE", ""},
        {"PATCH", "p"},
        {"POST", ""}}) {
    http_request req;
    req.method = method;
    req.url = server.url("/v");
    req.body = body;
    auto r = client.perform(req);
    ASSERT_EQ(r.failure, http_failure::none) << method << ": " << r.error;
    EXPECT_EQ(r.status, 204) << method;
  }
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].request_line, "PUT /v HTTP/1.1");
  EXPECT_EQ(reqs[0].body, "{\"x\":1}");
  EXPECT_EQ(reqs[1].request_line, "DELETE /v HTTP/1.1");
  EXPECT_EQ(reqs[1].header("content-length"), "<absent>");
  EXPECT_EQ(reqs[2].request_line, "PATCH /v HTTP/1.1");
  EXPECT_EQ(reqs[2].body, "p");
  EXPECT_EQ(reqs[3].request_line, "POST /v HTTP/1.1");
  EXPECT_EQ(reqs[3].header("content-length"), "0");
}

TEST(http_client, error_statuses_are_responses_not_failures) {
  scripted_http_server server{[](const seen_request&) {
    return http_reply(503, "down", "Retry-After: 120\r\n");
  }};
  http_client client;
  auto r = client.perform(get(server.url()));
  EXPECT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "down");
  EXPECT_EQ(r.retry_after(), std::chrono::seconds{120});
}

TEST(http_client, drops_interim_responses_and_reads_chunked_bodies) {
  scripted_http_server server{[](const seen_request&) {
    server_reply r;
    r.raw = "HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
            "X-Final: 1\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n";
    return r;
  }};
  http_client client;
  auto r = client.perform(get(server.url()));
  ASSERT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello, world");
  EXPECT_EQ(r.header("x-interim"), nullptr);
  EXPECT_NE(r.header("x-final"), nullptr);
}

TEST(http_client, parses_retry_after_seconds_only) {
  http_response r;
  EXPECT_EQ(r.retry_after(), std::nullopt);
  r.headers = {{"retry-after", "0"}};
  EXPECT_EQ(r.retry_after(), std::chrono::seconds{0});
  r.headers = {{"retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"}};
  EXPECT_EQ(r.retry_after(), std::nullopt);
  r.headers = {{"retry-after", "-1"}};
  EXPECT_EQ(r.retry_after(), std::nullopt);
  r.headers = {{"retry-after", "9999999999"}};
  EXPECT_EQ(r.retry_after(), std::nullopt);
}

TEST(http_client, refuses_header_injection_without_sending) {
  scripted_http_server server{[](const seen_request&) {
    return http_reply(200);
  }};
  http_client client;
  auto req = get(server.url());
  req.headers = {{"X-A", "v\r\nX-Evil: 1"}};
  auto r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::other);
  EXPECT_EQ(r.error, "bad request header 'X-A'");
  req.headers = {{"X-B:", "v"}};
  EXPECT_EQ(client.perform(req).failure, http_failure::other);
  EXPECT_EQ(server.connections(), 0u);
}

TEST(http_client, classifies_connection_failures) {
  http_client client;
  refusing_port closed;
  auto r = client.perform(
    get("http://127.0.0.1:" + std::to_string(closed.port()) + "/"));
  EXPECT_EQ(r.failure, http_failure::connect);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.error, "Failed to connect")) << r.error;
  EXPECT_EQ(client.perform(get("ftp://127.0.0.1/x")).failure,
            http_failure::other);
  EXPECT_EQ(client.perform(get("not a url")).failure, http_failure::other);
}

TEST(http_client, reports_a_connection_closed_mid_response_as_protocol) {
  scripted_http_server server{[](const seen_request&) {
    server_reply r;
    r.raw = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some";
    r.close = true;
    return r;
  }};
  http_client client;
  auto r = client.perform(get(server.url()));
  EXPECT_EQ(r.failure, http_failure::protocol);
  EXPECT_EQ(r.body, "only some");
  EXPECT_FALSE(r.error.empty());
}

// -- bounds
// ---------------------------------------------------------------------

TEST(http_client, times_out_on_a_server_that_stalls) {
  scripted_http_server server{[](const seen_request&) {
    server_reply r;
    r.kind = server_reply::stall;
    return r;
  }};
  http_client client;
  auto req = get(server.url());
  req.timeout = 200ms;
  auto start = steady::now();
  auto r = client.perform(req);
  auto took = ms_since(start);
  EXPECT_EQ(r.failure, http_failure::timeout);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.error, "timed out")) << r.error;
  EXPECT_GE(took, 200 - 5); // curl rounds its clock to milliseconds
  EXPECT_LT(took, 200 + 500);
}

TEST(http_client, times_out_on_a_body_that_stops_midway) {
  scripted_http_server server{[](const seen_request&) {
    // Headers and half the body, then silence.
    auto r = http_reply(200, std::string(10, 'x'));
    r.raw.resize(r.raw.size() - 5);
    server_reply first = r;
    return first;
  }};
  http_client client;
  auto req = get(server.url());
  req.timeout = 200ms;
  auto r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::timeout);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "xxxxx");
}

TEST(http_client, cancel_ends_a_transfer_promptly) {
  std::atomic<bool> cancel{false};
  scripted_http_server server{[&](const seen_request&) {
    cancel = true;
    server_reply r;
    r.kind = server_reply::stall;
    return r;
  }};
  http_client client;
  auto req = get(server.url());
  req.timeout = 10s;
  auto start = steady::now();
  auto r = client.perform(req, &cancel);
  auto took = ms_since(start);
  EXPECT_EQ(r.failure, http_failure::cancelled);
  EXPECT_LT(took, 500);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(http_client, a_cancelled_flag_sends_nothing) {
  scripted_http_server server{[](const seen_request&) {
    return http_reply(200);
  }};
  http_client client;
  std::atomic<bool> cancel{true};
  auto r = client.perform(get(server.url()), &cancel);
  EXPECT_EQ(r.failure, http_failure::cancelled);
  EXPECT_TRUE(server.requests().empty());
}

TEST(http_client, caps_the_body_with_and_without_content_length) {
  scripted_http_server server{[](const seen_request& req) {
    if (req.target == "/chunked") {
      server_reply r;
      r.raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
      for (int i = 0; i < 20; ++i)
        r.raw += "64\r\n" + std::string(100, 'c') + "\r\n";
      r.raw += "0\r\n\r\n";
      return r;
    }
    return http_reply(200,
                      std::string(req.target == "/exact" ? 1000 : 2000, 'b'));
  }};
  http_client client;
  auto req = get(server.url("/declared"));
  req.max_response_bytes = 1000;
  auto r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::too_large);
  EXPECT_TRUE(contains(r.error, "1000")) << r.error;
  req.url = server.url("/chunked");
  r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::too_large);
  EXPECT_LE(r.body.size(), 1000u);
  req.url = server.url("/exact");
  r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.body.size(), 1000u);
}

TEST(http_client, streams_chunks_to_on_data_and_stops_when_told) {
  scripted_http_server server{[](const seen_request&) {
    server_reply r;
    r.raw = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) {
      std::string event = "data: " + std::to_string(i) + "\n\n";
      r.raw += "9\r\n" + event + "\r\n"; // 9 bytes each
    }
    r.raw += "0\r\n\r\n";
    r.piece = 14; // about one chunk per write
    return r;
  }};
  http_client client;
  auto req = get(server.url("/events"));
  std::string streamed;
  req.max_response_bytes = 1; // does not apply to streams
  req.on_data = [&](std::string_view chunk) {
    streamed.append(chunk);
    return true;
  };
  auto r = client.perform(req);
  ASSERT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(streamed,
            "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  EXPECT_TRUE(r.body.empty());
  streamed.clear();
  req.on_data = [&](std::string_view chunk) {
    streamed.append(chunk);
    return streamed.find("data: 1") == std::string::npos;
  };
  r = client.perform(req);
  EXPECT_EQ(r.failure, http_failure::cancelled);
  EXPECT_TRUE(contains(streamed, "data: 1"));
  EXPECT_FALSE(contains(streamed, "data: 4"));
}

// -- connection reuse ---------------------------------------------------------

TEST(http_client, reuses_one_connection_for_sequential_requests) {
  scripted_http_server server{[](const seen_request& req) {
    return http_reply(200, req.target);
  }};
  http_client client;
  for (int i = 0; i < 10; ++i) {
    auto r = client.perform(get(server.url("/" + std::to_string(i))));
    ASSERT_EQ(r.failure, http_failure::none) << r.error;
    EXPECT_EQ(r.body, "/" + std::to_string(i));
  }
  // From other threads, one after the other, it is still the same one.
  for (int i = 0; i < 3; ++i)
    std::async(std::launch::async, [&] {
      EXPECT_EQ(client.perform(get(server.url())).status, 200);
    }).wait();
  EXPECT_EQ(server.connections(), 1u);
  EXPECT_EQ(client.connections_opened(), 1u);
  for (auto& req : server.requests())
    EXPECT_EQ(req.connection, 1u);
}

TEST(http_client, reconnects_when_the_server_closes) {
  scripted_http_server server{[](const seen_request&) {
    auto r = http_reply(200, "bye", "Connection: close\r\n");
    r.close = true;
    return r;
  }};
  http_client client;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(client.perform(get(server.url())).status, 200);
  EXPECT_EQ(server.connections(), 3u);
  EXPECT_EQ(client.connections_opened(), 3u);
}

TEST(http_client, keeps_at_most_max_idle_connections) {
  auto ok = [](const seen_request&) {
    return http_reply(200);
  };
  scripted_http_server a{ok};
  scripted_http_server b{ok};
  http_client_options o;
  o.max_idle_connections = 1;
  http_client client{o};
  // a, b, a: keeping b's connection closed a's.
  for (auto* s : {&a, &b, &a})
    EXPECT_EQ(client.perform(get(s->url())).status, 200);
  EXPECT_EQ(a.connections(), 2u);
  EXPECT_EQ(b.connections(), 1u);
  o.max_idle_connections = 2;
  http_client roomy{o};
  for (auto* s : {&a, &b, &a, &b})
    EXPECT_EQ(roomy.perform(get(s->url())).status, 200);
  EXPECT_EQ(a.connections(), 3u);
  EXPECT_EQ(b.connections(), 2u);
}

TEST(http_client, is_safe_to_share_between_threads) {
  scripted_http_server server{[](const seen_request& req) {
    return http_reply(200, req.target);
  }};
  http_client client;
  constexpr int threads = 6;
  constexpr int each = 20;
  std::vector<std::future<int>> done;
  done.reserve(threads);
  for (int t = 0; t < threads; ++t)
    done.push_back(std::async(std::launch::async, [&, t] {
      int good = 0;
      for (int i = 0; i < each; ++i) {
        auto target = "/" + std::to_string(t) + "/" + std::to_string(i);
        auto r = client.perform(get(server.url(target)));
        good += r.failure == http_failure::none && r.body == target;
      }
      return good;
    }));
  for (auto& f : done)
    EXPECT_EQ(f.get(), each);
  EXPECT_EQ(server.requests().size(), size_t{threads * each});
  // Concurrent callers need their own connections, but not one per call.
  EXPECT_LE(server.connections(), size_t{threads});
  EXPECT_EQ(client.connections_opened(), server.connections());
}

// -- TLS ----------------------------------------------------------------------

TEST(http_client, https_verifies_the_server_against_the_ca_file) {
  temp_dir dir;
  test_pki pki{dir.str()};
  scripted_http_server server{[](const seen_request& req) {
                                return http_reply(200, "secure " + req.target);
                              },
                              pki.server_context()};
  http_client_options o;
  o.ca_file = pki.ca_file();
  http_client trusting{o};
  for (int i = 0; i < 3; ++i) {
    auto r = trusting.perform(get(server.url("/t")));
    ASSERT_EQ(r.failure, http_failure::none) << r.error;
    EXPECT_EQ(r.body, "secure /t");
  }
  EXPECT_EQ(server.connections(), 1u); // kept alive over TLS too
  // The system's CAs do not know the test CA.
  http_client system_cas;
  auto r = system_cas.perform(get(server.url("/t")));
  EXPECT_EQ(r.failure, http_failure::tls);
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(http_client, https_checks_the_host_name) {
  temp_dir dir;
  // Signed by the trusted CA, but for another name.
  test_pki pki{dir.str(), "DNS:other.example"};
  scripted_http_server server{[](const seen_request&) {
                                return http_reply(200);
                              },
                              pki.server_context()};
  http_client_options o;
  o.ca_file = pki.ca_file();
  http_client client{o};
  auto r = client.perform(get(server.url()));
  EXPECT_EQ(r.failure, http_failure::tls);
  EXPECT_TRUE(server.requests().empty());
  // Only tests turn the checks off.
  o.verify_peer = false;
  http_client unchecked{o};
  EXPECT_EQ(unchecked.perform(get(server.url())).failure, http_failure::none);
}

// -- proxies ------------------------------------------------------------------

TEST(http_client, honours_the_http_proxy_environment_variable) {
  scripted_http_server proxy{[](const seen_request& req) {
    return http_reply(200, "via proxy: " + req.request_line);
  }};
  scoped_env no_proxy{"no_proxy", std::nullopt};
  scoped_env no_proxy_uc{"NO_PROXY", std::nullopt};
  scoped_env all_proxy{"all_proxy", std::nullopt};
  scoped_env http_proxy{"http_proxy",
                        "http://127.0.0.1:" + std::to_string(proxy.port())};
  http_client client;
  // The host does not exist: only the proxy can answer.
  auto r = client.perform(get("http://upstream.invalid:8080/path?q=1"));
  ASSERT_EQ(r.failure, http_failure::none) << r.error;
  EXPECT_EQ(r.body,
            "via proxy: GET http://upstream.invalid:8080/path?q=1 HTTP/1.1");
  auto reqs = proxy.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].header("host"), "upstream.invalid:8080");
}

TEST(http_client, no_proxy_bypasses_the_proxy) {
  scripted_http_server proxy{[](const seen_request&) {
    return http_reply(200, "proxy");
  }};
  scripted_http_server direct{[](const seen_request&) {
    return http_reply(200, "direct");
  }};
  scoped_env no_proxy_uc{"NO_PROXY", std::nullopt};
  scoped_env all_proxy{"all_proxy", std::nullopt};
  scoped_env http_proxy{"http_proxy",
                        "http://127.0.0.1:" + std::to_string(proxy.port())};
  scoped_env no_proxy{"no_proxy", "127.0.0.1"};
  http_client client;
  auto r = client.perform(get(direct.url()));
  EXPECT_EQ(r.body, "direct") << r.error;
  EXPECT_TRUE(proxy.requests().empty());
}
