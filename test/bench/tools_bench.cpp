// The tool server's round trip over MCP on loopback: `state_put` and
// `notify` (answered once the messenger delivered to the outbox), each
// call timed from the request's first byte sent to the answer's last byte
// read on a keep-alive connection, beside the floor of the same upsert
// made directly through libpqxx (a prepared INSERT ... ON CONFLICT DO
// UPDATE on a scratch table, one transaction per call) against the same
// PostgreSQL. Prints a Markdown table. run_tools_bench.sh starts
// PostgreSQL and a node whose sessions wrote their tokens.
//
//   butlers_tools_bench PORT DATABASE_URL TOKENS_FILE [--puts N]
//       [--notifies N] [--pings N] [--warmup N] [--threads T]
//       [--concurrent-calls N]
//
// TOKENS_FILE: one capability token a line (the first for the sequential
// rows; T of them for the concurrent rows, one session each).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "runtime/json.hpp"

using std::chrono::steady_clock;

namespace {

constexpr int io_timeout_ms = 30000;

double ms_since(steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady_clock::now() - t0)
    .count();
}

struct response {
  int status = 0;
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;
};

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// One keep-alive HTTP/1.1 connection to 127.0.0.1:port; every socket
/// operation bounded. Reconnects (and counts it) when the server closed.
class connection {
 public:
  explicit connection(uint16_t port) : port_(port) {
    // nop
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    close_fd();
  }

  int reconnects() const {
    return connects_ > 0 ? connects_ - 1 : 0;
  }

  /// Sends `raw` and reads one response; false (with `err`) on failure.
  bool exchange(const std::string& raw, response& out, std::string& err) {
    if (fd_ < 0 && !open(err))
      return false;
    if (!send_all(raw)) {
      // A connection the server closed while idle: once more on a new one.
      close_fd();
      if (!open(err) || !send_all(raw)) {
        err = "send failed: " + std::string{std::strerror(errno)};
        return false;
      }
    }
    return read_response(out, err);
  }

 private:
  bool open(std::string& err) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) {
      err = "socket: " + std::string{std::strerror(errno)};
      return false;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      err = "connect: " + std::string{std::strerror(errno)};
      close_fd();
      return false;
    }
    ++connects_;
    buf_.clear();
    return true;
  }

  void close_fd() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  bool wait(short events) {
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, io_timeout_ms) == 1;
  }

  bool send_all(const std::string& raw) {
    size_t off = 0;
    while (off < raw.size()) {
      if (!wait(POLLOUT))
        return false;
      auto n = ::send(fd_, raw.data() + off, raw.size() - off, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  /// Reads more into buf_; false on EOF, error or timeout.
  bool fill(std::string& err) {
    if (!wait(POLLIN)) {
      err = "no answer within 30 s";
      return false;
    }
    char tmp[16384];
    auto n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      err = n == 0 ? "connection closed" : std::strerror(errno);
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  bool read_response(response& out, std::string& err) {
    out = response{};
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(err)) {
        close_fd();
        return false;
      }
    auto status_end = buf_.find("\r\n");
    auto sp = buf_.find(' ');
    out.status = sp < status_end ? std::atoi(buf_.c_str() + sp + 1) : 0;
    size_t pos = status_end + 2;
    while (pos < head_end) {
      auto eol = buf_.find("\r\n", pos);
      auto colon = buf_.find(':', pos);
      if (colon != std::string::npos && colon < eol) {
        auto v = colon + 1;
        while (v < eol && buf_[v] == ' ')
          ++v;
        out.headers[lower(buf_.substr(pos, colon - pos))] = buf_.substr(v,
                                                                        eol
                                                                          - v);
      }
      pos = eol + 2;
    }
    buf_.erase(0, head_end + 4);
    auto te = out.headers.find("transfer-encoding");
    if (te != out.headers.end() && lower(te->second) == "chunked") {
      for (;;) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos)
          if (!fill(err)) {
            close_fd();
            return false;
          }
        auto n = std::strtoul(buf_.c_str(), nullptr, 16);
        while (buf_.size() < eol + 2 + n + 2)
          if (!fill(err)) {
            close_fd();
            return false;
          }
        out.body.append(buf_, eol + 2, n);
        buf_.erase(0, eol + 2 + n + 2);
        if (n == 0)
          break;
      }
    } else {
      auto cl = out.headers.find("content-length");
      size_t n = cl == out.headers.end() ? 0 : std::stoul(cl->second);
      while (buf_.size() < n)
        if (!fill(err)) {
          close_fd();
          return false;
        }
      out.body = buf_.substr(0, n);
      buf_.erase(0, n);
    }
    auto c = out.headers.find("connection");
    if (c != out.headers.end() && lower(c->second) == "close")
      close_fd();
    return true;
  }

  uint16_t port_;
  int fd_ = -1;
  int connects_ = 0;
  std::string buf_;
};

/// One MCP session over its own keep-alive connection.
class mcp_client {
 public:
  mcp_client(uint16_t port, std::string token)
    : conn_(port), port_(port), token_(std::move(token)) {
    // nop
  }

  int reconnects() const {
    return conn_.reconnects();
  }

  bool post(const std::string& body, response& out, std::string& err) {
    std::string req = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:"
                      + std::to_string(port_)
                      + "\r\nContent-Type: application/json\r\n"
                        "Accept: application/json, text/event-stream\r\n"
                        "Authorization: Bearer "
                      + token_ + "\r\n";
    if (!session_.empty())
      req += "Mcp-Session-Id: " + session_
             + "\r\nMCP-Protocol-Version: 2025-06-18\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    req += body;
    return conn_.exchange(req, out, err);
  }

  /// initialize + notifications/initialized.
  bool open(std::string& err) {
    response r;
    if (!post(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)"
              R"({"protocolVersion":"2025-06-18","capabilities":{},)"
              R"("clientInfo":{"name":"butlers_tools_bench","version":"1"}}})",
              r, err))
      return false;
    auto sid = r.headers.find("mcp-session-id");
    if (r.status != 200 || sid == r.headers.end()) {
      err = "initialize answered " + std::to_string(r.status) + ": " + r.body;
      return false;
    }
    session_ = sid->second;
    if (!post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", r,
              err))
      return false;
    if (r.status != 202) {
      err = "notifications/initialized answered " + std::to_string(r.status);
      return false;
    }
    return true;
  }

  /// tools/call body of `tool` with `arguments` (JSON).
  static std::string call_body(int64_t id, const std::string& tool,
                               const std::string& arguments) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id)
           + R"(,"method":"tools/call","params":{"name":")" + tool
           + R"(","arguments":)" + arguments + "}}";
  }

 private:
  connection conn_;
  uint16_t port_;
  std::string token_;
  std::string session_;
};

/// One row's samples and outcome counts.
struct series {
  std::vector<double> ms;
  int errors = 0;
  std::map<std::string, int> statuses; // notify: delivered / queued / ...
  double wall_s = 0;                   // concurrent rows: first to last
  std::string first_error;

  void error(const std::string& why) {
    ++errors;
    if (first_error.empty())
      first_error = why;
  }
};

/// Checks a tools/call answer: a result that is not an error. Records
/// notify's structuredContent.status.
void check_call(const response& r, series& s, bool want_status) {
  if (r.status != 200) {
    s.error("HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 300));
    return;
  }
  rapidjson::Document d;
  if (butlers::json::parse(r.body, d) || !d.IsObject() || !d.HasMember("result")
      || !d["result"].IsObject()) {
    s.error("not a JSON-RPC result: " + r.body.substr(0, 300));
    return;
  }
  auto& res = d["result"];
  if (res.HasMember("isError") && res["isError"].IsBool()
      && res["isError"].GetBool()) {
    s.error("tool error: " + r.body.substr(0, 300));
    return;
  }
  if (want_status && res.HasMember("structuredContent")
      && res["structuredContent"].IsObject()
      && res["structuredContent"].HasMember("status")
      && res["structuredContent"]["status"].IsString())
    ++s.statuses[res["structuredContent"]["status"].GetString()];
}

/// One timed tools/call (or any POST body) on `c`.
void timed_call(mcp_client& c, const std::string& body, series& s,
                bool want_status) {
  response r;
  std::string err;
  auto t0 = steady_clock::now();
  bool ok = c.post(body, r, err);
  auto ms = ms_since(t0);
  if (!ok) {
    s.error(err);
    return;
  }
  s.ms.push_back(ms);
  check_call(r, s, want_status);
}

/// The baseline: the same upsert through libpqxx, one transaction a call.
class baseline {
 public:
  explicit baseline(const std::string& url) : conn_(url) {
    conn_.prepare("upsert",
                  "INSERT INTO tools_bench_baseline AS s (butler, scope, key, "
                  "value) VALUES ($1, '', $2, $3::jsonb) ON CONFLICT (butler, "
                  "scope, key) DO UPDATE SET value = EXCLUDED.value, version = "
                  "s.version + 1, updated_at = now() RETURNING version");
  }

  static void create_table(const std::string& url) {
    pqxx::connection c{url};
    pqxx::work tx{c};
    tx.exec0("DROP TABLE IF EXISTS tools_bench_baseline");
    tx.exec0("CREATE TABLE tools_bench_baseline ("
             "butler text NOT NULL, scope text NOT NULL DEFAULT '', "
             "key text NOT NULL, value jsonb NOT NULL, "
             "version bigint NOT NULL DEFAULT 1, "
             "updated_at timestamptz NOT NULL DEFAULT now(), "
             "PRIMARY KEY (butler, scope, key))");
    tx.commit();
  }

  void timed_upsert(const std::string& butler, const std::string& key,
                    const std::string& value, series& s) {
    auto t0 = steady_clock::now();
    try {
      pqxx::work tx{conn_};
      auto r = tx.exec_prepared1("upsert", butler, key, value);
      tx.commit();
      s.ms.push_back(ms_since(t0));
      if (r[0].as<int64_t>() < 1)
        s.error("upsert returned no version");
    } catch (const std::exception& e) {
      s.error(e.what());
    }
  }

 private:
  pqxx::connection conn_;
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(std::ceil(p / 100.0 * xs.size()));
  return xs[std::min(i > 0 ? i - 1 : 0, xs.size() - 1)];
}

void print_row(const std::string& name, const series& s) {
  double sum = 0;
  for (auto x : s.ms)
    sum += x;
  auto n = s.ms.size();
  double mean = n ? sum / static_cast<double>(n) : 0;
  double rate = s.wall_s > 0
                  ? static_cast<double>(n) / s.wall_s
                  : (sum > 0 ? 1000.0 * static_cast<double>(n) / sum : 0);
  std::printf("| %s | %zu | %d | %.3f | %.3f | %.3f | %.3f | %.0f |\n",
              name.c_str(), n, s.errors, mean, percentile(s.ms, 50),
              percentile(s.ms, 99), percentile(s.ms, 100), rate);
  if (!s.first_error.empty())
    std::fprintf(stderr, "%s: first error: %s\n", name.c_str(),
                 s.first_error.c_str());
}

int arg_int(const char* v, const char* name, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (!end || *end || x < lo || x > hi) {
    std::fprintf(stderr, "%s takes %d..%d\n", name, lo, hi);
    std::exit(2);
  }
  return static_cast<int>(x);
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s PORT DATABASE_URL TOKENS_FILE [--puts N] "
                 "[--notifies N] [--pings N] [--warmup N] [--threads T] "
                 "[--concurrent-calls N]\n",
                 argv[0]);
    return 2;
  }
  auto port = static_cast<uint16_t>(arg_int(argv[1], "PORT", 1, 65535));
  std::string url = argv[2];
  int puts = 2000, notifies = 500, pings = 2000, warmup = 200, threads = 4,
      concurrent = 500;
  for (int i = 4; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--puts")
      puts = arg_int(argv[i + 1], "--puts", 10, 100000);
    else if (k == "--notifies")
      notifies = arg_int(argv[i + 1], "--notifies", 10, 100000);
    else if (k == "--pings")
      pings = arg_int(argv[i + 1], "--pings", 0, 100000);
    else if (k == "--warmup")
      warmup = arg_int(argv[i + 1], "--warmup", 0, 10000);
    else if (k == "--threads")
      threads = arg_int(argv[i + 1], "--threads", 0, 64);
    else if (k == "--concurrent-calls")
      concurrent = arg_int(argv[i + 1], "--concurrent-calls", 10, 100000);
    else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      return 2;
    }
  }
  // The first session makes the most tool calls; a session may make at
  // most 10,000 ([[butler]] max_tool_calls' ceiling).
  long budget = warmup + (warmup + 9) / 10 + 2L * puts + notifies
                + (threads > 0 ? concurrent : 0);
  if (budget > 10000) {
    std::fprintf(stderr,
                 "%ld tool calls on one session; at most 10000 (warm-up "
                 "x 1.1 + 2 x puts + notifies + concurrent calls)\n",
                 budget);
    return 2;
  }
  std::vector<std::string> tokens;
  {
    std::ifstream in{argv[3]};
    std::string line;
    while (std::getline(in, line))
      if (!line.empty())
        tokens.push_back(line);
  }
  if (tokens.empty() || static_cast<int>(tokens.size()) < threads) {
    std::fprintf(stderr, "%zu tokens in %s, %d needed\n", tokens.size(),
                 argv[3], std::max(threads, 1));
    return 2;
  }

  // One MCP session per token, each on its own connection.
  std::vector<std::unique_ptr<mcp_client>> clients;
  for (auto& t : tokens) {
    clients.push_back(std::make_unique<mcp_client>(port, t));
    std::string err;
    if (!clients.back()->open(err)) {
      std::fprintf(stderr, "MCP session: %s\n", err.c_str());
      return 1;
    }
  }
  baseline::create_table(url);
  baseline base{url};
  auto& c0 = *clients.front();
  int64_t id = 100;
  const std::string butler = "bench";

  // Warm-up: not recorded.
  {
    series w;
    for (int i = 0; i < warmup; ++i) {
      timed_call(c0, R"({"jsonrpc":"2.0","id":"w","method":"ping"})", w, false);
      timed_call(c0,
                 mcp_client::call_body(++id, "state_put",
                                       R"({"key":"warm","value":)"
                                         + std::to_string(i) + "}"),
                 w, false);
      base.timed_upsert(butler, "warm", std::to_string(i), w);
      if (i % 10 == 0)
        timed_call(c0,
                   mcp_client::call_body(++id, "notify",
                                         R"({"message":"warm-up )"
                                           + std::to_string(i) + "\"}"),
                   w, true);
    }
    if (w.errors > 0) {
      std::fprintf(stderr, "warm-up: %d errors, first: %s\n", w.errors,
                   w.first_error.c_str());
      return 1;
    }
  }

  // Sequential: one call at a time on one connection. The four state rows
  // are interleaved call by call, so that the machine's noise falls on
  // them alike.
  series ping, put_same, put_distinct, base_same, base_distinct, notify;
  for (int i = 0; i < pings; ++i)
    timed_call(c0, R"({"jsonrpc":"2.0","id":"p","method":"ping"})", ping,
               false);
  for (int i = 0; i < puts; ++i) {
    auto value = R"({"n":)" + std::to_string(i) + R"(,"note":"bench value"})";
    auto key = "k" + std::to_string(i);
    timed_call(c0,
               mcp_client::call_body(++id, "state_put",
                                     R"({"key":"same","value":)" + value + "}"),
               put_same, false);
    base.timed_upsert(butler, "same", value, base_same);
    timed_call(c0,
               mcp_client::call_body(++id, "state_put",
                                     R"({"key":")" + key + R"(","value":)"
                                       + value + "}"),
               put_distinct, false);
    base.timed_upsert(butler, key, value, base_distinct);
  }
  for (int i = 0; i < notifies; ++i)
    timed_call(c0,
               mcp_client::call_body(++id, "notify",
                                     R"({"message":"bench notify )"
                                       + std::to_string(i) + "\"}"),
               notify, true);

  // Concurrent: `threads` clients at once, each its own session and
  // connection (and, for the baseline, its own database connection),
  // distinct keys.
  series con_put, con_base;
  if (threads > 0) {
    std::vector<series> per(static_cast<size_t>(threads));
    auto run = [&](bool mcp) {
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
          auto& s = per[static_cast<size_t>(t)];
          s = series{};
          std::unique_ptr<baseline> b;
          if (!mcp)
            b = std::make_unique<baseline>(url);
          ++ready;
          while (!go)
            std::this_thread::yield();
          auto& c = *clients[static_cast<size_t>(t)];
          for (int i = 0; i < concurrent; ++i) {
            auto key = "t" + std::to_string(t) + "-" + std::to_string(i);
            auto value = R"({"n":)" + std::to_string(i) + "}";
            if (mcp)
              timed_call(c,
                         mcp_client::call_body(1000000 * (t + 1) + i,
                                               "state_put",
                                               R"({"key":")" + key
                                                 + R"(","value":)" + value
                                                 + "}"),
                         s, false);
            else
              b->timed_upsert(butler, key, value, s);
          }
        });
      while (ready < threads)
        std::this_thread::yield();
      auto t0 = steady_clock::now();
      go = true;
      for (auto& t : ts)
        t.join();
      series all;
      all.wall_s = ms_since(t0) / 1000.0;
      for (auto& s : per) {
        all.ms.insert(all.ms.end(), s.ms.begin(), s.ms.end());
        all.errors += s.errors;
        if (all.first_error.empty())
          all.first_error = s.first_error;
      }
      return all;
    };
    con_put = run(true);
    con_base = run(false);
  }

  std::printf("| operation | calls | errors | mean ms | p50 ms | p99 ms | max "
              "ms | calls/s |\n|---|---|---|---|---|---|---|---|\n");
  if (pings > 0)
    print_row("MCP `ping` (HTTP + JSON-RPC, no tool)", ping);
  print_row("MCP `state_put`, one key", put_same);
  print_row("baseline: libpqxx upsert, one key", base_same);
  print_row("MCP `state_put`, distinct keys", put_distinct);
  print_row("baseline: libpqxx upsert, distinct keys", base_distinct);
  print_row("MCP `notify` → outbox delivered", notify);
  if (threads > 0) {
    print_row("MCP `state_put`, " + std::to_string(threads)
                + " clients at once",
              con_put);
    print_row("baseline: libpqxx upsert, " + std::to_string(threads)
                + " connections at once",
              con_base);
  }
  std::printf("\n");
  std::string st;
  for (auto& [k, v] : notify.statuses)
    st += (st.empty() ? "" : ", ") + k + " " + std::to_string(v);
  std::printf("notify answers: %s\n", st.empty() ? "(none)" : st.c_str());
  int reconnects = 0;
  for (auto& c : clients)
    reconnects += c->reconnects();
  std::printf("reconnects: %d\n", reconnects);
  int errors = ping.errors + put_same.errors + put_distinct.errors
               + base_same.errors + base_distinct.errors + notify.errors
               + con_put.errors + con_base.errors;
  return errors > 0 ? 1 : 0;
}
