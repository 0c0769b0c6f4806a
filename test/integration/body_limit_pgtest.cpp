// The body limit against the real node over real HTTP on loopback: every
// body over `http.max_body_bytes` gets 413 with the JSON error naming the
// limit, the server answers without reading the rest of the body and then
// closes the connection, and the node serves the next request normally.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "test/support/node_fixture.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr size_t limit = 1048576;

std::string envelope(const std::string& key, const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":")"
         + text + R"("}})";
}

std::string to_hex(size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%zx", n);
  return buf;
}

/// What a raw client saw: the bytes it got, how much of its request it
/// had sent when the answer came, and whether the server closed after it.
struct raw_exchange {
  std::string response;
  size_t sent = 0;
  bool closed = false;
};

/// Sends `head` and then up to `body_size` bytes of body (as `chunked`
/// pieces when asked) the way a careful client does: it stops sending as
/// soon as the server answers, then reads the answer until the server
/// closes the connection (or 10 s pass).
raw_exchange exchange(uint16_t port, const std::string& head, size_t body_size,
                      bool chunked = false) {
  raw_exchange x;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return x;
  }
  std::string out = head;
  std::string piece(16384, 'x');
  size_t body_sent = 0;
  size_t off = 0;
  auto deadline = clock_type::now() + 10s;
  bool answered = false;
  while (!answered && clock_type::now() < deadline) {
    if (off == out.size() && body_sent < body_size) {
      auto n = std::min(piece.size(), body_size - body_sent);
      out = chunked ? to_hex(n) + "\r\n" + piece.substr(0, n) + "\r\n"
                    : piece.substr(0, n);
      body_sent += n;
      off = 0;
    }
    pollfd p{fd, POLLIN, 0};
    if (off < out.size())
      p.events |= POLLOUT;
    if (::poll(&p, 1, 100) <= 0)
      continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR))
      answered = true;
    else if (p.revents & POLLOUT) {
      auto n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n <= 0)
        answered = true;
      else {
        off += static_cast<size_t>(n);
        x.sent += static_cast<size_t>(n);
      }
    }
  }
  char buf[4096];
  while (clock_type::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      // EOF, or a reset for the unread rest of the body: closed either way.
      x.closed = true;
      break;
    }
    x.response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return x;
}

std::string post_head(size_t content_length) {
  return "POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         "Content-Type: application/json\r\nContent-Length: "
         + std::to_string(content_length) + "\r\n\r\n";
}

class BodyLimit : public node_fixture {
 protected:
  void SetUp() override {
    use_database("body_limit");
    ASSERT_TRUE(start_node(
      node_head("body-limit-test", 10,
                "max_body_bytes = " + std::to_string(limit) + "\n")));
  }

  /// The node still answers as usual, on a new connection.
  void expect_serving() {
    EXPECT_EQ(http_->get("/healthz").status, 200);
    auto ok = http_->post("/v1/ingest", envelope("after", "still here"));
    EXPECT_EQ(ok.status, 202) << ok.body << ok.error;
  }
};

void expect_413(const raw_exchange& x, const std::string& size_words) {
  EXPECT_EQ(x.response.rfind("HTTP/1.1 413", 0), 0u) << x.response;
  EXPECT_NE(x.response.find(R"("code":"payload_too_large")"), std::string::npos)
    << x.response;
  EXPECT_NE(x.response.find("exceeds http.max_body_bytes ("
                            + std::to_string(limit) + ")"),
            std::string::npos)
    << x.response;
  EXPECT_NE(x.response.find(size_words), std::string::npos) << x.response;
  EXPECT_NE(x.response.find("Connection: close"), std::string::npos)
    << x.response;
  EXPECT_TRUE(x.closed) << "the server keeps the connection open";
}

TEST_F(BodyLimit, ThreeMegabytesGet413BeforeTheBodyIsRead) {
  size_t body = 3 * 1000 * 1000;
  // Only the first 64 KiB of the 3 MB go out, and the client then waits:
  // the answer comes all the same, so the server decided on the headers
  // without waiting for (or reading) the rest of the body. (A client that
  // sends on regardless gets megabytes into the kernel's socket buffers on
  // loopback before it sees the answer, read by no one.)
  auto x = exchange(port_, post_head(body), 65536);
  expect_413(x, "body of 3000000 bytes");
  expect_serving();
}

TEST_F(BodyLimit, ABodyJustOverTheLimitGets413) {
  auto x = exchange(port_, post_head(limit + 1), limit + 1);
  expect_413(x, "body of " + std::to_string(limit + 1) + " bytes");
  // At the limit is not over it: parsed (and refused as JSON), not 413.
  auto at = http_->post("/v1/ingest", std::string(limit, 'x'));
  EXPECT_EQ(at.status, 400) << at.body << at.error;
  expect_serving();
}

TEST_F(BodyLimit, AChunkedBodyGrowingPastTheLimitGets413) {
  auto head = std::string{"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/json\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n"};
  // 64 KiB past the limit and no last chunk: the body never ends, so only
  // an answer decided at the limit can come back.
  auto x = exchange(port_, head, limit + 65536, true);
  expect_413(x, "body without a length");
  expect_serving();
}

} // namespace
} // namespace butlers::test
