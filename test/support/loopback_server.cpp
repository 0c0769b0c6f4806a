#include "test/support/loopback_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace butlers::test {

// -- connection ---------------------------------------------------------------

bool loopback_connection::read_some(std::string& buf) {
  char chunk[16384];
  for (;;) {
    auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return false;
  }
}

bool loopback_connection::write_all(std::string_view data) {
  while (!data.empty()) {
    auto n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void loopback_connection::shutdown() {
  ::shutdown(fd_, SHUT_RDWR);
}

// -- server -------------------------------------------------------------------

loopback_server::loopback_server(handler h, uint16_t port)
  : handler_(std::move(h)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    throw std::runtime_error{std::string{"socket: "} + std::strerror(errno)};
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::listen(listen_fd_, 64) != 0
      || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len)
           != 0) {
    auto err = std::string{"bind/listen: "} + std::strerror(errno);
    ::close(listen_fd_);
    throw std::runtime_error{err};
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread{[this] {
    accept_loop();
  }};
}

loopback_server::~loopback_server() {
  stop();
}

void loopback_server::accept_loop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return; // shut down by stop(), or broken
    }
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_) {
      ::close(fd);
      return;
    }
    reap_finished();
    ++accepted_;
    auto& w = workers_.emplace_back();
    w.fd = fd;
    w.thread = std::thread{[this, &w] {
      loopback_connection conn{w.fd};
      handler_(conn);
      ::shutdown(w.fd, SHUT_RDWR);
      w.done = true;
    }};
  }
}

void loopback_server::reap_finished() {
  for (auto i = workers_.begin(); i != workers_.end();) {
    if (i->done) {
      i->thread.join();
      ::close(i->fd);
      i = workers_.erase(i);
    } else {
      ++i;
    }
  }
}

void loopback_server::stop() {
  if (stopping_.exchange(true))
    return;
  // Wakes accept4 (Linux answers EINVAL on a listening socket shut down).
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable())
    acceptor_.join();
  ::close(listen_fd_);
  std::list<worker> workers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& w : workers_)
      ::shutdown(w.fd, SHUT_RDWR);
    workers.splice(workers.end(), workers_);
  }
  for (auto& w : workers) {
    w.thread.join();
    ::close(w.fd);
  }
}

} // namespace butlers::test
