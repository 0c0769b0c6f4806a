#include "runtime/webhook.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include "runtime/http_client.hpp"
#include "runtime/interruptible_sleep.hpp"

namespace butlers {

namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

/// Response bodies beyond this are read and dropped (the status is what
/// matters; the start of the body goes into error messages).
constexpr size_t max_body_bytes = 64 * 1024;

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

// -- URLs ---------------------------------------------------------------------

/// Checks that `url` is printable and http:// or https://; `rest` is what
/// follows the "://".
bool split_scheme(std::string_view url, std::string_view& rest, bool& tls,
                  std::string* error) {
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(error, "URL contains a space or control character");
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return fail(error, "URL '" + excerpt(url)
                         + "' has no scheme (expected http:// or https://)");
  auto scheme = to_lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https")
    return fail(error, "unsupported scheme '" + excerpt(scheme)
                         + "' (only http:// and https:// are)");
  tls = scheme == "https";
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

// -- retries ------------------------------------------------------------------

bool cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_relaxed);
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

bool transient_status(int status) {
  return status == 408 || status == 429 || (status >= 500 && status < 600);
}

} // namespace

std::string http_url::str() const {
  bool v6 = host.find(':') != std::string::npos;
  std::string out = tls ? "https://" : "http://";
  out += v6 ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80))
    out += ":" + std::to_string(port);
  out += target.empty() ? "/" : target;
  return out;
}

std::optional<http_url> parse_http_url(std::string_view url,
                                       std::string* error) {
  std::string_view rest;
  bool tls = false;
  if (!split_scheme(url, rest, tls, error))
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
  out.tls = tls;
  out.port = tls ? 443 : 80;
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
  http_request req;
  req.method = "POST";
  req.url = url.str();
  req.body = std::string{body};
  req.timeout = policy.timeout;
  req.connect_timeout = policy.timeout;
  req.headers.emplace_back("Content-Type", "application/json");
  req.headers.emplace_back("Idempotency-Key", std::string{idempotency_key});
  if (!policy.token.empty())
    req.headers.emplace_back("Authorization", "Bearer " + policy.token);
  std::string reply; // the start of the body, for error messages
  req.on_data = [&reply](std::string_view chunk) {
    reply.append(chunk.substr(0, max_body_bytes - reply.size()));
    return true;
  };
  for (uint32_t attempt = 0;; ++attempt) {
    if (cancelled(cancel))
      return on_cancel();
    reply.clear();
    auto r = shared_http_client().perform(req, cancel);
    ++out.attempts;
    if (r.failure == http_failure::cancelled)
      return on_cancel();
    bool answered = r.failure == http_failure::none;
    out.status = answered ? r.status : 0;
    std::optional<milliseconds> wait;
    if (!answered) {
      out.error = std::move(r.error);
    } else if (r.status >= 200 && r.status < 300) {
      out.delivered = true;
      out.retryable = false;
      out.error.clear();
      return out;
    } else {
      out.error = "HTTP " + std::to_string(r.status);
      if (!reply.empty())
        out.error += ": " + excerpt(reply);
      if (!transient_status(r.status)) {
        if (r.status >= 300 && r.status < 400)
          out.error += " (redirects are not followed)";
        out.retryable = false;
        return out;
      }
      if (r.status == 429 || r.status == 503)
        wait = r.retry_after();
    }
    out.retryable = true;
    if (attempt >= policy.retries)
      return out;
    auto delay = wait ? std::min(*wait,
                                 std::max(policy.backoff_cap, milliseconds{0}))
                      : jitter(backoff_limit(policy, attempt));
    if (!sleep_unless_stopped(delay, cancel))
      return on_cancel();
  }
}

} // namespace butlers
