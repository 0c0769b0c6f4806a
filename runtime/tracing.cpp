#include "runtime/tracing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include <openssl/evp.h>

#include "runtime/metrics.hpp"

namespace butlers {

// -- ids ----------------------------------------------------------------------

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

template<size_t N>
std::string hex_of(const std::array<uint8_t, N>& x) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = hex_digits[x[i] >> 4];
    out[2 * i + 1] = hex_digits[x[i] & 0x0f];
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1; // uppercase is invalid in traceparent
}

/// Decodes exactly 2 * N lowercase hex digits.
template<size_t N>
bool parse_hex(std::string_view s, std::array<uint8_t, N>& out) {
  if (s.size() != 2 * N)
    return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = hex_value(s[2 * i]);
    int lo = hex_value(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template<size_t N>
bool all_zero(const std::array<uint8_t, N>& x) {
  return std::all_of(x.begin(), x.end(), [](uint8_t b) {
    return b == 0;
  });
}

/// SHA-256 over length-prefixed parts.
std::array<uint8_t, 32> digest_of(std::string_view a, std::string_view b) {
  std::string data;
  data.reserve(a.size() + b.size() + 16);
  for (auto part : {a, b}) {
    data += std::to_string(part.size());
    data += ':';
    data.append(part.data(), part.size());
  }
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(),
                 nullptr)
      != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return out;
}

template<size_t N>
std::array<uint8_t, N> first_bytes(const std::array<uint8_t, 32>& d) {
  std::array<uint8_t, N> out{};
  std::copy(d.begin(), d.begin() + N, out.begin());
  if (all_zero(out))
    out[N - 1] = 1;
  return out;
}

} // namespace

std::string to_hex(const trace_id& x) {
  return hex_of(x);
}

std::string to_hex(const span_id& x) {
  return hex_of(x);
}

bool is_zero(const trace_id& x) {
  return all_zero(x);
}

bool is_zero(const span_id& x) {
  return all_zero(x);
}

std::optional<span_context> parse_traceparent(std::string_view s) {
  // vv-tttttttttttttttttttttttttttttttt-ssssssssssssssss-ff
  if (s.size() < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
    return std::nullopt;
  std::array<uint8_t, 1> version{};
  if (!parse_hex(s.substr(0, 2), version) || version[0] == 0xff)
    return std::nullopt;
  if (version[0] == 0 && s.size() != 55)
    return std::nullopt;
  if (s.size() > 55 && s[55] != '-')
    return std::nullopt;
  span_context out;
  std::array<uint8_t, 1> flags{};
  if (!parse_hex(s.substr(3, 32), out.trace)
      || !parse_hex(s.substr(36, 16), out.span)
      || !parse_hex(s.substr(53, 2), flags))
    return std::nullopt;
  if (!out.valid())
    return std::nullopt;
  out.flags = flags[0];
  return out;
}

std::string to_traceparent(const span_context& x) {
  std::string out = "00-";
  out += hex_of(x.trace);
  out += '-';
  out += hex_of(x.span);
  out += '-';
  out += hex_digits[x.flags >> 4];
  out += hex_digits[x.flags & 0x0f];
  return out;
}

namespace {

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
         || c == '-' || c == '*' || c == '/' || c == '@';
}

bool is_value_char(char c) {
  return c >= 0x20 && c <= 0x7e && c != ',' && c != '=';
}

/// One list member, without its surrounding optional white space.
bool usable_member(std::string_view m) {
  auto eq = m.find('=');
  if (eq == std::string_view::npos)
    return false;
  auto key = m.substr(0, eq);
  auto value = m.substr(eq + 1);
  if (key.empty() || key.size() > 256 || key[0] == '_' || key[0] == '-'
      || key[0] == '*' || key[0] == '/' || key[0] == '@')
    return false;
  if (!std::all_of(key.begin(), key.end(), is_key_char))
    return false;
  return !value.empty() && value.size() <= 256 && value.back() != ' '
         && std::all_of(value.begin(), value.end(), is_value_char);
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

} // namespace

bool usable_tracestate(std::string_view s) {
  if (s.size() > max_tracestate_bytes)
    return false;
  size_t members = 0;
  for (;;) {
    auto comma = s.find(',');
    auto m = trim_ows(s.substr(0, comma));
    if (!m.empty() && (++members > 32 || !usable_member(m)))
      return false;
    if (comma == std::string_view::npos)
      return members > 0;
    s.remove_prefix(comma + 1);
  }
}

trace_id derive_trace_id(std::string_view request_id) {
  return first_bytes<16>(digest_of(request_id, "trace"));
}

span_id derive_span_id(std::string_view request_id, std::string_view what) {
  return first_bytes<8>(digest_of(request_id, what));
}

span_id random_span_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  span_id out{};
  do {
    uint64_t v = gen();
    std::memcpy(out.data(), &v, sizeof v);
  } while (all_zero(out));
  return out;
}

bool sampled_by_ratio(const trace_id& x, double ratio) {
  if (!(ratio > 0.0))
    return false;
  if (ratio >= 1.0)
    return true;
  uint64_t v = 0;
  for (size_t i = 9; i < 16; ++i)
    v = (v << 8) | x[i];
  constexpr double two_56 = 72057594037927936.0; // 2^56
  return static_cast<double>(v) < ratio * two_56;
}

request_trace request_trace_for(std::string_view request_id,
                                std::string_view traceparent,
                                double sample_ratio,
                                std::string_view tracestate) {
  request_trace out;
  out.root.span = derive_span_id(request_id, "root");
  if (auto up = traceparent.empty() ? std::nullopt
                                    : parse_traceparent(traceparent)) {
    out.root.trace = up->trace;
    out.parent = up->span;
    out.root.flags = up->sampled() ? 0x01 : 0x00;
    out.root.tracestate = std::string{tracestate};
    return out;
  }
  out.root.trace = derive_trace_id(request_id);
  out.root.flags = sampled_by_ratio(out.root.trace, sample_ratio) ? 0x01 : 0x00;
  return out;
}

// -- spans --------------------------------------------------------------------

uint64_t unix_nanos_now() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
    duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}

span span::child_of(const request_trace& t, const span_id& parent_id,
                    span_id id, std::string name, uint64_t start_ns) {
  span s;
  s.trace = t.root.trace;
  s.id = id;
  s.parent = parent_id;
  s.flags = t.root.flags;
  s.tracestate = t.root.tracestate;
  s.name = std::move(name);
  s.start_ns = start_ns != 0 ? start_ns : unix_nanos_now();
  return s;
}

span span::child_of(const span_context& parent, span_id id, std::string name,
                    uint64_t start_ns) {
  span s;
  s.trace = parent.trace;
  s.id = id;
  s.parent = parent.span;
  s.flags = parent.flags;
  s.tracestate = parent.tracestate;
  s.name = std::move(name);
  s.start_ns = start_ns != 0 ? start_ns : unix_nanos_now();
  return s;
}

span span::root_of(const request_trace& t, std::string name,
                   uint64_t start_ns) {
  auto s = child_of(t, t.parent, t.root.span, std::move(name), start_ns);
  s.kind = span_kind::server;
  return s;
}

span_context span::context() const {
  span_context out;
  out.trace = trace;
  out.span = id;
  out.flags = flags;
  out.tracestate = tracestate;
  return out;
}

span& span::set(std::string key, std::string v) {
  attributes.push_back(attribute{std::move(key), std::move(v)});
  return *this;
}

span& span::set(std::string key, const char* v) {
  return set(std::move(key), std::string{v});
}

span& span::set(std::string key, int64_t v) {
  attributes.push_back(attribute{std::move(key), v});
  return *this;
}

span& span::set(std::string key, double v) {
  attributes.push_back(attribute{std::move(key), v});
  return *this;
}

span& span::set(std::string key, bool v) {
  attributes.push_back(attribute{std::move(key), v});
  return *this;
}

span& span::fail(std::string_view error_class, std::string message) {
  status = span_status::error;
  status_message = std::move(message);
  if (!error_class.empty())
    set("error.class", std::string{error_class});
  return *this;
}

span& span::end(uint64_t end) {
  end_ns = end != 0 ? end : unix_nanos_now();
  return *this;
}

} // namespace butlers
