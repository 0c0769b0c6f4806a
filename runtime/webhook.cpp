#include "runtime/webhook.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>
#include <random>
#include <system_error>
#include <thread>

namespace butlers {

namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

/// Bodies beyond this are truncated (the status is what matters).
constexpr size_t max_body_bytes = 64 * 1024;
/// A status line plus headers beyond this is not a webhook receiver.
constexpr size_t max_header_bytes = 64 * 1024;
/// Raw bytes read at most, including chunked framing.
constexpr size_t max_response_bytes = 1024 * 1024;

std::string errno_text(int code) {
  return std::error_code{code, std::generic_category()}.message();
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string to_lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = lower(c);
  return out;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

/// `s` without HTTP optional whitespace (RFC 9110 OWS: space and tab).
std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// `s` for an error message: at most `n` bytes, control bytes as '?'.
std::string excerpt(std::string_view s, size_t n = 200) {
  std::string out{s.substr(0, n)};
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  if (s.size() > n)
    out += "...";
  return out;
}

bool fail(std::string* error, std::string msg) {
  if (error)
    *error = std::move(msg);
  return false;
}

/// Closes the descriptor on every path out of http_post.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

milliseconds remaining(steady::time_point deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - steady::now());
  return std::max(left, milliseconds{0});
}

/// Waits until `fd` is ready for `events` (or has an error or hang-up the
/// next call will report); false when `deadline` passes first.
bool wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    auto left = std::min<int64_t>(remaining(deadline).count(),
                                  std::numeric_limits<int>::max());
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

// -- response parsing ---------------------------------------------------------

enum class parse_state { incomplete, complete, failed };

/// Reads hex digits of a chunk-size line (extensions after ';' ignored).
bool parse_chunk_size(std::string_view line, size_t& out) {
  line = trim_ows(line.substr(0, line.find(';')));
  if (line.empty() || line.size() > 15)
    return false;
  out = 0;
  for (char c : line) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return false;
    out = out * 16 + static_cast<size_t>(d);
  }
  return true;
}

/// Decodes a chunked body starting at `buf[pos]` into `body`.
parse_state parse_chunked(std::string_view buf, size_t pos, bool eof,
                          std::string& body, std::string& error) {
  auto closed = [&] {
    error = "connection closed in the chunked response body";
    return parse_state::failed;
  };
  for (;;) {
    auto eol = buf.find("\r\n", pos);
    if (eol == std::string_view::npos)
      return eof ? closed() : parse_state::incomplete;
    size_t size = 0;
    if (!parse_chunk_size(buf.substr(pos, eol - pos), size)) {
      error = "bad chunk size line '" + excerpt(buf.substr(pos, eol - pos))
              + "'";
      return parse_state::failed;
    }
    pos = eol + 2;
    if (size == 0) {
      // Trailers, then an empty line; a peer that closes right after the
      // last chunk has still sent the whole body.
      for (;;) {
        auto end = buf.find("\r\n", pos);
        if (end == std::string_view::npos)
          return eof ? parse_state::complete : parse_state::incomplete;
        if (end == pos)
          return parse_state::complete;
        pos = end + 2;
      }
    }
    size_t room = max_body_bytes - body.size();
    size_t have = buf.size() - pos;
    if (have < size + 2) {
      if (have >= room) {
        body.append(buf.substr(pos, room));
        return parse_state::complete;
      }
      return eof ? closed() : parse_state::incomplete;
    }
    body.append(buf.substr(pos, std::min(size, room)));
    if (buf.substr(pos + size, 2) != "\r\n") {
      error = "chunk of " + std::to_string(size)
              + " bytes not followed by CRLF";
      return parse_state::failed;
    }
    pos += size + 2;
    if (body.size() >= max_body_bytes)
      return parse_state::complete;
  }
}

/// Parses one response head (status line and header lines, no final CRLF)
/// into `r`; false with `r.error` set when it is malformed.
bool parse_head(std::string_view head, http_post_result& r) {
  auto line_end = std::min(head.find("\r\n"), head.size());
  auto status_line = head.substr(0, line_end);
  // "HTTP/1.1 200 OK"; the reason phrase may be empty or absent.
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1."
      || !is_digit(status_line[7]) || status_line[8] != ' '
      || !all_digits(status_line.substr(9, 3))
      || (status_line.size() > 12 && status_line[12] != ' ')) {
    r.error = "malformed status line '" + excerpt(status_line) + "'";
    return false;
  }
  r.status = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10
             + (status_line[11] - '0');
  if (r.status < 100) {
    r.error = "malformed status line '" + excerpt(status_line) + "'";
    return false;
  }
  auto rest = line_end < head.size() ? head.substr(line_end + 2)
                                     : std::string_view{};
  while (!rest.empty()) {
    auto eol = std::min(rest.find("\r\n"), rest.size());
    auto line = rest.substr(0, eol);
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line.front() == ' '
        || line.front() == '\t') {
      r.error = "malformed header line '" + excerpt(line) + "'";
      return false;
    }
    r.headers.emplace_back(to_lower(trim_ows(line.substr(0, colon))),
                           std::string{trim_ows(line.substr(colon + 1))});
    rest = eol < rest.size() ? rest.substr(eol + 2) : std::string_view{};
  }
  return true;
}

/// How a response body ends, as its headers say.
struct body_framing {
  bool chunked = false;
  std::optional<size_t> content_length;
};

/// The framing of the response in `r`; false with `r.error` set on a bad
/// or conflicting Content-Length.
bool framing_of(http_post_result& r, body_framing& f) {
  for (auto& [name, value] : r.headers) {
    if (name == "transfer-encoding") {
      auto v = to_lower(value);
      f.chunked = v.size() >= 7 && v.compare(v.size() - 7, 7, "chunked") == 0;
    } else if (name == "content-length") {
      if (!all_digits(value) || value.size() > 15
          || (f.content_length && *f.content_length != std::stoull(value))) {
        r.error = "bad Content-Length '" + excerpt(value) + "'";
        return false;
      }
      f.content_length = std::stoull(value);
    }
  }
  return true;
}

/// Reads the body of the final response, starting at `buf[body_start]`,
/// into `r`. Never returns incomplete when `eof` is set.
parse_state parse_body(std::string_view buf, size_t body_start, bool eof,
                       http_post_result& r) {
  body_framing f;
  if (!framing_of(r, f))
    return parse_state::failed;
  if (f.chunked) {
    std::string error;
    auto state = parse_chunked(buf, body_start, eof, r.body, error);
    if (state == parse_state::failed)
      r.error = error + " (status " + std::to_string(r.status) + ")";
    return state;
  }
  size_t have = buf.size() - body_start;
  if (f.content_length) {
    size_t want = std::min(*f.content_length, max_body_bytes);
    if (have >= want) {
      r.body.assign(buf.substr(body_start, want));
      return parse_state::complete;
    }
    if (!eof)
      return parse_state::incomplete;
    r.error = "connection closed after " + std::to_string(have) + " of "
              + std::to_string(*f.content_length) + " body bytes (status "
              + std::to_string(r.status) + ")";
    return parse_state::failed;
  }
  // No framing: the body runs until the peer closes.
  if (have >= max_body_bytes || eof) {
    r.body.assign(buf.substr(body_start, max_body_bytes));
    return parse_state::complete;
  }
  return parse_state::incomplete;
}

/// Parses `buf` (everything read so far) into `r`; `eof`: the peer closed.
/// Never returns incomplete when `eof` is set.
parse_state parse_response(std::string_view buf, bool eof,
                           http_post_result& r) {
  size_t start = 0;
  for (;;) { // once per interim 1xx response
    r.headers.clear();
    r.body.clear();
    auto head_end = buf.find("\r\n\r\n", start);
    if (head_end == std::string_view::npos) {
      if (buf.size() - start > max_header_bytes) {
        r.error = "response headers exceed 64 KiB";
        return parse_state::failed;
      }
      if (!eof)
        return parse_state::incomplete;
      r.error = buf.size() == start
                  ? "connection closed without a response"
                  : "connection closed in the response headers";
      return parse_state::failed;
    }
    if (!parse_head(buf.substr(start, head_end - start), r))
      return parse_state::failed;
    size_t body_start = head_end + 4;
    if (r.status == 101) {
      r.error = "unexpected 101 Switching Protocols";
      return parse_state::failed;
    }
    if (r.status < 200) {
      start = body_start;
      continue;
    }
    if (r.status == 204 || r.status == 304)
      return parse_state::complete;
    return parse_body(buf, body_start, eof, r);
  }
}

// -- URLs ---------------------------------------------------------------------

/// Checks that `url` is printable and http://; `rest` is what follows the
/// "://".
bool split_scheme(std::string_view url, std::string_view& rest,
                  std::string* error) {
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(error, "URL contains a space or control character");
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return fail(error,
                "URL '" + excerpt(url) + "' has no scheme (expected http://)");
  auto scheme = to_lower(url.substr(0, sep));
  if (scheme == "https")
    return fail(error, "https is not supported: webhooks are sent over plain "
                       "http:// only (terminate TLS in a local proxy)");
  if (scheme != "http")
    return fail(error, "unsupported scheme '" + excerpt(scheme)
                         + "' (only http:// is supported)");
  rest = url.substr(sep + 3);
  return true;
}

/// An authority of the form "[v6 address]" or "[v6 address]:port".
bool parse_ipv6_host(std::string_view auth, std::string& host,
                     std::optional<std::string_view>& port_text,
                     std::string* error) {
  auto close = auth.find(']');
  if (close == std::string_view::npos)
    return fail(error, "unterminated '[' in host '" + std::string{auth} + "'");
  host = auth.substr(1, close - 1);
  auto after = auth.substr(close + 1);
  if (!after.empty()) {
    if (after.front() != ':')
      return fail(error, "unexpected '" + std::string{after} + "' after host");
    port_text = after.substr(1);
  }
  for (char c : host)
    if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'f') || c == ':'
          || c == '.'))
      return fail(error, "bad IPv6 address '" + host + "'");
  return true;
}

/// An authority of the form "name" or "name:port" (a host name or an IPv4
/// address).
bool parse_name_host(std::string_view auth, std::string& host,
                     std::optional<std::string_view>& port_text,
                     std::string* error) {
  auto colon = auth.find(':');
  if (colon != std::string_view::npos
      && auth.find(':', colon + 1) != std::string_view::npos)
    return fail(error, "IPv6 addresses in URLs need brackets: '"
                         + std::string{auth} + "'");
  host = auth.substr(0, colon);
  if (colon != std::string_view::npos)
    port_text = auth.substr(colon + 1);
  for (char c : host)
    if (!(is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') || c == '-'
          || c == '.' || c == '_'))
      return fail(error, "bad character '" + std::string(1, c) + "' in host '"
                           + host + "'");
  return true;
}

/// A port number, 1-65535.
bool parse_port(std::string_view text, uint16_t& port, std::string* error) {
  if (!all_digits(text))
    return fail(error, "bad port '" + std::string{text} + "'");
  unsigned long n = text.size() > 5 ? 70000 : std::stoul(std::string{text});
  if (n < 1 || n > 65535)
    return fail(error,
                "port " + std::string{text} + " is out of range 1-65535");
  port = static_cast<uint16_t>(n);
  return true;
}

// -- one attempt, step by step ------------------------------------------------

std::string authority(const http_url& url) {
  bool v6 = url.host.find(':') != std::string::npos;
  std::string out = v6 ? "[" + url.host + "]" : url.host;
  if (url.port != 80)
    out += ":" + std::to_string(url.port);
  return out;
}

bool has_crlf(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

/// Connects `guard.fd` to one of the addresses of `url` before `deadline`.
bool connect_to(const http_url& url, steady::time_point deadline,
                milliseconds timeout, fd_guard& guard, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto port = std::to_string(url.port);
  int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    error = "cannot resolve '" + url.host + "': "
            + (rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc));
    return false;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addrs{found, ::freeaddrinfo};
  auto where = authority(url);
  error = "no address for '" + url.host + "'";
  for (auto* ai = found; ai != nullptr; ai = ai->ai_next) {
    fd_guard sock;
    sock.fd = ::socket(ai->ai_family,
                       ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       ai->ai_protocol);
    if (sock.fd < 0) {
      error = "socket: " + errno_text(errno);
      continue;
    }
    if (::connect(sock.fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = "connect to " + where + ": " + errno_text(errno);
        continue;
      }
      if (!wait_for(sock.fd, POLLOUT, deadline)) {
        error = "timed out after " + std::to_string(timeout.count())
                + " ms connecting to " + where;
        return false;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0)
        so_error = errno;
      if (so_error != 0) {
        error = "connect to " + where + ": " + errno_text(so_error);
        continue;
      }
    }
    std::swap(guard.fd, sock.fd);
    return true;
  }
  return false;
}

bool send_all(int fd, std::string_view data, steady::time_point deadline,
              milliseconds timeout, std::string& error) {
  while (!data.empty()) {
    auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      error = "send: " + errno_text(errno);
      return false;
    }
    if (!wait_for(fd, POLLOUT, deadline)) {
      error = "timed out after " + std::to_string(timeout.count())
              + " ms sending the request";
      return false;
    }
  }
  return true;
}

void receive(int fd, steady::time_point deadline, milliseconds timeout,
             http_post_result& r) {
  std::string buf;
  char chunk[16384];
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline)) {
      r.error = "timed out after " + std::to_string(timeout.count())
                + (buf.empty() ? " ms waiting for the response"
                               : " ms reading the response");
      return;
    }
    auto n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      r.error = "recv: " + errno_text(errno);
      return;
    }
    bool eof = n == 0;
    buf.append(chunk, static_cast<size_t>(n));
    switch (parse_response(buf, eof, r)) {
      case parse_state::complete:
        r.sent = true;
        r.error.clear();
        return;
      case parse_state::failed: return;
      case parse_state::incomplete:
        if (buf.size() > max_response_bytes) {
          r.error = "response exceeds 1 MiB";
          return;
        }
        break;
    }
  }
}

// -- retries ------------------------------------------------------------------

bool cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

/// Sleeps `d` in slices of at most 50 ms; false when cancelled meanwhile.
bool sleep_unless_cancelled(milliseconds d, const std::atomic<bool>* cancel) {
  auto end = steady::now() + d;
  for (;;) {
    if (cancelled(cancel))
      return false;
    auto now = steady::now();
    if (now >= end)
      return true;
    std::this_thread::sleep_for(
      std::min<steady::duration>(end - now, milliseconds{50}));
  }
}

/// A uniformly random duration in [0, limit].
milliseconds jitter(milliseconds limit) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  if (limit.count() <= 0)
    return milliseconds{0};
  std::uniform_int_distribution<int64_t> dist{0, limit.count()};
  return milliseconds{dist(rng)};
}

/// min(cap, base * 2^attempt) without overflowing.
milliseconds backoff_limit(const webhook_policy& p, uint32_t attempt) {
  auto limit = std::max(p.backoff_base, milliseconds{0});
  auto cap = std::max(p.backoff_cap, milliseconds{0});
  for (uint32_t i = 0; i < attempt && limit < cap; ++i)
    limit *= 2;
  return std::min(limit, cap);
}

/// Delta-seconds `Retry-After`; HTTP dates are ignored (jitter applies).
std::optional<milliseconds> retry_after(const http_post_result& r) {
  for (auto& [name, value] : r.headers) {
    if (name != "retry-after")
      continue;
    if (!all_digits(value) || value.size() > 9)
      return std::nullopt;
    return std::chrono::seconds{std::stol(value)};
  }
  return std::nullopt;
}

bool transient_status(int status) {
  return status == 408 || status == 429 || (status >= 500 && status < 600);
}

} // namespace

std::optional<http_url> parse_http_url(std::string_view url,
                                       std::string* error) {
  std::string_view rest;
  if (!split_scheme(url, rest, error))
    return std::nullopt;
  rest = rest.substr(0, rest.find('#'));
  auto auth_end = std::min(rest.find_first_of("/?"), rest.size());
  auto auth = rest.substr(0, auth_end);
  auto tail = rest.substr(auth_end);
  if (auth.find('@') != std::string_view::npos) {
    fail(error, "user info in URLs is not supported (use a bearer token)");
    return std::nullopt;
  }
  http_url out;
  std::optional<std::string_view> port_text;
  bool host_ok = !auth.empty() && auth.front() == '['
                   ? parse_ipv6_host(auth, out.host, port_text, error)
                   : parse_name_host(auth, out.host, port_text, error);
  if (!host_ok)
    return std::nullopt;
  if (out.host.empty()) {
    fail(error, "URL '" + excerpt(url) + "' has no host");
    return std::nullopt;
  }
  if (port_text && !parse_port(*port_text, out.port, error))
    return std::nullopt;
  if (tail.empty())
    out.target = "/";
  else if (tail.front() == '?')
    out.target = "/" + std::string{tail};
  else
    out.target = tail;
  return out;
}

http_post_result http_post(
  const http_url& url, std::string_view body, std::chrono::milliseconds timeout,
  const std::vector<std::pair<std::string, std::string>>& headers) {
  http_post_result r;
  try {
    auto deadline = steady::now() + timeout;
    std::string request;
    request.reserve(256 + body.size());
    request += "POST ";
    request += url.target.empty() ? "/" : url.target;
    request += " HTTP/1.1\r\nHost: ";
    request += authority(url);
    request += "\r\nContent-Type: application/json\r\nContent-Length: ";
    request += std::to_string(body.size());
    request += "\r\nConnection: close\r\n";
    if (has_crlf(url.target) || has_crlf(url.host)) {
      r.error = "URL contains CR or LF";
      return r;
    }
    for (auto& [name, value] : headers) {
      if (name.empty() || has_crlf(name) || has_crlf(value)
          || name.find(':') != std::string::npos) {
        r.error = "bad request header '" + excerpt(name) + "'";
        return r;
      }
      request += name;
      request += ": ";
      request += value;
      request += "\r\n";
    }
    request += "\r\n";
    request += body;
    fd_guard sock;
    if (!connect_to(url, deadline, timeout, sock, r.error))
      return r;
    if (!send_all(sock.fd, request, deadline, timeout, r.error))
      return r;
    receive(sock.fd, deadline, timeout, r);
    if (!r.sent) {
      r.status = 0;
      r.headers.clear();
      r.body.clear();
    }
  } catch (const std::exception& e) {
    r = http_post_result{};
    r.error = std::string{"http_post: "} + e.what();
  }
  return r;
}

webhook_outcome deliver_webhook(const http_url& url, std::string_view body,
                                std::string_view idempotency_key,
                                const webhook_policy& policy,
                                const std::atomic<bool>* cancel) {
  webhook_outcome out;
  auto on_cancel = [&] {
    out.error = out.error.empty() ? "cancelled"
                                  : "cancelled (last error: " + out.error + ")";
    out.retryable = true;
    return out;
  };
  std::vector<std::pair<std::string, std::string>> headers;
  headers.emplace_back("Idempotency-Key", std::string{idempotency_key});
  if (!policy.token.empty())
    headers.emplace_back("Authorization", "Bearer " + policy.token);
  for (uint32_t attempt = 0;; ++attempt) {
    if (cancelled(cancel))
      return on_cancel();
    auto r = http_post(url, body, policy.timeout, headers);
    ++out.attempts;
    out.status = r.sent ? r.status : 0;
    std::optional<milliseconds> wait;
    if (!r.sent) {
      out.error = std::move(r.error);
    } else if (r.status >= 200 && r.status < 300) {
      out.delivered = true;
      out.retryable = false;
      out.error.clear();
      return out;
    } else {
      out.error = "HTTP " + std::to_string(r.status);
      if (!r.body.empty())
        out.error += ": " + excerpt(r.body);
      if (!transient_status(r.status)) {
        if (r.status >= 300 && r.status < 400)
          out.error += " (redirects are not followed)";
        out.retryable = false;
        return out;
      }
      if (r.status == 429 || r.status == 503)
        wait = retry_after(r);
    }
    out.retryable = true;
    if (attempt >= policy.retries)
      return out;
    auto delay = wait ? std::min(*wait,
                                 std::max(policy.backoff_cap, milliseconds{0}))
                      : jitter(backoff_limit(policy, attempt));
    if (!sleep_unless_cancelled(delay, cancel))
      return on_cancel();
  }
}

} // namespace butlers
