#include "test/support/scripted_http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <stdexcept>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace butlers::test {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return s;
}

std::string reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Whatever";
  }
}

} // namespace

std::string seen_request::header(const std::string& lower_name) const {
  for (auto& [k, v] : headers)
    if (k == lower_name)
      return v;
  return "<absent>";
}

server_reply http_reply(int status, const std::string& body,
                        const std::string& extra_headers) {
  server_reply r;
  r.raw = "HTTP/1.1 " + std::to_string(status) + " " + reason(status)
          + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"
          + extra_headers + "\r\n" + body;
  return r;
}

// -- connections
// ----------------------------------------------------------------

struct scripted_http_server::connection {
  size_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;

  ~connection() {
    if (ssl != nullptr)
      SSL_free(ssl);
    if (fd >= 0)
      ::close(fd);
  }

  /// Some bytes into `out`; false on EOF or error.
  bool read_some(std::string& out) {
    char chunk[16384];
    long n = ssl != nullptr ? SSL_read(ssl, chunk, sizeof(chunk))
                            : ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0)
      return false;
    out.append(chunk, static_cast<size_t>(n));
    return true;
  }

  bool write_all(std::string_view data) {
    while (!data.empty()) {
      long n = ssl != nullptr
                 ? SSL_write(ssl, data.data(), static_cast<int>(data.size()))
                 : ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  /// The next request from `buf` (bytes read but not consumed yet) and the
  /// socket; false when the peer closed or sent garbage.
  bool read_request(std::string& buf, seen_request& req) {
    size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos)
      if (!read_some(buf))
        return false;
    auto head = buf.substr(0, head_end);
    size_t pos = head.find("\r\n");
    req.request_line = head.substr(0, pos);
    auto sp1 = req.request_line.find(' ');
    auto sp2 = req.request_line.rfind(' ');
    if (sp1 == std::string::npos || sp2 <= sp1)
      return false;
    req.method = req.request_line.substr(0, sp1);
    req.target = req.request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t content_length = 0;
    while (pos != std::string::npos) {
      size_t start = pos + 2;
      pos = head.find("\r\n", start);
      auto line = head.substr(start, pos == std::string::npos
                                       ? std::string::npos
                                       : pos - start);
      auto colon = line.find(':');
      if (colon == std::string::npos)
        return false;
      auto name = lower(line.substr(0, colon));
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (name == "content-length")
        content_length = std::stoul(value);
      req.headers.emplace_back(name, value);
    }
    while (buf.size() < head_end + 4 + content_length)
      if (!read_some(buf))
        return false;
    req.body = buf.substr(head_end + 4, content_length);
    buf.erase(0, head_end + 4 + content_length);
    return true;
  }
};

// -- scripted_http_server
// ------------------------------------------------------------

scripted_http_server::scripted_http_server(handler h, SSL_CTX* tls)
  : handler_(std::move(h)), tls_(tls) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0
      || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
      || ::listen(listen_fd_, 64) != 0
      || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len)
           != 0
      || ::pipe2(wake_, O_CLOEXEC) != 0)
    throw std::runtime_error("scripted_http_server: cannot listen");
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread{[this] {
    accept_loop();
  }};
}

scripted_http_server::~scripted_http_server() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  stopped_cv_.notify_all();
  char c = 'x';
  if (::write(wake_[1], &c, 1) != 1)
    std::perror("scripted_http_server: wake");
  acceptor_.join();
  {
    // Unblocks workers in recv/SSL_read; the descriptors stay open (and
    // their numbers taken) until the workers are joined.
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& conn : live_)
      ::shutdown(conn->fd, SHUT_RDWR);
  }
  for (auto& t : workers_)
    t.join();
  live_.clear();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::string scripted_http_server::url(const std::string& path) const {
  return std::string{tls_ != nullptr ? "https" : "http"}
         + "://127.0.0.1:" + std::to_string(port_) + path;
}

size_t scripted_http_server::connections() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return accepted_;
}

std::vector<seen_request> scripted_http_server::requests() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

void scripted_http_server::accept_loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 || p[1].revents != 0)
      return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    auto conn = std::make_shared<connection>();
    conn->fd = fd;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      conn->id = ++accepted_;
      live_.push_back(conn);
    }
    workers_.emplace_back([this, conn] {
      serve(conn);
    });
  }
}

void scripted_http_server::serve(std::shared_ptr<connection> c) {
  // OpenSSL's socket BIO writes with write(2) (a TLS alert to a client that
  // hung up, say), which raises SIGPIPE; blocked here, in this thread only,
  // so a SIGPIPE from the client under test would still end the test.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  if (tls_ != nullptr) {
    c->ssl = SSL_new(tls_);
    if (c->ssl == nullptr || SSL_set_fd(c->ssl, c->fd) != 1
        || SSL_accept(c->ssl) != 1) {
      ::shutdown(c->fd, SHUT_RDWR);
      return;
    }
  }
  std::string buf;
  for (;;) {
    seen_request req;
    if (!c->read_request(buf, req))
      break;
    req.connection = c->id;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      requests_.push_back(req);
    }
    auto r = handler_(req);
    if (r.kind == server_reply::stall) {
      std::unique_lock<std::mutex> guard{mtx_};
      stopped_cv_.wait(guard, [this] {
        return stopping_;
      });
      break;
    }
    if (r.kind == server_reply::drop)
      break;
    bool ok = true;
    size_t piece = r.piece == 0 ? r.raw.size() : r.piece;
    for (size_t off = 0; ok && off < r.raw.size(); off += piece)
      ok = c->write_all(std::string_view{r.raw}.substr(off, piece));
    if (!ok || r.close)
      break;
  }
  ::shutdown(c->fd, SHUT_RDWR);
}

// -- test_pki
// ---------------------------------------------------------------------

namespace {

struct pki_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(bool ok, const char* what) {
  if (!ok)
    throw pki_error{std::string{"test_pki: "} + what};
}

using key_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using cert_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

key_ptr make_key() {
  key_ptr key{EVP_EC_gen("P-256"), EVP_PKEY_free};
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  auto* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

/// A certificate for `key` named `cn`, signed by `issuer_key` (and
/// `issuer`; null: self-signed).
cert_ptr make_cert(EVP_PKEY* key, const char* cn, EVP_PKEY* issuer_key,
                   X509* issuer, long serial, const std::string& san = {}) {
  cert_ptr cert{X509_new(), X509_free};
  check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key);
  auto* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1,
                             0);
  auto* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_ext(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer == nullptr) {
    add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid");
    add_ext(cert.get(), signer, NID_subject_alt_name, san.c_str());
    add_ext(cert.get(), signer, NID_ext_key_usage, "serverAuth");
  }
  check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "X509_sign");
  return cert;
}

} // namespace

test_pki::test_pki(const std::string& dir, const std::string& san) {
  auto ca_key = make_key();
  auto ca = make_cert(ca_key.get(), "butlers test CA", ca_key.get(), nullptr,
                      1);
  auto key = make_key();
  auto cert = make_cert(key.get(), "butlers test server", ca_key.get(),
                        ca.get(), 2, san);
  ca_file_ = dir + "/ca.pem";
  auto* f = std::fopen(ca_file_.c_str(), "w");
  check(f != nullptr, "cannot write the CA file");
  bool written = PEM_write_X509(f, ca.get()) == 1;
  std::fclose(f);
  check(written, "PEM_write_X509");
  server_ctx_ = SSL_CTX_new(TLS_server_method());
  check(server_ctx_ != nullptr, "SSL_CTX_new");
  check(SSL_CTX_use_certificate(server_ctx_, cert.get()) == 1
          && SSL_CTX_use_PrivateKey(server_ctx_, key.get()) == 1
          && SSL_CTX_check_private_key(server_ctx_) == 1,
        "server certificate");
}

test_pki::~test_pki() {
  SSL_CTX_free(server_ctx_);
}

} // namespace butlers::test
