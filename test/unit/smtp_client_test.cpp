// runtime/smtp_client against a minimal SMTP responder on loopback that
// speaks the real protocol (greeting, EHLO, AUTH PLAIN, MAIL, RCPT, DATA
// with dot-stuffing, QUIT) with scripted reply codes. The full SMTP sink of
// the channel tests lives in test/support; this one checks the client's
// side: the envelope, the bytes of the message, credentials, and how
// replies and failures are classified.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "runtime/smtp_client.hpp"

using namespace butlers;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

/// Reply codes the responder gives, per step.
struct smtp_script {
  bool greet = true;
  int auth = 235;
  int mail = 250;
  int rcpt = 250;
  int data_end = 250;
};

std::string reply_line(int code) {
  std::string text = code < 300   ? "2.0.0 ok"
                     : code < 400 ? "go ahead"
                     : code < 500 ? "4.3.0 try again later"
                                  : "5.7.1 refused";
  return std::to_string(code) + " " + text + "\r\n";
}

/// Serves SMTP sessions on 127.0.0.1, one at a time, and records them.
class smtp_responder {
 public:
  explicit smtp_responder(smtp_script script = {}) : script_(script) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0
        || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
        || ::listen(listen_fd_, 8) != 0
        || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len)
             != 0
        || ::pipe2(wake_, O_CLOEXEC) != 0)
      ADD_FAILURE() << "smtp responder setup failed";
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] {
      run();
    }};
  }

  ~smtp_responder() {
    char c = 'x';
    if (::write(wake_[1], &c, 1) != 1)
      ADD_FAILURE() << "cannot wake the responder";
    thread_.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  std::string url() const {
    return "smtp://127.0.0.1:" + std::to_string(port_);
  }

  /// Raised when a connection is accepted.
  void cancel_on_accept(std::atomic<bool>* flag) {
    std::lock_guard<std::mutex> guard{mtx_};
    cancel_on_accept_ = flag;
  }

  /// Command lines in order (AUTH's credentials line included).
  std::vector<std::string> commands() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return commands_;
  }

  /// The message as received after DATA, unstuffed, lines ending in CRLF.
  std::string data() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return data_;
  }

 private:
  /// Waits until `fd` is readable; false when woken to stop.
  bool wait(int fd) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    return ::poll(p, 2, -1) > 0 && p[1].revents == 0;
  }

  /// The next CRLF-terminated line (without CRLF); false on EOF or stop.
  bool read_line(int fd, std::string& buf, std::string& line) {
    size_t eol;
    while ((eol = buf.find("\r\n")) == std::string::npos) {
      char chunk[4096];
      if (!wait(fd))
        return false;
      auto n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0)
        return false;
      buf.append(chunk, static_cast<size_t>(n));
    }
    line = buf.substr(0, eol);
    buf.erase(0, eol + 2);
    return true;
  }

  void send(int fd, const std::string& s) {
    if (::send(fd, s.data(), s.size(), MSG_NOSIGNAL)
        != static_cast<ssize_t>(s.size()))
      ADD_FAILURE() << "smtp responder: short send";
  }

  void record(std::string line) {
    std::lock_guard<std::mutex> guard{mtx_};
    commands_.push_back(std::move(line));
  }

  void run() {
    while (wait(listen_fd_)) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0)
        continue;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        if (cancel_on_accept_ != nullptr)
          *cancel_on_accept_ = true;
      }
      bool more = session(fd);
      ::close(fd);
      if (!more)
        return;
    }
  }

  /// One session; false when the responder is stopping.
  bool session(int fd) {
    std::string buf;
    std::string line;
    if (!script_.greet)
      return read_line(fd, buf, line); // silent until the client gives up
    send(fd, "220 responder ESMTP\r\n");
    while (read_line(fd, buf, line)) {
      record(line);
      auto verb = line.substr(0, 4);
      if (verb == "EHLO" || verb == "HELO") {
        send(fd, "250-responder\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n");
      } else if (verb == "AUTH") {
        if (line == "AUTH PLAIN") { // no initial response: ask for it
          send(fd, "334 \r\n");
          if (!read_line(fd, buf, line))
            return true;
          record(line);
        }
        send(fd, reply_line(script_.auth));
      } else if (verb == "MAIL") {
        send(fd, reply_line(script_.mail));
      } else if (verb == "RCPT") {
        send(fd, reply_line(script_.rcpt));
      } else if (verb == "DATA") {
        send(fd, "354 end with <CRLF>.<CRLF>\r\n");
        std::string text;
        while (read_line(fd, buf, line) && line != ".")
          text += (line.rfind("..", 0) == 0 ? line.substr(1) : line) + "\r\n";
        {
          std::lock_guard<std::mutex> guard{mtx_};
          data_ = text;
        }
        send(fd, reply_line(script_.data_end));
      } else if (verb == "QUIT") {
        send(fd, "221 bye\r\n");
        return true;
      } else {
        send(fd, reply_line(verb == "RSET" || verb == "NOOP" ? 250 : 502));
      }
    }
    return true;
  }

  smtp_script script_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
  mutable std::mutex mtx_;
  std::atomic<bool>* cancel_on_accept_ = nullptr;
  std::vector<std::string> commands_;
  std::string data_;
};

smtp_message a_message() {
  smtp_message m;
  m.from = "bot@example.org";
  m.to = {"alice@example.org", "bob@example.org"};
  // Bare LF line ends and a line that starts with a dot.
  m.rfc822 = "From: Bot <bot@example.org>\n"
             "To: alice@example.org\n"
             "Subject: Re: hello\n"
             "\n"
             "first line\n"
             ".a line with a leading dot\n"
             "last line\n";
  return m;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string base64_decode(const std::string& in) {
  std::string out(in.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  while (!in.empty() && in.back() == '=' && !out.empty() && out.back() == '\0')
    out.pop_back(); // EVP_DecodeBlock keeps the padding's zero bytes
  return out;
}

int64_t ms_since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start)
    .count();
}

} // namespace

TEST(smtp_send, submits_envelope_and_message_with_crlf_and_dots_intact) {
  smtp_responder server;
  auto r = smtp_send(server.url(), a_message(), "", "", 5s);
  ASSERT_TRUE(r.sent) << r.error;
  EXPECT_FALSE(r.retryable);
  EXPECT_EQ(r.code, 250);
  EXPECT_TRUE(r.error.empty());
  auto cmds = server.commands();
  ASSERT_GE(cmds.size(), 5u);
  EXPECT_EQ(cmds[0].substr(0, 5), "EHLO ");
  EXPECT_EQ(cmds[1], "MAIL FROM:<bot@example.org>");
  EXPECT_EQ(cmds[2], "RCPT TO:<alice@example.org>");
  EXPECT_EQ(cmds[3], "RCPT TO:<bob@example.org>");
  EXPECT_EQ(cmds[4], "DATA");
  for (auto& c : cmds)
    EXPECT_NE(c.substr(0, 4), "AUTH") << "no credentials, no AUTH";
  EXPECT_EQ(server.data(),
            "From: Bot <bot@example.org>\r\nTo: alice@example.org\r\n"
            "Subject: Re: hello\r\n\r\nfirst line\r\n"
            ".a line with a leading dot\r\nlast line\r\n");
}

TEST(smtp_send, authenticates_only_with_credentials) {
  smtp_responder server;
  auto r = smtp_send(server.url(), a_message(), "mailer", "s3cret pass", 5s);
  ASSERT_TRUE(r.sent) << r.error;
  std::string credentials;
  auto cmds = server.commands();
  for (size_t i = 0; i < cmds.size(); ++i)
    if (cmds[i].rfind("AUTH PLAIN", 0) == 0)
      credentials = cmds[i] == "AUTH PLAIN" && i + 1 < cmds.size()
                      ? cmds[i + 1]
                      : cmds[i].substr(11);
  ASSERT_FALSE(credentials.empty());
  EXPECT_EQ(base64_decode(credentials),
            std::string("\0mailer\0s3cret pass", 19));
}

TEST(smtp_send, a_refused_login_is_permanent_and_does_not_echo_the_password) {
  smtp_responder server{{true, 535}};
  auto r = smtp_send(server.url(), a_message(), "mailer", "s3cret", 5s);
  EXPECT_FALSE(r.sent);
  EXPECT_FALSE(r.retryable);
  EXPECT_EQ(r.code, 535);
  EXPECT_FALSE(r.error.empty());
  EXPECT_FALSE(contains(r.error, "s3cret")) << r.error;
}

TEST(smtp_send, a_5xx_reply_is_permanent) {
  smtp_script script;
  script.rcpt = 550;
  smtp_responder server{script};
  auto r = smtp_send(server.url(), a_message(), "", "", 5s);
  EXPECT_FALSE(r.sent);
  EXPECT_FALSE(r.retryable);
  EXPECT_EQ(r.code, 550);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(server.data().empty());
}

TEST(smtp_send, a_4xx_reply_is_retryable) {
  for (auto step : {&smtp_script::mail, &smtp_script::data_end}) {
    smtp_script script;
    script.*step = 451;
    smtp_responder server{script};
    auto r = smtp_send(server.url(), a_message(), "", "", 5s);
    EXPECT_FALSE(r.sent);
    EXPECT_TRUE(r.retryable) << r.error;
    EXPECT_EQ(r.code, 451);
  }
}

TEST(smtp_send, transport_failures_are_retryable) {
  // A bound port nobody listens on refuses the connection.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_TRUE(
    fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0
    && ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  auto url = "smtp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = smtp_send(url, a_message(), "", "", 2s);
  ::close(fd);
  EXPECT_FALSE(r.sent);
  EXPECT_TRUE(r.retryable);
  EXPECT_EQ(r.code, 0);
  EXPECT_FALSE(r.error.empty());
  // A server that never greets: the timeout ends it.
  smtp_responder silent{{false}};
  auto start = steady::now();
  r = smtp_send(silent.url(), a_message(), "", "", 200ms);
  EXPECT_FALSE(r.sent);
  EXPECT_TRUE(r.retryable);
  EXPECT_TRUE(contains(r.error, "timed out")) << r.error;
  EXPECT_LT(ms_since(start), 200 + 500);
}

TEST(smtp_send, cancel_ends_a_submission_promptly) {
  smtp_responder silent{{false}};
  std::atomic<bool> cancel{false};
  silent.cancel_on_accept(&cancel);
  auto start = steady::now();
  auto r = smtp_send(silent.url(), a_message(), "", "", 10s, &cancel);
  EXPECT_FALSE(r.sent);
  EXPECT_TRUE(r.retryable);
  EXPECT_EQ(r.error, "cancelled");
  EXPECT_LT(ms_since(start), 500);
}

TEST(smtp_send, refuses_bad_input_without_connecting) {
  smtp_responder server;
  auto m = a_message();
  auto r = smtp_send("http://127.0.0.1/", m, "", "", 1s);
  EXPECT_FALSE(r.sent);
  EXPECT_FALSE(r.retryable);
  m.to = {"alice@example.org>\r\nRCPT TO:<eve@example.org"};
  r = smtp_send(server.url(), m, "", "", 1s);
  EXPECT_FALSE(r.retryable);
  EXPECT_TRUE(contains(r.error, "bad recipient")) << r.error;
  m.to.clear();
  EXPECT_EQ(smtp_send(server.url(), m, "", "", 1s).error, "no recipients");
  EXPECT_TRUE(server.commands().empty());
}
