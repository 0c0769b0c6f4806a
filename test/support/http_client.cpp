#include "test/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace butlers::test {

namespace {

struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

bool wait_fd(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

http_response parse(const std::string& data) {
  http_response r;
  auto head_end = data.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    r.error = "incomplete response: " + data.substr(0, 200);
    return r;
  }
  auto status_end = data.find("\r\n");
  auto status_line = data.substr(0, status_end);
  auto sp = status_line.find(' ');
  if (sp == std::string::npos) {
    r.error = "bad status line: " + status_line;
    return r;
  }
  r.status = std::atoi(status_line.c_str() + sp + 1);
  size_t pos = status_end + 2;
  while (pos < head_end) {
    auto eol = data.find("\r\n", pos);
    auto line = data.substr(pos, eol - pos);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      auto value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ')
        value.erase(0, 1);
      r.headers[lower(line.substr(0, colon))] = value;
    }
    pos = eol + 2;
  }
  r.body = data.substr(head_end + 4);
  auto te = r.headers.find("transfer-encoding");
  if (te != r.headers.end() && lower(te->second) == "chunked") {
    std::string decoded;
    size_t p = 0;
    auto& b = r.body;
    while (p < b.size()) {
      auto eol = b.find("\r\n", p);
      if (eol == std::string::npos)
        break;
      auto n = std::stoul(b.substr(p, eol - p), nullptr, 16);
      if (n == 0)
        break;
      decoded += b.substr(eol + 2, n);
      p = eol + 2 + n + 2;
    }
    r.body = decoded;
  }
  return r;
}

} // namespace

http_client::http_client(std::string host, uint16_t port,
                         std::chrono::milliseconds timeout)
  : host_(std::move(host)), port_(port), timeout_(timeout) {
  // nop
}

http_response http_client::raw(const std::string& request) const {
  http_response r;
  fd_guard sock{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)};
  if (sock.fd < 0) {
    r.error = std::strerror(errno);
    return r;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  ::inet_pton(AF_INET, host_ == "localhost" ? "127.0.0.1" : host_.c_str(),
              &addr.sin_addr);
  if (::connect(sock.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      && errno != EINPROGRESS) {
    r.error = std::string{"connect: "} + std::strerror(errno);
    return r;
  }
  if (!wait_fd(sock.fd, POLLOUT, timeout_)) {
    r.error = "connect timeout";
    return r;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    r.error = std::string{"connect: "} + std::strerror(err);
    return r;
  }
  size_t sent = 0;
  while (sent < request.size()) {
    if (!wait_fd(sock.fd, POLLOUT, timeout_)) {
      r.error = "send timeout";
      return r;
    }
    auto n = ::send(sock.fd, request.data() + sent, request.size() - sent,
                    MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN)
        continue;
      // The server may answer (e.g. 413) and close before reading it all.
      break;
    }
    sent += static_cast<size_t>(n);
  }
  std::string data;
  char buf[65536];
  for (;;) {
    if (!wait_fd(sock.fd, POLLIN, timeout_)) {
      r.error = "receive timeout after " + std::to_string(data.size())
                + " bytes";
      return r;
    }
    auto n = ::recv(sock.fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EAGAIN)
      continue;
    if (n <= 0)
      break;
    data.append(buf, static_cast<size_t>(n));
  }
  if (data.empty()) {
    r.error = "connection closed without a response";
    return r;
  }
  return parse(data);
}

http_response http_client::get(const std::string& path) const {
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host_
                    + "\r\nConnection: close\r\n";
  if (!token_.empty())
    req += "Authorization: Bearer " + token_ + "\r\n";
  req += "\r\n";
  return raw(req);
}

http_response http_client::post(const std::string& path,
                                const std::string& body,
                                const std::string& content_type,
                                const http_headers& headers) const {
  std::string req = "POST " + path + " HTTP/1.1\r\nHost: " + host_
                    + "\r\nConnection: close\r\nContent-Type: " + content_type
                    + "\r\nContent-Length: " + std::to_string(body.size())
                    + "\r\n";
  if (!token_.empty())
    req += "Authorization: Bearer " + token_ + "\r\n";
  for (auto& [name, value] : headers)
    req += name + ": " + value + "\r\n";
  req += "\r\n";
  req += body;
  return raw(req);
}

} // namespace butlers::test
