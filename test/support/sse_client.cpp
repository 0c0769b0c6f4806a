#include "test/support/sse_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace butlers::test {

sse_client::sse_client(uint16_t port, const std::string& path) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (fd_ < 0
      || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return;
  std::string req = "GET " + path
                    + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: "
                      "text/event-stream\r\n\r\n";
  if (::send(fd_, req.data(), req.size(), MSG_NOSIGNAL)
      != static_cast<ssize_t>(req.size()))
    return;
  reader_ = std::thread{[this] {
    run();
  }};
}

sse_client::~sse_client() {
  close();
}

void sse_client::run() {
  char buf[16384];
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    auto ready = ::poll(&p, 1, 50);
    if (ready <= 0)
      continue;
    auto n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0)
      return;
    std::lock_guard<std::mutex> guard{mtx_};
    data_.append(buf, static_cast<size_t>(n));
  }
}

bool sse_client::open() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return data_.rfind("HTTP/1.1 200", 0) == 0
         && data_.find("\r\n\r\n") != std::string::npos;
}

std::string sse_client::text() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return data_;
}

size_t sse_client::count(const std::string& needle) const {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  for (auto pos = data_.find(needle); pos != std::string::npos;
       pos = data_.find(needle, pos + needle.size()))
    ++n;
  return n;
}

void sse_client::close() {
  stop_ = true;
  if (reader_.joinable())
    reader_.join();
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

} // namespace butlers::test
