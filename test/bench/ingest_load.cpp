// butlers_ingest_load: load generator for `POST /v1/ingest`.
//
// One thread, non-blocking sockets and epoll, so that it needs one core and
// leaves the other to the node and PostgreSQL. Persistent keep-alive
// connections, one request outstanding per connection (no pipelining).
//
//   --rate R > 0   open loop: request i is due at t0 + i / R and goes out on
//                  the first idle connection once due; its latency runs from
//                  the time it was *due* to its complete response, so a
//                  stalled server cannot hide its stall by slowing the
//                  client down (no coordinated omission).
//   --rate 0       saturation: closed loop, every connection always has one
//                  request outstanding; latency runs from the send.
//
// Requests due in [t0 + warmup, t0 + warmup + duration) are the measured
// ones. The program prints one `RESULT key=value ...` line for scripts and
// one line for people, and always ends by itself: at the latest
// warmup + duration + 10 s after it starts, whatever is still unanswered is
// counted as an error and every socket is closed.

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using nanos = int64_t;

constexpr nanos ns_per_s = 1'000'000'000;
constexpr nanos ns_per_ms = 1'000'000;

/// After the measured window, how long unanswered requests may still take.
constexpr nanos drain_cap = 10 * ns_per_s;

/// Wait before reconnecting after a failed connect or a dropped connection.
constexpr nanos reconnect_backoff = 100 * ns_per_ms;

/// Open loop: the timer wakes the generator at most this often; requests
/// that fell due since are sent together. Waking for every request at
/// 20,000/s took a third of a core on the machine it shares with the server.
/// A request sent late this way still counts its latency from when it was
/// due, so the wait is charged to the server, never hidden.
constexpr nanos tick_ns = 100'000;

nanos now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<nanos>(ts.tv_sec) * ns_per_s + ts.tv_nsec;
}

// -- options ------------------------------------------------------------------

struct options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/v1/ingest";
  std::string token;
  std::string endpoint_identity = "bench";
  /// sender.identity of every request; empty: one of 997 users by key.
  std::string sender;
  uint32_t connections = 64;
  /// Offered requests per second; 0 means saturation (closed loop).
  double rate = 0;
  double duration_s = 10;
  double warmup_s = 2;
  /// Fraction of requests that repeat an idempotency key sent before.
  double dup_ratio = 0;
  /// Prints, after the run, one line per 100 ms of the measured window:
  /// requests due in it, their slowest answer, how many took over 10 ms.
  bool timeline = false;
};

void usage(FILE* out) {
  std::fputs(
    "usage: butlers_ingest_load --port N [options]\n"
    "  --host ADDR            IPv4 address of the node (default 127.0.0.1)\n"
    "  --port N               HTTP port of the node (required)\n"
    "  --path P               request path (default /v1/ingest)\n"
    "  --token T              bearer token (default: none)\n"
    "  --endpoint-identity S  source.endpoint_identity (default bench)\n"
    "  --sender S             sender.identity of every request (default:\n"
    "                         one of 997 users, by request)\n"
    "  --connections N        keep-alive connections (default 64)\n"
    "  --rate R               offered requests/s; 0 = saturation (default 0)\n"
    "  --duration S           measured seconds (default 10)\n"
    "  --warmup S             seconds before the measured window (default 2)\n"
    "  --dup-ratio F          fraction 0..1 of requests that repeat an\n"
    "                         idempotency key already answered (default 0)\n"
    "  --timeline             after the run, print per 100 ms of the window\n"
    "                         the requests due, the slowest, how many took\n"
    "                         over 10 ms, and the latest send (to stderr),\n"
    "                         after a line with the window's start in Unix\n"
    "                         seconds, to match with server logs\n",
    out);
}

bool parse_double(const std::string& s, double& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && errno == 0 && end != nullptr && *end == '\0';
}

bool parse_uint(const std::string& s, uint64_t max, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  out = std::strtoull(s.c_str(), nullptr, 10);
  return errno == 0 && out <= max;
}

/// Fills `opts` from the command line; on error, prints why and returns
/// false.
bool parse_args(int argc, char** argv, options& opts, bool& help) {
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "butlers_ingest_load: %s\n", what.c_str());
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      return true;
    }
    if (arg == "--timeline") {
      opts.timeline = true;
      continue;
    }
    std::string value;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != arg.npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return fail("missing value for " + arg);
    }
    uint64_t u = 0;
    double d = 0;
    if (arg == "--host") {
      opts.host = value;
    } else if (arg == "--port") {
      if (!parse_uint(value, 65535, u) || u == 0)
        return fail("--port takes 1..65535");
      opts.port = static_cast<uint16_t>(u);
    } else if (arg == "--path") {
      if (value.empty() || value.front() != '/')
        return fail("--path must start with '/'");
      opts.path = value;
    } else if (arg == "--token") {
      opts.token = value;
    } else if (arg == "--endpoint-identity") {
      if (value.empty())
        return fail("--endpoint-identity must not be empty");
      opts.endpoint_identity = value;
    } else if (arg == "--sender") {
      if (value.empty())
        return fail("--sender must not be empty");
      opts.sender = value;
    } else if (arg == "--connections") {
      if (!parse_uint(value, 10000, u) || u == 0)
        return fail("--connections takes 1..10000");
      opts.connections = static_cast<uint32_t>(u);
    } else if (arg == "--rate") {
      if (!parse_double(value, d) || d < 0 || d > 10'000'000)
        return fail("--rate takes 0..10000000");
      opts.rate = d;
    } else if (arg == "--duration") {
      if (!parse_double(value, d) || d <= 0 || d > 86400)
        return fail("--duration takes seconds in (0, 86400]");
      opts.duration_s = d;
    } else if (arg == "--warmup") {
      if (!parse_double(value, d) || d < 0 || d > 86400)
        return fail("--warmup takes seconds in [0, 86400]");
      opts.warmup_s = d;
    } else if (arg == "--dup-ratio") {
      if (!parse_double(value, d) || d < 0 || d > 1)
        return fail("--dup-ratio takes 0..1");
      opts.dup_ratio = d;
    } else {
      return fail("unknown option " + arg + " (see --help)");
    }
  }
  if (opts.port == 0)
    return fail("--port is required (see --help)");
  return true;
}

// -- latency histogram --------------------------------------------------------

/// Log-bucketed histogram of microseconds, HdrHistogram-style: 64 linear
/// sub-buckets per power of two, so every recorded value is known within
/// 1/64 (1.6 %) in fixed memory whatever the run length.
class latency_histogram {
 public:
  void record(uint64_t us) {
    auto i = index_of(us);
    if (i >= counts_.size())
      i = counts_.size() - 1;
    ++counts_[i];
    ++total_;
    max_ = std::max(max_, us);
  }

  uint64_t count() const {
    return total_;
  }

  uint64_t max() const {
    return max_;
  }

  /// The smallest bucket bound below which a fraction `q` of the values lie
  /// (the exact maximum for q = 1); 0 when empty.
  uint64_t percentile(double q) const {
    if (total_ == 0)
      return 0;
    auto rank = static_cast<uint64_t>(q * static_cast<double>(total_) + 0.5);
    rank = std::clamp<uint64_t>(rank, 1, total_);
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank)
        return i + 1 == counts_.size() ? max_
                                       : std::min(upper_bound_of(i), max_);
    }
    return max_;
  }

 private:
  static constexpr size_t sub_bits = 7; // 128 exact values, then 64 / octave
  static constexpr size_t half = size_t{1} << (sub_bits - 1);

  static size_t index_of(uint64_t v) {
    if (v < 2 * half)
      return static_cast<size_t>(v);
    auto msb = static_cast<size_t>(63 - __builtin_clzll(v));
    auto shift = msb - (sub_bits - 1);
    return shift * half + static_cast<size_t>(v >> shift);
  }

  static uint64_t upper_bound_of(size_t i) {
    if (i < 2 * half)
      return i;
    auto shift = i / half - 1;
    auto sub = i - shift * half;
    return ((static_cast<uint64_t>(sub) + 1) << shift) - 1;
  }

  // Up to 2^40 us (12 days): far beyond any run.
  std::array<uint64_t, (40 - sub_bits + 2) * half> counts_{};
  uint64_t total_ = 0;
  uint64_t max_ = 0;
};

// -- HTTP/1.1 response parsing -----------------------------------------------

struct http_response {
  int status = 0;
  /// Bytes of the buffer this response occupied.
  size_t consumed = 0;
  /// The server announced `Connection: close`.
  bool close = false;
  std::string body;
};

enum class parse_result { incomplete, complete, error };

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i]))
        != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// Decodes a chunked body starting at `pos`; sets `end` past the final
/// CRLF. Chunk extensions and trailers are skipped.
parse_result decode_chunked(std::string_view buf, size_t pos, std::string& body,
                            size_t& end) {
  body.clear();
  for (;;) {
    auto eol = buf.find("\r\n", pos);
    if (eol == buf.npos)
      return parse_result::incomplete;
    auto line = buf.substr(pos, eol - pos);
    if (auto semi = line.find(';'); semi != line.npos)
      line = line.substr(0, semi);
    line = trim(line);
    if (line.empty() || line.size() > 15)
      return parse_result::error;
    size_t n = 0;
    for (char c : line) {
      int digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return parse_result::error;
      n = n * 16 + static_cast<size_t>(digit);
    }
    pos = eol + 2;
    if (n == 0) {
      // Trailers, then an empty line.
      for (;;) {
        auto t = buf.find("\r\n", pos);
        if (t == buf.npos)
          return parse_result::incomplete;
        if (t == pos) {
          end = pos + 2;
          return parse_result::complete;
        }
        pos = t + 2;
      }
    }
    if (buf.size() < pos + n + 2)
      return parse_result::incomplete;
    if (buf.substr(pos + n, 2) != "\r\n")
      return parse_result::error;
    body.append(buf.substr(pos, n));
    pos += n + 2;
  }
}

/// Parses one response from the front of `buf`. Responses without a
/// Content-Length and not chunked are not expected from the node and are
/// treated as errors, except those that never carry a body.
parse_result parse_response(std::string_view buf, http_response& out) {
  auto head_end = buf.find("\r\n\r\n");
  if (head_end == buf.npos)
    return buf.size() > 65536 ? parse_result::error : parse_result::incomplete;
  auto head = buf.substr(0, head_end + 2);
  auto eol = head.find("\r\n");
  auto status_line = head.substr(0, eol);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12)
    return parse_result::error;
  out = http_response{};
  for (size_t i = 9; i < 12; ++i) {
    if (status_line[i] < '0' || status_line[i] > '9')
      return parse_result::error;
    out.status = out.status * 10 + (status_line[i] - '0');
  }
  bool http10 = status_line.rfind("HTTP/1.0", 0) == 0;
  bool keep_alive = false;
  bool chunked = false;
  bool have_length = false;
  size_t length = 0;
  for (size_t pos = eol + 2; pos < head.size();) {
    auto next = head.find("\r\n", pos);
    auto line = head.substr(pos, next - pos);
    pos = next + 2;
    auto colon = line.find(':');
    if (colon == line.npos)
      continue;
    auto name = trim(line.substr(0, colon));
    auto value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      uint64_t n = 0;
      if (!parse_uint(std::string{value}, uint64_t{1} << 32, n))
        return parse_result::error;
      have_length = true;
      length = static_cast<size_t>(n);
    } else if (iequals(name, "transfer-encoding")) {
      chunked = value.size() >= 7
                && iequals(value.substr(value.size() - 7), "chunked");
    } else if (iequals(name, "connection")) {
      if (iequals(value, "close"))
        out.close = true;
      else if (iequals(value, "keep-alive"))
        keep_alive = true;
    }
  }
  if (http10 && !keep_alive)
    out.close = true;
  auto body_start = head_end + 4;
  if (chunked)
    return decode_chunked(buf, body_start, out.body, out.consumed);
  if (!have_length) {
    if (out.status == 204 || out.status == 304
        || (out.status >= 100 && out.status < 200)) {
      out.consumed = body_start;
      return parse_result::complete;
    }
    return parse_result::error;
  }
  if (buf.size() < body_start + length)
    return parse_result::incomplete;
  out.body.assign(buf.substr(body_start, length));
  out.consumed = body_start + length;
  return parse_result::complete;
}

/// Whether a 202 body says `"duplicate": true`.
bool says_duplicate(std::string_view body) {
  auto at = body.find("\"duplicate\"");
  if (at == body.npos)
    return false;
  auto rest = body.substr(at + 11);
  size_t i = 0;
  while (i < rest.size() && (rest[i] == ' ' || rest[i] == ':'))
    ++i;
  return rest.substr(i, 4) == "true";
}

// -- request bodies -----------------------------------------------------------

/// A few realistic messages: the router sees the text, the inbox stores it.
constexpr std::array<std::string_view, 6> texts = {
  "Remind me to call the pharmacy about my prescription refill tomorrow "
  "morning",
  "Can you move my dentist appointment to next Thursday afternoon please",
  "I slept badly again, only five hours; log it and suggest something",
  "Book a table for two on Friday evening somewhere near the office",
  "What did I spend on groceries this month compared to last month?",
  "Add a 30 minute run to my calendar every Monday and Wednesday at 7",
};

/// Builds complete HTTP requests. A request is a function of its key number
/// only, so a duplicate repeats its original byte for byte, as a client
/// retry would.
class request_factory {
 public:
  request_factory(const options& opts, std::string run_id)
    : run_id_(std::move(run_id)) {
    head_ = "POST " + opts.path + " HTTP/1.1\r\nHost: " + opts.host + ":"
            + std::to_string(opts.port)
            + "\r\nContent-Type: application/json\r\n"
              "Accept: application/json\r\n";
    if (!opts.token.empty())
      head_ += "Authorization: Bearer " + opts.token + "\r\n";
    head_ += "Content-Length: ";
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    observed_at_ = stamp;
    unix_s_ = std::to_string(static_cast<long long>(t));
    endpoint_ = opts.endpoint_identity;
    sender_ = opts.sender;
  }

  const std::string& run_id() const {
    return run_id_;
  }

  /// The request for key number `k`, written into `out`.
  void build(uint64_t k, std::string& out) {
    auto id = run_id_ + "-" + std::to_string(k);
    auto n = std::to_string(k);
    auto user = std::to_string(1000 + k % 997);
    auto text = texts[k % texts.size()];
    body_.clear();
    body_ += R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
             R"("provider":"internal","endpoint_identity":")";
    body_ += endpoint_;
    body_ += R"("},"event":{"external_event_id":")";
    body_ += id;
    body_ += R"(","observed_at":")";
    body_ += observed_at_;
    body_ += R"("},"sender":{"identity":")";
    body_ += sender_.empty() ? "user-" + user : sender_;
    body_ += R"("},"payload":{"raw":{"update_id":)";
    body_ += n;
    body_ += R"(,"message":{"message_id":)";
    body_ += n;
    body_ += R"(,"date":)";
    body_ += unix_s_;
    body_ += R"(,"chat":{"id":)";
    body_ += user;
    body_ += R"(,"type":"private"},"from":{"id":)";
    body_ += user;
    body_ += R"(,"is_bot":false,"first_name":"Bench","language_code":"en"},)"
             R"("text":")";
    body_ += text;
    body_ += R"("}},"normalized_text":")";
    body_ += text;
    body_ += R"("},"control":{"idempotency_key":")";
    body_ += id;
    body_ += R"("}})";
    out = head_;
    out += std::to_string(body_.size());
    out += "\r\n\r\n";
    out += body_;
  }

 private:
  std::string run_id_;
  std::string head_;
  std::string observed_at_;
  std::string unix_s_;
  std::string endpoint_;
  std::string sender_;
  std::string body_;
};

std::string random_run_id() {
  std::random_device rd;
  uint64_t v = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(now_ns());
  char buf[32];
  std::snprintf(buf, sizeof buf, "bench-%012" PRIx64,
                v & uint64_t{0xffffffffffff});
  return buf;
}

// -- the load generator -------------------------------------------------------

enum class conn_state { down, connecting, idle, busy };

struct connection {
  int fd = -1;
  conn_state state = conn_state::down;
  /// Ever connected: decides whether a failure is worth a backoff.
  bool connected_once = false;
  /// When a `down` connection may reconnect.
  nanos retry_at = 0;
  std::string out;
  size_t out_off = 0;
  std::string in;
  // The outstanding request.
  nanos due = 0;
  uint64_t key = 0;
  bool measured = false;
  bool duplicate = false;
};

struct tally {
  uint64_t sent = 0;
  uint64_t ok_202 = 0;
  uint64_t deduped = 0;
  uint64_t status_429 = 0;
  uint64_t status_503 = 0;
  uint64_t other = 0;
  /// No HTTP answer: connection failed or closed, bad response, or still
  /// unanswered at the hard deadline.
  uint64_t errors = 0;
  /// Part of errors: requests due in the window that were never sent.
  uint64_t unsent = 0;
  /// Requests repeating an answered key that got 202 without duplicate=true.
  uint64_t dup_missed = 0;
  /// Unique-key requests answered duplicate=true.
  uint64_t false_dups = 0;
  /// 202 answers completed inside the measured window (throughput).
  uint64_t window_202 = 0;
  /// Any answer completed inside the measured window.
  uint64_t window_answers = 0;
};

class load_generator {
 public:
  explicit load_generator(options opts)
    : opts_(std::move(opts)), requests_(opts_, random_run_id()),
      rng_(std::random_device{}()) {
    conns_.resize(opts_.connections);
  }

  ~load_generator() {
    for (auto& c : conns_)
      if (c.fd >= 0)
        ::close(c.fd);
    if (timer_fd_ >= 0)
      ::close(timer_fd_);
    if (epoll_fd_ >= 0)
      ::close(epoll_fd_);
  }

  /// Runs the whole load; false if it could not start at all.
  bool run() {
    auto start = now_ns();
    auto warmup = static_cast<nanos>(opts_.warmup_s * ns_per_s);
    auto duration = static_cast<nanos>(opts_.duration_s * ns_per_s);
    hard_deadline_ = start + warmup + duration + drain_cap;
    if (!resolve() || !setup_epoll())
      return false;
    // Open every connection before the clock starts, for at most 5 s.
    for (size_t i = 0; i < conns_.size(); ++i)
      open(i, start);
    auto connect_deadline = std::min(start + 5 * ns_per_s, hard_deadline_);
    for (auto now = start;
         connected() < conns_.size() && now < connect_deadline;
         now = now_ns()) {
      reconnect(now);
      poll_once(std::min(connect_deadline, next_retry()));
    }
    if (connected() == 0) {
      std::fprintf(stderr, "butlers_ingest_load: cannot connect to %s:%u: %s\n",
                   opts_.host.c_str(), opts_.port,
                   last_error_.empty() ? "timeout" : last_error_.c_str());
      return false;
    }
    t0_ = now_ns();
    window_start_ = t0_ + warmup;
    window_end_ = window_start_ + duration;
    if (opts_.rate > 0)
      total_ = static_cast<uint64_t>(
        (static_cast<double>(warmup + duration) / ns_per_s) * opts_.rate);
    for (;;) {
      auto now = now_ns();
      if (now >= hard_deadline_)
        break;
      dispatch(now);
      if (now >= window_end_ && outstanding() == 0 && !backlog(now))
        break;
      poll_once(next_wake(now));
    }
    finish();
    return true;
  }

  void report() const {
    double secs = opts_.duration_s;
    bool open_loop = opts_.rate > 0;
    auto ms = [&](double q) {
      return static_cast<double>(hist_.percentile(q)) / 1000.0;
    };
    double accepted_per_s = static_cast<double>(tally_.window_202) / secs;
    double answered_per_s = static_cast<double>(tally_.window_answers) / secs;
    std::printf(
      "RESULT mode=%s offered=%.1f duration_s=%.1f sent=%" PRIu64
      " ok_202=%" PRIu64 " deduped=%" PRIu64 " status_429=%" PRIu64
      " status_503=%" PRIu64 " other=%" PRIu64 " errors=%" PRIu64
      " accepted_per_s=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f"
      " answered_per_s=%.1f unsent=%" PRIu64 " dup_missed=%" PRIu64
      " false_dups=%" PRIu64 " connections=%u dup_ratio=%.3f warmup_s=%.1f"
      " run_id=%s\n",
      open_loop ? "open" : "saturation", opts_.rate, secs, tally_.sent,
      tally_.ok_202, tally_.deduped, tally_.status_429, tally_.status_503,
      tally_.other, tally_.errors, accepted_per_s, ms(0.50), ms(0.90), ms(0.99),
      static_cast<double>(hist_.max()) / 1000.0, answered_per_s, tally_.unsent,
      tally_.dup_missed, tally_.false_dups, opts_.connections, opts_.dup_ratio,
      opts_.warmup_s, requests_.run_id().c_str());
    char offered[64] = "saturation";
    if (open_loop)
      std::snprintf(offered, sizeof offered, "offered %.0f req/s", opts_.rate);
    std::printf("%s, %u connections, %.1f s measured: %.0f accepted/s (%" PRIu64
                " answers 202 in all, %" PRIu64
                " of them deduplicated), latency p50 %.2f ms, p90 %.2f ms, "
                "p99 %.2f ms, max %.2f ms; 429: %" PRIu64 ", 503: %" PRIu64
                ", other: %" PRIu64 ", errors: %" PRIu64 "\n",
                offered, opts_.connections, secs, accepted_per_s, tally_.ok_202,
                tally_.deduped, ms(0.50), ms(0.90), ms(0.99),
                static_cast<double>(hist_.max()) / 1000.0, tally_.status_429,
                tally_.status_503, tally_.other, tally_.errors);
    std::fflush(stdout);
  }

 private:
  // -- setup ------------------------------------------------------------------

  bool resolve() {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    auto port = std::to_string(opts_.port);
    if (int rc = ::getaddrinfo(opts_.host.c_str(), port.c_str(), &hints, &res);
        rc != 0 || res == nullptr) {
      std::fprintf(stderr, "butlers_ingest_load: cannot resolve %s: %s\n",
                   opts_.host.c_str(), ::gai_strerror(rc));
      return false;
    }
    std::memcpy(&addr_, res->ai_addr, sizeof addr_);
    ::freeaddrinfo(res);
    return true;
  }

  bool setup_epoll() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_fd_ < 0 || timer_fd_ < 0) {
      std::perror("butlers_ingest_load: epoll/timerfd");
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = timer_tag;
    return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) == 0;
  }

  // -- connections ------------------------------------------------------------

  size_t connected() const {
    return static_cast<size_t>(
      std::count_if(conns_.begin(), conns_.end(), [](const connection& c) {
        return c.state == conn_state::idle || c.state == conn_state::busy;
      }));
  }

  size_t outstanding() const {
    return static_cast<size_t>(
      std::count_if(conns_.begin(), conns_.end(), [](const connection& c) {
        return c.state == conn_state::busy;
      }));
  }

  void watch(size_t i, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = i;
    ::epoll_ctl(epoll_fd_, op, conns_[i].fd, &ev);
  }

  void open(size_t i, nanos now) {
    auto& c = conns_[i];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      last_error_ = std::strerror(errno);
      c.state = conn_state::down;
      c.retry_at = now + reconnect_backoff;
      return;
    }
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c.in.clear();
    c.out.clear();
    c.out_off = 0;
    auto rc = ::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_),
                        sizeof addr_);
    if (rc == 0) {
      c.state = conn_state::idle;
      c.connected_once = true;
      watch(i, EPOLLIN, EPOLL_CTL_ADD);
      idle_.push_back(i);
    } else if (errno == EINPROGRESS) {
      c.state = conn_state::connecting;
      watch(i, EPOLLOUT, EPOLL_CTL_ADD);
    } else {
      last_error_ = std::strerror(errno);
      ::close(c.fd);
      c.fd = -1;
      c.state = conn_state::down;
      c.retry_at = now + reconnect_backoff;
    }
  }

  /// Closes connection `i`; its outstanding request, if any, is an error.
  void drop(size_t i, nanos now, const char* why) {
    auto& c = conns_[i];
    if (why != nullptr)
      last_error_ = why;
    if (c.state == conn_state::busy && c.measured)
      ++tally_.errors;
    if (c.state == conn_state::idle)
      idle_.erase(std::remove(idle_.begin(), idle_.end(), i), idle_.end());
    if (c.fd >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
    }
    c.fd = -1;
    c.state = conn_state::down;
    // A server that closes a keep-alive connection gets an immediate
    // reconnect; one that refuses connections gets a backoff.
    c.retry_at = c.connected_once && why == nullptr ? now
                                                    : now + reconnect_backoff;
  }

  nanos next_retry() const {
    nanos t = hard_deadline_;
    for (auto& c : conns_)
      if (c.state == conn_state::down)
        t = std::min(t, c.retry_at);
    return t;
  }

  // -- sending ----------------------------------------------------------------

  nanos due_of(uint64_t i) const {
    return t0_
           + static_cast<nanos>(static_cast<double>(i) * ns_per_s / opts_.rate);
  }

  /// Open loop: a request is due and not sent yet.
  bool backlog(nanos now) const {
    return opts_.rate > 0 && next_ < total_ && due_of(next_) <= now;
  }

  uint64_t pick_key() {
    if (opts_.dup_ratio > 0 && !answered_keys_.empty()
        && std::uniform_real_distribution<double>{0, 1}(rng_)
             < opts_.dup_ratio) {
      std::uniform_int_distribution<size_t> pick{0, answered_keys_.size() - 1};
      last_pick_dup_ = true;
      return answered_keys_[pick(rng_)];
    }
    last_pick_dup_ = false;
    return next_key_++;
  }

  /// Reopens the connections that are down and due for it.
  void reconnect(nanos now) {
    for (size_t i = 0; i < conns_.size(); ++i)
      if (conns_[i].state == conn_state::down && conns_[i].retry_at <= now)
        open(i, now);
  }

  void dispatch(nanos now) {
    // While draining, only an open-loop backlog still needs connections.
    if (now < window_end_ || backlog(now))
      reconnect(now);
    while (!idle_.empty()) {
      nanos due;
      if (opts_.rate > 0) {
        if (!backlog(now))
          return;
        due = due_of(next_++);
      } else {
        if (now >= window_end_)
          return;
        due = now;
      }
      auto i = idle_.back();
      idle_.pop_back();
      send(i, due, now);
    }
  }

  void send(size_t i, nanos due, nanos now) {
    auto& c = conns_[i];
    c.key = pick_key();
    c.duplicate = last_pick_dup_;
    c.due = due;
    c.measured = due >= window_start_ && due < window_end_;
    c.state = conn_state::busy;
    requests_.build(c.key, c.out);
    c.out_off = 0;
    if (c.measured)
      ++tally_.sent;
    if (c.measured && opts_.timeline)
      slice_of(due).sent_late(std::max<nanos>(0, now - due));
    flush(i, now);
  }

  void flush(size_t i, nanos now) {
    auto& c = conns_[i];
    while (c.out_off < c.out.size()) {
      auto n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                      MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(i, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
        return;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        drop(i, now, std::strerror(errno));
        return;
      }
    }
    c.out.clear();
    c.out_off = 0;
  }

  // -- receiving --------------------------------------------------------------

  void on_readable(size_t i, nanos now) {
    auto& c = conns_[i];
    char buf[16384];
    bool eof = false;
    for (;;) {
      auto n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (static_cast<size_t>(n) < sizeof buf)
          break;
      } else if (n == 0) {
        eof = true;
        break;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else {
        drop(i, now, std::strerror(errno));
        return;
      }
    }
    // One request is outstanding at most, so at most one response is due.
    if (!c.in.empty()) {
      if (c.state != conn_state::busy) {
        drop(i, now, "unsolicited data from the server");
        return;
      }
      http_response r;
      switch (parse_response(c.in, r)) {
        case parse_result::incomplete: break;
        case parse_result::error:
          drop(i, now, "malformed HTTP response");
          return;
        case parse_result::complete:
          c.in.erase(0, r.consumed);
          complete(i, r, now);
          c.state = conn_state::idle;
          if (r.close || eof) {
            drop(i, now, nullptr);
            return;
          }
          idle_.push_back(i);
          if (!c.in.empty()) {
            drop(i, now, "unsolicited data from the server");
            return;
          }
          break;
      }
    }
    if (eof)
      drop(i, now, c.state == conn_state::busy ? "connection closed" : nullptr);
  }

  void complete(size_t i, const http_response& r, nanos now) {
    auto& c = conns_[i];
    bool dup_answer = r.status == 202 && says_duplicate(r.body);
    if (now >= window_start_ && now < window_end_) {
      ++tally_.window_answers;
      if (r.status == 202)
        ++tally_.window_202;
    }
    if (r.status == 202 && !c.duplicate && !dup_answer)
      remember(c.key);
    if (!c.measured)
      return;
    auto latency_us = static_cast<uint64_t>(std::max<nanos>(0, now - c.due)
                                            / 1000);
    hist_.record(latency_us);
    if (opts_.timeline)
      slice_of(c.due).record(latency_us);
    switch (r.status) {
      case 202:
        ++tally_.ok_202;
        if (dup_answer)
          ++tally_.deduped;
        if (c.duplicate && !dup_answer)
          ++tally_.dup_missed;
        if (!c.duplicate && dup_answer)
          ++tally_.false_dups;
        break;
      case 429: ++tally_.status_429; break;
      case 503: ++tally_.status_503; break;
      default:
        if (tally_.other++ == 0 && !r.body.empty())
          std::fprintf(stderr,
                       "butlers_ingest_load: first other answer: %d %s\n",
                       r.status, r.body.substr(0, 300).c_str());
    }
  }

  /// Keeps keys answered 202 as candidates for duplicates: at most 1 Mi of
  /// them, replaced at random beyond that.
  void remember(uint64_t key) {
    constexpr size_t cap = size_t{1} << 20;
    if (answered_keys_.size() < cap) {
      answered_keys_.push_back(key);
    } else {
      std::uniform_int_distribution<size_t> pick{0, cap - 1};
      answered_keys_[pick(rng_)] = key;
    }
  }

  void on_connected(size_t i, nanos now) {
    auto& c = conns_[i];
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      auto fd = c.fd;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      ::close(fd);
      c.fd = -1;
      c.state = conn_state::down;
      c.retry_at = now + reconnect_backoff;
      last_error_ = std::strerror(err);
      return;
    }
    c.state = conn_state::idle;
    c.connected_once = true;
    watch(i, EPOLLIN, EPOLL_CTL_MOD);
    idle_.push_back(i);
  }

  // -- the loop ---------------------------------------------------------------

  nanos next_wake(nanos now) const {
    nanos t = std::min(hard_deadline_, next_retry());
    if (now < window_end_)
      t = std::min(t, window_end_);
    if (opts_.rate > 0 && next_ < total_ && !idle_.empty())
      t = std::min(t, std::max(due_of(next_), woke_ + tick_ns));
    return t;
  }

  /// Waits for socket events until `wake` at the latest and handles them.
  void poll_once(nanos wake) {
    auto now = now_ns();
    int timeout_ms = 0;
    if (wake > now) {
      // Armed once per wake-up time, not once per round of socket events:
      // the generator shares the machine with the server it measures.
      if (wake != armed_) {
        itimerspec its{};
        its.it_value.tv_sec = static_cast<time_t>(wake / ns_per_s);
        its.it_value.tv_nsec = static_cast<long>(wake % ns_per_s);
        ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
        armed_ = wake;
      }
      timeout_ms = -1;
    }
    std::array<epoll_event, 256> events;
    int n = ::epoll_wait(epoll_fd_, events.data(),
                         static_cast<int>(events.size()), timeout_ms);
    now = now_ns();
    woke_ = now;
    for (int k = 0; k < n; ++k) {
      auto tag = events[k].data.u64;
      if (tag == timer_tag) {
        uint64_t expirations;
        [[maybe_unused]] auto r = ::read(timer_fd_, &expirations,
                                         sizeof expirations);
        armed_ = 0;
        continue;
      }
      auto i = static_cast<size_t>(tag);
      auto& c = conns_[i];
      if (c.fd < 0)
        continue;
      auto ev = events[k].events;
      if (c.state == conn_state::connecting) {
        on_connected(i, now);
        continue;
      }
      if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        on_readable(i, now);
      if (c.fd >= 0 && (ev & EPOLLOUT) && c.state == conn_state::busy) {
        flush(i, now);
        if (c.fd >= 0 && c.out.empty())
          watch(i, EPOLLIN, EPOLL_CTL_MOD);
      }
    }
  }

  /// At the end: everything still unanswered or unsent in the window is an
  /// error.
  void finish() {
    auto now = now_ns();
    for (size_t i = 0; i < conns_.size(); ++i)
      drop(i, now, nullptr);
    if (opts_.rate > 0) {
      for (; next_ < total_; ++next_) {
        auto due = due_of(next_);
        if (due >= window_end_)
          break;
        if (due >= window_start_) {
          ++tally_.unsent;
          ++tally_.errors;
        }
      }
    }
  }

  static constexpr uint64_t timer_tag = ~uint64_t{0};

  options opts_;
  request_factory requests_;
  std::mt19937_64 rng_;
  std::vector<connection> conns_;
  std::vector<size_t> idle_;
  sockaddr_in addr_{};
  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  /// The wake-up time the timer is armed for, 0 once it fired.
  nanos armed_ = 0;
  /// When epoll_wait last returned.
  nanos woke_ = 0;
  nanos t0_ = 0;
  nanos window_start_ = 0;
  nanos window_end_ = 0;
  nanos hard_deadline_ = 0;
  /// Open loop: requests scheduled in all, and the next one to send.
  uint64_t total_ = 0;
  uint64_t next_ = 0;
  uint64_t next_key_ = 0;
  bool last_pick_dup_ = false;
  std::vector<uint64_t> answered_keys_;
  tally tally_;
  latency_histogram hist_;
  std::string last_error_;

  struct slice {
    uint64_t count = 0;
    uint64_t max_us = 0;
    uint64_t over_10ms = 0;
    /// How late the generator sent a request after it was due: its own
    /// delays (no idle connection, or its thread not running), not the
    /// server's.
    uint64_t max_send_late_us = 0;
    void sent_late(nanos ns) {
      max_send_late_us = std::max(max_send_late_us,
                                  static_cast<uint64_t>(ns / 1000));
    }
    void record(uint64_t us) {
      ++count;
      max_us = std::max(max_us, us);
      over_10ms += us > 10'000 ? 1 : 0;
    }
  };
  static constexpr nanos slice_ns = 100'000'000;
  std::vector<slice> slices_;

  slice& slice_of(nanos due) {
    auto k = static_cast<size_t>((due - window_start_) / slice_ns);
    if (k >= slices_.size())
      slices_.resize(k + 1);
    return slices_[k];
  }

 public:
  void print_timeline() const {
    // The window's start on the wall clock, to match slices with the
    // node's and PostgreSQL's logs.
    timespec mono{};
    timespec wall{};
    ::clock_gettime(CLOCK_MONOTONIC, &mono);
    ::clock_gettime(CLOCK_REALTIME, &wall);
    auto ago = static_cast<nanos>(mono.tv_sec) * ns_per_s + mono.tv_nsec
               - window_start_;
    auto start = static_cast<nanos>(wall.tv_sec) * ns_per_s + wall.tv_nsec
                 - ago;
    std::fprintf(stderr, "timeline window_start_unix=%.3f\n",
                 static_cast<double>(start) / ns_per_s);
    for (size_t k = 0; k < slices_.size(); ++k)
      std::fprintf(stderr,
                   "timeline t=%.1fs due=%" PRIu64
                   " max_ms=%.1f over_10ms=%" PRIu64 " max_send_late_ms=%.1f\n",
                   static_cast<double>(k) / 10.0, slices_[k].count,
                   static_cast<double>(slices_[k].max_us) / 1000.0,
                   slices_[k].over_10ms,
                   static_cast<double>(slices_[k].max_send_late_us) / 1000.0);
  }
};

} // namespace

int main(int argc, char** argv) {
  options opts;
  bool help = false;
  if (!parse_args(argc, argv, opts, help))
    return 2;
  if (help) {
    usage(stdout);
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  load_generator gen{opts};
  if (!gen.run())
    return 1;
  gen.report();
  if (opts.timeline)
    gen.print_timeline();
  return 0;
}
