#include "runtime/http_client.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/curl_support.hpp"

// Connection reuse: a pool of (easy, multi) pairs rather than one CURLSH
// sharing the connection cache. libcurl documents that sharing connections
// through a share object between concurrent threads is not supported (the
// cache itself is locked, but a connection's use is not), whereas a multi
// handle owns its connections and is only ever used by the thread that
// holds its pool entry. Each entry keeps at most one idle connection,
// remembered by origin; perform() takes an idle entry of the same origin
// (most recently used first), so sequential calls to one host reuse one
// connection whichever thread makes them, and concurrent calls each get
// their own. DNS answers and TLS sessions are shared between all entries
// through a CURLSH with locks (documented as safe), so a new connection to a
// known host skips the lookup and resumes its TLS session.

namespace butlers {

namespace {

using std::chrono::milliseconds;

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string_view trim(std::string_view s) {
  while (!s.empty()
         && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'
             || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty()
         && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'
             || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool has_crlf(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

/// "scheme://host:port" of `url` (lower-cased, up to the path), the key
/// under which an entry's idle connection is remembered.
std::string origin_of(std::string_view url) {
  auto sep = url.find("://");
  auto end = sep == std::string_view::npos
               ? url.size()
               : std::min(url.find_first_of("/?#", sep + 3), url.size());
  std::string out{url.substr(0, end)};
  for (auto& c : out)
    c = lower(c);
  return out;
}

long as_long_ms(milliseconds d) {
  return static_cast<long>(std::max<int64_t>(d.count(), 1));
}

// -- per-transfer state and callbacks -----------------------------------------

/// What the callbacks of one transfer fill in.
struct transfer {
  const http_request* req = nullptr;
  http_response* res = nullptr;
  /// The body would have exceeded `max_response_bytes`.
  bool too_large = false;
  /// `on_data` returned false (or threw).
  bool stopped = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<transfer*>(user);
  std::string_view chunk{data, size * n};
  try {
    if (t.req->on_data) {
      if (!t.req->on_data(chunk)) {
        t.stopped = true;
        return 0;
      }
      return chunk.size();
    }
    if (t.res->body.size() + chunk.size() > t.req->max_response_bytes) {
      t.too_large = true;
      return 0;
    }
    t.res->body.append(chunk);
    return chunk.size();
  } catch (...) {
    t.stopped = true;
    return 0;
  }
}

/// One header line; a status line starts a new response (an interim 1xx
/// or a proxy's answer came before), so the headers so far are dropped.
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto& headers = static_cast<transfer*>(user)->res->headers;
  std::string_view line{data, size * n};
  try {
    if (line.rfind("HTTP/", 0) == 0) {
      headers.clear();
    } else if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      if (!headers.empty() && !trim(line).empty()) // obsolete line folding
        headers.back().second.append(" ").append(trim(line));
    } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
      std::string name{trim(line.substr(0, colon))};
      for (auto& c : name)
        c = lower(c);
      headers.emplace_back(std::move(name),
                           std::string{trim(line.substr(colon + 1))});
    }
  } catch (const std::bad_alloc&) {
    return 0;
  }
  return line.size();
}

http_failure classify(CURLcode code, const transfer& t) {
  switch (code) {
    case CURLE_OK: return http_failure::none;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT: return http_failure::connect;
    case CURLE_OPERATION_TIMEDOUT: return http_failure::timeout;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED: return http_failure::tls;
    case CURLE_FILESIZE_EXCEEDED: return http_failure::too_large;
    case CURLE_ABORTED_BY_CALLBACK: return http_failure::cancelled;
    case CURLE_WRITE_ERROR:
      if (t.too_large)
        return http_failure::too_large;
      if (t.stopped)
        return http_failure::cancelled;
      return http_failure::other;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_TOO_MANY_REDIRECTS: return http_failure::protocol;
    default: return http_failure::other;
  }
}

using slist_ptr = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

void append(slist_ptr& list, const std::string& line) {
  auto* head = curl_slist_append(list.get(), line.c_str());
  if (head == nullptr)
    throw std::bad_alloc{};
  (void)list.release(); // now part of `head`
  list.reset(head);
}

/// The request's headers as curl takes them, into `out`; the name of the
/// first header that would break the framing (CR, LF, ':' in a name), or
/// "" when all are fine.
std::string header_lines(const http_request& req, slist_ptr& out) {
  bool expect_set = false;
  for (auto& [name, value] : req.headers) {
    if (name.empty() || has_crlf(name) || has_crlf(value)
        || name.find(':') != std::string::npos) {
      std::string shown = name.empty() ? "(empty)" : name.substr(0, 100);
      for (auto& c : shown)
        if (c == '\r' || c == '\n')
          c = '?';
      return shown;
    }
    std::string n = name;
    for (auto& c : n)
      c = lower(c);
    expect_set = expect_set || n == "expect";
    // "Name;" is curl's way to send a header with an empty value.
    append(out, value.empty() ? name + ";" : name + ": " + value);
  }
  // No "Expect: 100-continue" round trip before big bodies.
  if (!expect_set)
    append(out, "Expect:");
  return {};
}

// -- the pool -----------------------------------------------------------------

/// An easy handle and the multi handle that runs it and owns its
/// connection.
struct entry {
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  /// Origin of the last transfer: where the idle connection (if any) goes.
  std::string origin;

  entry() : easy(curl_easy_init()), multi(curl_multi_init()) {
    if (multi != nullptr)
      curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1L);
  }
  ~entry() {
    if (multi != nullptr)
      curl_multi_cleanup(multi); // closes the idle connection
    if (easy != nullptr)
      curl_easy_cleanup(easy);
  }
  entry(const entry&) = delete;
  entry& operator=(const entry&) = delete;
};

using entry_ptr = std::unique_ptr<entry>;

/// One lock per kind of data the share object asks for.
struct share_locks {
  std::array<std::mutex, CURL_LOCK_DATA_LAST> mutexes;

  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<share_locks*>(self)->mutexes[static_cast<size_t>(data)].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<share_locks*>(self)
      ->mutexes[static_cast<size_t>(data)]
      .unlock();
  }
};

} // namespace

const char* to_string(http_failure f) {
  switch (f) {
    case http_failure::none: return "none";
    case http_failure::connect: return "connect";
    case http_failure::timeout: return "timeout";
    case http_failure::tls: return "tls";
    case http_failure::too_large: return "too_large";
    case http_failure::cancelled: return "cancelled";
    case http_failure::protocol: return "protocol";
    case http_failure::other: return "other";
  }
  return "other";
}

const std::string* http_response::header(std::string_view lower_name) const {
  for (auto& [name, value] : headers)
    if (name == lower_name)
      return &value;
  return nullptr;
}

std::optional<std::chrono::seconds> http_response::retry_after() const {
  auto* v = header("retry-after");
  if (v == nullptr || v->empty() || v->size() > 9
      || !std::all_of(v->begin(), v->end(), [](char c) {
           return c >= '0' && c <= '9';
         }))
    return std::nullopt;
  return std::chrono::seconds{std::stol(*v)};
}

// -- http_client --------------------------------------------------------------

struct http_client::impl {
  http_client_options opts;
  share_locks locks;
  CURLSH* share = nullptr;
  std::mutex mtx;
  /// Idle entries, least recently used first; at most
  /// `opts.max_idle_connections`.
  std::vector<entry_ptr> idle;
  std::atomic<size_t> opened{0};

  explicit impl(http_client_options o) : opts(std::move(o)) {
    curl::global_init();
    share = curl_share_init();
    if (share != nullptr) {
      curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_locks::lock);
      curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_locks::unlock);
      curl_share_setopt(share, CURLSHOPT_USERDATA, &locks);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
  }

  ~impl() {
    idle.clear(); // before the share they point to
    if (share != nullptr)
      curl_share_cleanup(share);
  }

  /// An idle entry for `origin` (the most recently used one), else a new
  /// one; null when curl cannot make one.
  entry_ptr acquire(const std::string& origin) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto i = idle.rbegin(); i != idle.rend(); ++i)
        if ((*i)->origin == origin) {
          auto e = std::move(*i);
          idle.erase(std::next(i).base());
          return e;
        }
    }
    auto e = std::make_unique<entry>();
    if (e->easy == nullptr || e->multi == nullptr)
      return nullptr;
    return e;
  }

  /// Back to the idle list; the least recently used entry beyond the limit
  /// is closed (outside the lock).
  void release(entry_ptr e) {
    entry_ptr evicted;
    {
      std::lock_guard<std::mutex> guard{mtx};
      idle.push_back(std::move(e));
      if (idle.size() > opts.max_idle_connections) {
        evicted = std::move(idle.front());
        idle.erase(idle.begin());
      }
    }
  }

  void configure(CURL* h, const http_request& req, curl_slist* headers,
                 transfer& t, char* errbuf) const;
};

void http_client::impl::configure(CURL* h, const http_request& req,
                                  curl_slist* headers, transfer& t,
                                  char* errbuf) const {
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_SHARE, share);
  curl_easy_setopt(h, CURLOPT_USERAGENT, opts.user_agent.c_str());
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, as_long_ms(req.timeout));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   as_long_ms(req.connect_timeout));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, opts.verify_peer ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, opts.verify_peer ? 2L : 0L);
  if (!opts.ca_file.empty())
    curl_easy_setopt(h, CURLOPT_CAINFO, opts.ca_file.c_str());
  curl_easy_setopt(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  if (!req.on_data)
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(
                       std::min<size_t>(req.max_response_bytes,
                                        size_t{1} << 62)));
  bool with_body = !req.body.empty() || req.method == "POST";
  if (with_body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(req.body.size()));
  }
  if (req.method == "HEAD")
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  else if (req.method != (with_body ? "POST" : "GET"))
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
}

http_client::http_client(options o)
  : impl_(std::make_unique<impl>(std::move(o))) {}

http_client::~http_client() = default;

http_response http_client::perform(const http_request& req,
                                   const std::atomic<bool>* cancel) const {
  http_response res;
  auto fail = [&](http_failure f, std::string error) {
    res = http_response{};
    res.failure = f;
    res.error = std::move(error);
    return res;
  };
  try {
    if (impl_->share == nullptr)
      return fail(http_failure::other, "curl_share_init failed");
    slist_ptr headers{nullptr, curl_slist_free_all};
    if (auto bad = header_lines(req, headers); !bad.empty())
      return fail(http_failure::other, "bad request header '" + bad + "'");
    auto origin = origin_of(req.url);
    auto e = impl_->acquire(origin);
    if (!e)
      return fail(http_failure::other, "curl_easy_init failed");
    transfer t{&req, &res};
    char errbuf[CURL_ERROR_SIZE] = {0};
    impl_->configure(e->easy, req, headers.get(), t, errbuf);
    std::string run_error;
    auto code = curl::run(e->multi, e->easy, cancel, run_error);
    long status = 0;
    curl_easy_getinfo(e->easy, CURLINFO_RESPONSE_CODE, &status);
    long connects = 0;
    curl_easy_getinfo(e->easy, CURLINFO_NUM_CONNECTS, &connects);
    impl_->opened += static_cast<size_t>(std::max(connects, 0L));
    // Forget this call's buffers and callbacks (and detach the share); the
    // connection stays in the entry's multi handle.
    curl_easy_reset(e->easy);
    e->origin = origin;
    impl_->release(std::move(e));
    res.status = static_cast<int>(status);
    res.failure = classify(code, t);
    if (res.failure != http_failure::none) {
      res.error = !run_error.empty() ? run_error
                  : res.failure == http_failure::too_large
                    ? "response body exceeds "
                        + std::to_string(req.max_response_bytes) + " bytes"
                  : t.stopped ? "stopped by the data callback"
                              : curl::describe(code, errbuf);
    }
    return res;
  } catch (const std::exception& ex) {
    return fail(http_failure::other, std::string{"http_client: "} + ex.what());
  }
}

size_t http_client::connections_opened() const {
  return impl_->opened.load();
}

http_client& shared_http_client() {
  // Never destroyed: callers on detached threads may still use it while the
  // process exits, after static destructors and OpenSSL's cleanup ran.
  static http_client* client = [] {
    http_client_options o;
    if (const char* ca = std::getenv("BUTLERS_CA_FILE"); ca && *ca)
      o.ca_file = ca;
    return new http_client(std::move(o));
  }();
  return *client;
}

} // namespace butlers
