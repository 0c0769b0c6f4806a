#include "actors/http_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <restinio/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/ingest.hpp"
#include "runtime/json.hpp"
#include "runtime/operator_action.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// The executor of one HTTP thread's io_context, under a type of its own.
/// Every HTTP thread runs its own io_context with its own listening socket
/// (see `impl::start`), so a connection is only ever touched by that thread
/// and restinio needs no strand: this type stands where restinio's traits
/// put the strand. It is a distinct type, not restinio's `noop_strand_t`,
/// so that the connection count limiter below keeps its mutex: a request
/// handle held by a CAF actor can drop the last reference to a connection
/// on a CAF thread. Answers from other threads reach a connection through
/// `asio::dispatch` on this executor, which posts them to its thread.
class shard_executor : public asio::any_io_executor {
 public:
  shard_executor(const asio::any_io_executor& x) // NOLINT: as restinio's
    : asio::any_io_executor(x) {
    // nop
  }

  shard_executor(const asio::io_context::executor_type& x) // NOLINT: ditto
    : asio::any_io_executor(x) {
    // nop
  }
};

/// One io_context per thread, no strands, and a cap on open connections
/// (`http.max_connections`, per thread): beyond it, accepting waits.
struct traits : restinio::default_traits_t {
  using strand_t = shard_executor;
  static constexpr bool use_connection_count_limiter = true;
};
using request_handle = restinio::request_handle_t;

} // namespace
} // namespace butlers

/// The limiter of `traits` counts under a mutex (see `shard_executor`).
template<>
class restinio::connection_count_limits::connection_count_limiter_t<
  butlers::shard_executor>
  : public restinio::connection_count_limits::impl::actual_limiter_t<
      std::mutex> {
  using base_t = impl::actual_limiter_t<std::mutex>;

 public:
  using base_t::base_t;
};

namespace butlers {
namespace {

constexpr const char* json_type = "application/json";

/// Renders the error body every failing endpoint answers with; `details`
/// is a JSON array.
std::string error_body(butlers_errc code, const std::string& message,
                       const std::string& details = "[]") {
  return R"({"error":{"class":)" + json::quote(to_string(error_class(code)))
         + R"(,"code":)" + json::quote(to_string(code)) + R"(,"message":)"
         + json::quote(message) + R"(,"details":)" + details + "}}";
}

std::string violations_json(const std::vector<violation>& xs) {
  std::string out = "[";
  for (auto& x : xs) {
    if (out.size() > 1)
      out += ',';
    out += R"({"pointer":)" + json::quote(x.pointer) + R"(,"keyword":)"
           + json::quote(x.keyword) + R"(,"message":)" + json::quote(x.message)
           + "}";
  }
  return out + "]";
}

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

/// 8-4-4-4-12 hex digits.
bool is_uuid(std::string_view x) {
  if (x.size() != 36)
    return false;
  for (size_t i = 0; i < x.size(); ++i) {
    auto c = x[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-')
        return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

bool is_json_media_type(std::string_view value) {
  auto type = value.substr(0, value.find(';'));
  while (!type.empty() && type.back() == ' ')
    type.remove_suffix(1);
  std::string lower;
  for (char c : type)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "application/json";
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Internal Server Error";
  }
}

/// A status line for any code we answer with.
restinio::http_status_line_t status_line(int status) {
  return restinio::http_status_line_t{restinio::http_status_code_t{
                                        static_cast<uint16_t>(status)},
                                      reason_phrase(status)};
}

} // namespace

struct http_server::impl : std::enable_shared_from_this<impl> {
  // -- HTTP threads (see "HTTP threads" below) --------------------------------

  struct pending_ingest {
    request_handle req;
    std::chrono::steady_clock::time_point started;
  };

  struct shard {
    /// One thread runs it; other threads post to it.
    asio::io_context ioctx{1};
    std::unique_ptr<restinio::http_server_t<traits>> server;
    std::thread thread;
    caf::actor bridge;
    /// butlers_http_thread_requests_total{thread="i"}.
    counter* requests = nullptr;

    std::mutex mtx;
    uint64_t next_token = 0;
    std::unordered_map<uint64_t, pending_ingest> pending;
    std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>>
      deadlines;
    std::vector<inbox_record> batch;
    std::vector<uint64_t> batch_tokens;
    bool flush_posted = false;
  };

  caf::actor_system& sys;
  node_settings settings;
  node_context_ptr ctx;
  supervisor_actor sup;
  uint16_t port = 0;
  std::string expected_auth;

  // -- in-flight tracking for the drain ---------------------------------------
  std::mutex mtx;
  std::condition_variable idle_cv;
  size_t in_flight = 0;

  // -- event stream keep-alive ------------------------------------------------
  std::thread heartbeat;
  std::mutex heartbeat_mtx;
  std::condition_variable heartbeat_cv;
  bool stopping = false;

  // -- metrics
  // -----------------------------------------------------------------
  counter& requests_total;
  counter& unauthorized_total;
  histogram& accept_latency;

  impl(caf::actor_system& sys, const node_settings& settings,
       node_context_ptr ctx, supervisor_actor sup)
    : sys(sys), settings(settings), ctx(std::move(ctx)), sup(std::move(sup)),
      requests_total(
        this->ctx->metrics.get_counter("butlers_http_requests_total",
                                       "HTTP requests received")),
      unauthorized_total(
        this->ctx->metrics.get_counter("butlers_http_unauthorized_total",
                                       "HTTP requests rejected for a missing "
                                       "or wrong bearer token")),
      accept_latency(
        this->ctx->metrics
          .get_histogram("butlers_switchboard_ingress_accept_latency_ms",
                         "From receiving an ingest request to answering it")) {
    if (!settings.http.token.empty())
      expected_auth = "Bearer " + settings.http.token;
  }

  /// `on_written` runs once the response has left (or failed to leave)
  /// through the socket.
  void respond(const request_handle& req, restinio::http_status_line_t status,
               std::string body, const char* type = json_type,
               restinio::write_status_cb_t on_written = {}) const {
    req->create_response(status)
      .append_header(restinio::http_field::content_type, type)
      .append_header(restinio::http_field::cache_control, "no-store")
      .set_body(std::move(body))
      .done(std::move(on_written));
  }

  /// `on_written` runs once the response has left (or failed to leave)
  /// through the socket.
  void respond_error(const request_handle& req, butlers_errc code,
                     const std::string& message,
                     const std::string& details = "[]",
                     restinio::write_status_cb_t on_written = {}) {
    auto status = http_status(code);
    auto resp = req->create_response(status_line(status));
    resp.append_header(restinio::http_field::content_type, json_type);
    if (status == 429 || status == 503 || status == 504)
      resp.append_header(restinio::http_field::retry_after, "1");
    if (status == 401)
      resp.append_header(restinio::http_field::www_authenticate,
                         "Bearer realm=\"butlers\"");
    resp.set_body(error_body(code, message, details))
      .done(std::move(on_written));
  }

  bool authorized(const request_handle& req) {
    if (expected_auth.empty())
      return true;
    auto value = req->header().opt_value_of(
      restinio::http_field::authorization);
    // Constant-time comparison: the token is a secret.
    if (!value || value->size() != expected_auth.size())
      return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < expected_auth.size(); ++i)
      diff |= static_cast<unsigned char>((*value)[i] ^ expected_auth[i]);
    return diff == 0;
  }

  restinio::request_handling_status_t handle(shard& sh, request_handle req) {
    requests_total.inc();
    sh.requests->inc();
    auto path = req->header().path();
    auto method = req->header().method();
    bool is_get = method == restinio::http_method_get();
    if (path == "/healthz" && is_get) {
      respond(req, restinio::status_ok(), R"({"status":"ok"})");
      return restinio::request_accepted();
    }
    if (path == "/readyz" && is_get) {
      readyz(req);
      return restinio::request_accepted();
    }
    if (!authorized(req)) {
      unauthorized_total.inc();
      respond_error(req, butlers_errc::unauthorized,
                    "missing or wrong bearer token");
      return restinio::request_accepted();
    }
    if (path == "/v1/ingest") {
      if (method != restinio::http_method_post())
        respond_error(req, butlers_errc::not_found, "use POST for /v1/ingest");
      else
        ingest(sh, req);
      return restinio::request_accepted();
    }
    if (path.substr(0, 13) == "/v1/requests/") {
      requests_api(req, std::string{path.substr(13)}, method);
      return restinio::request_accepted();
    }
    if (path.substr(0, 12) == "/v1/butlers/" || path == "/v1/butlers") {
      butlers_api(req,
                  std::string{path.substr(std::min<size_t>(path.size(), 12))},
                  method);
      return restinio::request_accepted();
    }
    if (path.substr(0, 12) == "/v1/threads/") {
      threads_api(req, std::string{path.substr(12)}, method);
      return restinio::request_accepted();
    }
    if (path.substr(0, 9) == "/v1/runs/") {
      runs_api(req, std::string{path.substr(9)}, method);
      return restinio::request_accepted();
    }
    if (path == "/v1/events/summary") {
      if (!is_get)
        respond_error(req, butlers_errc::not_found,
                      "use GET for /v1/events/summary");
      else
        subscribe(req, {});
      return restinio::request_accepted();
    }
    if (path == "/metrics" && is_get) {
      respond(req, restinio::status_ok(), ctx->metrics.render(),
              "text/plain; version=0.0.4");
      return restinio::request_accepted();
    }
    respond_error(req, butlers_errc::not_found,
                  "no route for " + std::string{method.c_str()} + " "
                    + std::string{path});
    return restinio::request_accepted();
  }

  /// POST /v1/ingest: validate here, on the HTTP thread, then hand the
  /// record to the switchboard through the ingest bridge actor, whose reply
  /// completes the response; no thread waits for the commit.
  void ingest(shard& sh, const request_handle& req) {
    auto started = std::chrono::steady_clock::now();
    if (ctx->status.draining) {
      respond_error(req, butlers_errc::draining, "the node is shutting down");
      return;
    }
    auto type = req->header().opt_value_of(restinio::http_field::content_type);
    if (!type || !is_json_media_type(*type)) {
      respond_error(req, butlers_errc::unsupported_media_type,
                    "Content-Type must be application/json");
      return;
    }
    auto& body = req->body();
    if (body.size() > settings.http.max_body_bytes) {
      respond_error(req, butlers_errc::payload_too_large,
                    "body of " + std::to_string(body.size())
                      + " bytes exceeds http.max_body_bytes ("
                      + std::to_string(settings.http.max_body_bytes) + ")");
      return;
    }
    auto sb = ctx->switchboard();
    if (!sb) {
      respond_error(req,
                    ctx->status.database_configured
                      ? butlers_errc::database_unavailable
                      : butlers_errc::target_unavailable,
                    !ctx->status.database_configured
                      ? "no database is configured on this node"
                    : settings.cluster.switchboard
                      ? "the switchboard is restarting"
                      : "this butler-only node has no switchboard node "
                        "connected");
      return;
    }
    auto parsed = parse_ingest(body, settings.http.max_body_bytes,
                               settings.switchboard.dedupe_window_s, now_us());
    if (!parsed.parse_error.empty()) {
      respond_error(req, butlers_errc::validation_error,
                    "body is not valid JSON: " + parsed.parse_error);
      return;
    }
    if (!parsed.record) {
      respond_error(req, butlers_errc::validation_error,
                    std::to_string(parsed.violations.size())
                      + " schema violation(s) against ingest.v1",
                    violations_json(parsed.violations));
      return;
    }
    enter();
    if (track_ingest(sh, req, started, std::move(*parsed.record)))
      asio::post(sh.ioctx, [self_ptr = shared_from_this(), &sh] {
        flush_ingests(sh);
      });
  }

  // -- HTTP threads -----------------------------------------------------------
  //
  // Each HTTP thread is a shard: its own io_context, its own restinio server
  // on its own listening socket of the shared port (SO_REUSEPORT: the kernel
  // spreads new connections over the sockets), and its own ingest bridge. A
  // connection stays on the thread that accepted it, so nothing in restinio
  // needs a strand, and the answers of an ingest batch go back to the one
  // thread that owns every connection in it, in one post.
  //
  // One long-lived bridge actor per shard carries its ingests to the
  // switchboard and back, instead of an actor spawned per request, and no
  // request to the switchboard carries a CAF timeout: each one would wake
  // CAF's clock thread twice. The deadline (`http.request_timeout_ms`, then
  // 504) is kept here instead: requests are tracked in arrival order, so the
  // bridge's periodic sweep only looks at the front of a queue. Whichever
  // comes first, the commit's answer or the deadline, takes the request out
  // of `pending` and answers it; the other finds it gone.

  std::vector<std::unique_ptr<shard>> shards;

  /// Tracks the request and adds its record to the shard's next batch for
  /// its bridge. Returns true when the caller must post a flush: the first
  /// record of a batch does, and the flush runs on the shard's io_context
  /// after the handlers already due, so one batch carries every request
  /// parsed in the same round of socket events (one wake-up of a CAF worker
  /// for all).
  bool track_ingest(shard& sh, const request_handle& req,
                    std::chrono::steady_clock::time_point started,
                    inbox_record rec) {
    auto deadline = started
                    + std::chrono::milliseconds{
                      settings.http.request_timeout_ms};
    std::lock_guard<std::mutex> guard{sh.mtx};
    auto token = ++sh.next_token;
    sh.pending.emplace(token, pending_ingest{req, started});
    sh.deadlines.emplace_back(deadline, token);
    sh.batch.push_back(std::move(rec));
    sh.batch_tokens.push_back(token);
    if (sh.flush_posted)
      return false;
    sh.flush_posted = true;
    return true;
  }

  static void flush_ingests(shard& sh) {
    std::vector<inbox_record> batch;
    std::vector<uint64_t> tokens;
    {
      std::lock_guard<std::mutex> guard{sh.mtx};
      batch.swap(sh.batch);
      tokens.swap(sh.batch_tokens);
      sh.flush_posted = false;
    }
    if (!batch.empty())
      caf::anon_send(sh.bridge, ingest_atom_v, std::move(batch),
                     std::move(tokens));
  }

  static std::optional<pending_ingest> untrack_ingest(shard& sh,
                                                      uint64_t token) {
    std::lock_guard<std::mutex> guard{sh.mtx};
    auto i = sh.pending.find(token);
    if (i == sh.pending.end())
      return std::nullopt;
    auto result = std::move(i->second);
    sh.pending.erase(i);
    return result;
  }

  void ingest_committed(shard& sh, uint64_t token, const append_result& res) {
    auto p = untrack_ingest(sh, token);
    if (!p)
      return; // Answered 504 already; a retry finds the late commit.
    std::string reply = R"({"request_id":)" + json::quote(res.request_id)
                        + R"(,"status":)"
                        + (res.duplicate ? R"("deduped")" : R"("accepted")")
                        + R"(,"duplicate":)"
                        + (res.duplicate ? "true" : "false") + "}";
    observe(p->started);
    respond(p->req, status_line(202), std::move(reply), json_type,
            leave_when_written());
  }

  void ingest_failed(shard& sh, uint64_t token, butlers_errc code,
                     std::string msg) {
    auto p = untrack_ingest(sh, token);
    if (!p)
      return;
    if (msg.empty())
      msg = to_string(code);
    observe(p->started);
    respond_error(p->req, code, msg, "[]", leave_when_written());
  }

  /// Answers 504 for every tracked request of the shard past its deadline.
  void expire_ingests(shard& sh) {
    auto now = std::chrono::steady_clock::now();
    std::vector<uint64_t> due;
    {
      std::lock_guard<std::mutex> guard{sh.mtx};
      while (!sh.deadlines.empty() && sh.deadlines.front().first <= now) {
        due.push_back(sh.deadlines.front().second);
        sh.deadlines.pop_front();
      }
    }
    for (auto token : due)
      ingest_failed(sh, token, butlers_errc::timeout,
                    "no answer within http.request_timeout_ms; the request "
                    "may or may not be stored, retry with the same key");
  }

  /// How often the bridge looks for requests past their deadline: a tenth
  /// of the timeout, between 10 ms and 100 ms.
  std::chrono::milliseconds ingest_sweep_interval() const {
    auto ms = std::clamp<uint64_t>(settings.http.request_timeout_ms / 10, 10,
                                   100);
    return std::chrono::milliseconds{ms};
  }

  /// `sh` lives as long as `srv`, which owns it.
  static caf::behavior ingest_bridge_actor(caf::event_based_actor* self,
                                           std::shared_ptr<impl> srv,
                                           shard* sh) {
    self->delayed_send(self, srv->ingest_sweep_interval(), caf::tick_atom_v);
    return {
      [self, srv, sh](ingest_atom, std::vector<inbox_record>& batch,
                      std::vector<uint64_t>& tokens) {
        auto sb = srv->ctx->switchboard();
        if (!sb) {
          for (auto token : tokens)
            srv->ingest_failed(*sh, token, butlers_errc::database_unavailable,
                               "the switchboard is restarting");
          return;
        }
        // One request for the whole batch. No CAF timeout: the deadline
        // sweep answers 504 (see above).
        self->request(sb, caf::infinite, ingest_atom_v, std::move(batch))
          .then(
            [srv, sh, tokens](std::vector<append_result>& res) mutable {
              // Answered on the shard's io_context in one go: one wake-up
              // of its thread for the batch, not one per response.
              asio::post(sh->ioctx, [srv, sh, tokens = std::move(tokens),
                                     res = std::move(res)] {
                for (size_t i = 0; i < tokens.size(); ++i) {
                  if (i >= res.size())
                    srv->ingest_failed(*sh, tokens[i],
                                       butlers_errc::internal_error,
                                       "no result for this record");
                  else if (res[i].error_code == 0)
                    srv->ingest_committed(*sh, tokens[i], res[i]);
                  else
                    srv->ingest_failed(*sh, tokens[i],
                                       static_cast<butlers_errc>(
                                         res[i].error_code),
                                       res[i].error_message);
                }
              });
            },
            [srv, sh, tokens](const caf::error& err) {
              for (auto token : tokens)
                srv->ingest_failed(*sh, token, code_of(err), message_of(err));
            });
      },
      [self, srv, sh](caf::tick_atom) {
        srv->expire_ingests(*sh);
        self->delayed_send(self, srv->ingest_sweep_interval(),
                           caf::tick_atom_v);
      },
    };
  }

  /// /v1/butlers...: GET lists the registry; POST {name}/route is
  /// route.execute with a route.v1 body (202 + route_response.v1 `accepted`,
  /// or the error response with the status of its class); POST
  /// {name}/work/{work_id}/cancel cancels a work item.
  void butlers_api(const request_handle& req, std::string rest,
                   const restinio::http_method_id_t& method) {
    auto reg = ctx->registry();
    if (!reg) {
      respond_error(req, butlers_errc::target_unavailable,
                    ctx->status.database_configured
                      ? "the butlers are restarting"
                      : "no database is configured on this node");
      return;
    }
    auto timeout = std::chrono::milliseconds{settings.http.request_timeout_ms};
    bool is_post = method == restinio::http_method_post();
    if (rest.empty() && method == restinio::http_method_get()) {
      enter();
      sys.spawn(
        [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
           request_handle req, registry_actor reg,
           std::chrono::milliseconds timeout) {
          // One entry per (butler, node): with the cluster, each host's
          // liveness shows (spec 001 §10.7).
          bridge->request(reg, timeout, hosts_atom_v)
            .then(
              [self_ptr, req](const std::vector<registry_entry>& xs) {
                std::string out = R"({"butlers":[)";
                for (size_t i = 0; i < xs.size(); ++i) {
                  auto& x = xs[i];
                  out += i == 0 ? "{" : ",{";
                  out += R"("name":)" + json::quote(x.name);
                  out += R"(,"description":)" + json::quote(x.description);
                  out += R"(,"node":)" + json::quote(x.node);
                  out += R"(,"status":)" + json::quote(x.status);
                  out += R"(,"max_concurrent_sessions":)"
                         + std::to_string(x.max_concurrent_sessions) + "}";
                }
                out += "]}";
                self_ptr->respond(req, restinio::status_ok(), std::move(out),
                                  json_type, self_ptr->leave_when_written());
              },
              [self_ptr, req](const caf::error& err) {
                self_ptr->fail(req, err);
              });
        },
        shared_from_this(), req, reg, timeout);
      return;
    }
    auto slash = rest.find('/');
    auto name = rest.substr(0, slash);
    auto tail = slash == std::string::npos ? std::string{} : rest.substr(slash);
    std::string work_id;
    if (tail.size() > 6 && tail.substr(0, 6) == "/work/" && tail.size() > 13
        && tail.substr(tail.size() - 7) == "/cancel")
      work_id = tail.substr(6, tail.size() - 13);
    if (!is_post || (tail != "/route" && work_id.empty())) {
      respond_error(req, butlers_errc::not_found,
                    "no route for " + std::string{method.c_str()}
                      + " /v1/butlers/" + rest);
      return;
    }
    if (ctx->status.draining) {
      respond_error(req, butlers_errc::draining, "the node is shutting down");
      return;
    }
    std::string body;
    if (tail == "/route") {
      auto type = req->header().opt_value_of(
        restinio::http_field::content_type);
      if (!type || !is_json_media_type(*type)) {
        respond_error(req, butlers_errc::unsupported_media_type,
                      "Content-Type must be application/json");
        return;
      }
      if (req->body().size() > settings.http.max_body_bytes) {
        respond_error(req, butlers_errc::payload_too_large,
                      "body exceeds http.max_body_bytes");
        return;
      }
      body = req->body();
    }
    enter();
    sys.spawn(
      [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
         request_handle req, registry_actor reg,
         std::chrono::milliseconds timeout, std::string name, std::string body,
         std::string work_id) {
        bridge->request(reg, timeout, lookup_atom_v, name)
          .then(
            [=](const butler_actor& b) {
              if (!work_id.empty()) {
                bridge->request(b, timeout, cancel_atom_v, work_id)
                  .then(
                    [self_ptr, req](bool found) {
                      self_ptr->respond(req,
                                        found ? restinio::status_ok()
                                              : status_line(404),
                                        std::string{R"({"cancelled":)"}
                                          + (found ? "true" : "false") + "}",
                                        json_type,
                                        self_ptr->leave_when_written());
                    },
                    [self_ptr, req](const caf::error& err) {
                      self_ptr->fail(req, err);
                    });
                return;
              }
              route_request rr{body, "route", {}, {}};
              bridge->request(b, timeout, route_atom_v, std::move(rr))
                .then(
                  [self_ptr, req](const route_response& r) {
                    int status = 202;
                    if (r.status == "error")
                      status = http_status(
                        normalize_error_class(r.error_class));
                    auto resp = req->create_response(status_line(status));
                    resp.append_header(restinio::http_field::content_type,
                                       json_type);
                    if (status == 429 || status == 503)
                      resp.append_header(restinio::http_field::retry_after,
                                         "1");
                    resp.set_body(to_json(r))
                      .done(self_ptr->leave_when_written());
                  },
                  [self_ptr, req](const caf::error& err) {
                    self_ptr->fail(req, err);
                  });
            },
            [self_ptr, req, name](const caf::error&) {
              self_ptr->respond_error(req, butlers_errc::not_found,
                                      "no butler named '" + name + "'", "[]",
                                      self_ptr->leave_when_written());
            });
      },
      shared_from_this(), req, reg, timeout, name, std::move(body), work_id);
  }

  /// /v1/requests/{id}: GET reconstructs the request (received, plan,
  /// subrequests, work items, transitions, dead letters, operator actions);
  /// POST {id}/replay | cancel | force-complete | reroute with a JSON body
  /// {"who","why"[,"state"][,"segment_id","butler"]} is an audited operator
  /// action (409 when the request's state does not allow it).
  void requests_api(const request_handle& req, std::string rest,
                    const restinio::http_method_id_t& method) {
    auto timeout = std::chrono::milliseconds{settings.http.request_timeout_ms};
    auto slash = rest.find('/');
    auto id = rest.substr(0, slash);
    auto action = slash == std::string::npos ? std::string{}
                                             : rest.substr(slash + 1);
    if (!is_uuid(id)) {
      respond_error(req, butlers_errc::validation_error,
                    "request id must be a UUID");
      return;
    }
    if (action.empty() && method == restinio::http_method_get()) {
      respond_read(req, named_statement{"request_inspect", {id}},
                   butlers_errc::not_found, "no request " + id);
      return;
    }
    auto verb = parse_operator_verb(action);
    if (method != restinio::http_method_post() || !verb) {
      respond_error(req, butlers_errc::not_found,
                    "no route for " + std::string{method.c_str()}
                      + " /v1/requests/" + rest);
      return;
    }
    rapidjson::Document doc;
    if (json::parse(req->body(), doc) || !doc.IsObject()) {
      respond_error(req, butlers_errc::validation_error,
                    "body must be a JSON object with 'who' and 'why'");
      return;
    }
    auto field = [&](const char* key) {
      auto i = doc.FindMember(key);
      return i != doc.MemberEnd() && i->value.IsString()
               ? std::string{i->value.GetString()}
               : std::string{};
    };
    operator_action op;
    op.verb = *verb;
    op.request_id = id;
    op.who = field("who");
    op.why = field("why");
    if (op.verb == operator_verb::force_complete)
      op.state = field("state");
    if (op.verb == operator_verb::reroute) {
      op.segment_id = field("segment_id");
      op.butler = field("butler");
    }
    auto sb = ctx->switchboard();
    if (!sb) {
      respond_error(req, butlers_errc::database_unavailable,
                    "the switchboard is restarting");
      return;
    }
    enter();
    sys.spawn(
      [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
         request_handle req, switchboard_actor sb,
         std::chrono::milliseconds timeout, operator_action op) {
        bridge->request(sb, timeout, operate_atom_v, std::move(op))
          .then(
            [self_ptr, req](const std::string& body) {
              self_ptr->respond(req, restinio::status_ok(), body, json_type,
                                self_ptr->leave_when_written());
            },
            [self_ptr, req](const caf::error& err) {
              self_ptr->fail(req, err);
            });
      },
      shared_from_this(), req, sb, timeout, std::move(op));
  }

  // -- threads (spec 003) -----------------------------------------------------

  /// The thread directory, or an answer saying why there is none.
  thread_directory_actor directory(const request_handle& req) {
    auto dir = ctx->threads();
    if (!dir)
      respond_error(req,
                    ctx->status.database_configured
                      ? butlers_errc::database_unavailable
                      : butlers_errc::target_unavailable,
                    ctx->status.database_configured
                      ? "the thread directory is restarting"
                      : "no database is configured on this node");
    return dir;
  }

  /// A refused turn: the status it names, `code` the specific reason
  /// (run_changed, run_active, overload_rejected, ...).
  void respond_turn_error(const request_handle& req, const turn_result& r,
                          restinio::write_status_cb_t on_written) {
    auto status = static_cast<int>(r.status);
    std::string cls = "internal_error";
    if (status == 400 || status == 404 || status == 409)
      cls = "validation_error";
    else if (status == 429)
      cls = "overload_rejected";
    else if (status == 503)
      cls = "target_unavailable";
    else if (status == 504)
      cls = "timeout";
    std::string details = "[]";
    if (!r.active_run_id.empty())
      details = R"([{"active_run_id":)" + json::quote(r.active_run_id) + "}]";
    auto resp = req->create_response(status_line(status));
    resp.append_header(restinio::http_field::content_type, json_type);
    if (status == 429 || status == 503 || status == 504)
      resp.append_header(restinio::http_field::retry_after, "1");
    resp
      .set_body(R"({"error":{"class":)" + json::quote(cls) + R"(,"code":)"
                + json::quote(r.error) + R"(,"message":)"
                + json::quote(r.message) + R"(,"details":)" + details + "}}")
      .done(std::move(on_written));
  }

  /// /v1/threads/{id}/turns (POST), /cancel (POST), /events (GET, SSE),
  /// /transcript?after=CURSOR[&limit=N] (GET).
  void threads_api(const request_handle& req, std::string rest,
                   const restinio::http_method_id_t& method) {
    auto slash = rest.find('/');
    auto id = rest.substr(0, slash);
    auto action = slash == std::string::npos ? std::string{}
                                             : rest.substr(slash + 1);
    bool is_post = method == restinio::http_method_post();
    bool is_get = method == restinio::http_method_get();
    bool known = (action == "turns" && is_post)
                 || (action == "cancel" && is_post)
                 || (action == "events" && is_get)
                 || (action == "transcript" && is_get);
    if (!known) {
      respond_error(req, butlers_errc::not_found,
                    "no route for " + std::string{method.c_str()}
                      + " /v1/threads/" + rest);
      return;
    }
    if (!valid_thread_id(id)) {
      respond_error(req, butlers_errc::validation_error,
                    "thread id must be 1..128 of [A-Za-z0-9._:-]");
      return;
    }
    if (action == "events") {
      subscribe(req, id);
      return;
    }
    if (action == "transcript") {
      transcript(req, id);
      return;
    }
    if (ctx->status.draining) {
      respond_error(req, butlers_errc::draining, "the node is shutting down");
      return;
    }
    auto timeout = std::chrono::milliseconds{settings.http.request_timeout_ms};
    if (action == "cancel") {
      auto dir = directory(req);
      if (!dir)
        return;
      enter();
      sys.spawn(
        [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
           request_handle req, thread_directory_actor dir,
           std::chrono::milliseconds timeout, std::string id) {
          bridge->request(dir, timeout, cancel_atom_v, id, std::string{})
            .then(
              [self_ptr, req](uint32_t n) {
                self_ptr->respond(req, restinio::status_ok(),
                                  R"({"cancelled":)" + std::to_string(n) + "}",
                                  json_type, self_ptr->leave_when_written());
              },
              [self_ptr, req](const caf::error& err) {
                self_ptr->fail(req, err);
              });
        },
        shared_from_this(), req, dir, timeout, id);
      return;
    }
    auto type = req->header().opt_value_of(restinio::http_field::content_type);
    if (!type || !is_json_media_type(*type)) {
      respond_error(req, butlers_errc::unsupported_media_type,
                    "Content-Type must be application/json");
      return;
    }
    if (req->body().size() > settings.http.max_body_bytes) {
      respond_error(req, butlers_errc::payload_too_large,
                    "body exceeds http.max_body_bytes");
      return;
    }
    thread_turn turn;
    auto bad = parse_turn_body(req->body(), turn);
    if (!bad.empty()) {
      respond_error(req, butlers_errc::validation_error, bad);
      return;
    }
    turn.thread_id = id;
    auto dir = directory(req);
    if (!dir)
      return;
    enter();
    sys.spawn(
      [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
         request_handle req, thread_directory_actor dir,
         std::chrono::milliseconds timeout, thread_turn turn) {
        bridge->request(dir, timeout, turn_atom_v, std::move(turn))
          .then(
            [self_ptr, req](const turn_result& r) {
              auto done = self_ptr->leave_when_written();
              if (r.status != 200) {
                self_ptr->respond_turn_error(req, r, done);
                return;
              }
              self_ptr->respond(req, restinio::status_ok(),
                                R"({"run_id":)" + json::quote(r.run_id)
                                  + R"(,"kind":)" + json::quote(r.kind)
                                  + R"(,"cursor":)" + std::to_string(r.cursor)
                                  + R"(,"duplicate":)"
                                  + (r.duplicate ? "true" : "false") + "}",
                                json_type, done);
            },
            [self_ptr, req](const caf::error& err) {
              self_ptr->fail(req, err);
            });
      },
      shared_from_this(), req, dir, timeout, std::move(turn));
  }

  /// /v1/runs/{run_id}/cancel (POST).
  void runs_api(const request_handle& req, std::string rest,
                const restinio::http_method_id_t& method) {
    auto slash = rest.find('/');
    auto id = rest.substr(0, slash);
    auto action = slash == std::string::npos ? std::string{}
                                             : rest.substr(slash + 1);
    if (method != restinio::http_method_post() || action != "cancel") {
      respond_error(req, butlers_errc::not_found,
                    "no route for " + std::string{method.c_str()} + " /v1/runs/"
                      + rest);
      return;
    }
    if (!is_uuid(id)) {
      respond_error(req, butlers_errc::validation_error,
                    "run id must be a UUID");
      return;
    }
    auto dir = directory(req);
    if (!dir)
      return;
    auto timeout = std::chrono::milliseconds{settings.http.request_timeout_ms};
    enter();
    sys.spawn(
      [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
         request_handle req, thread_directory_actor dir,
         std::chrono::milliseconds timeout, std::string id) {
        bridge->request(dir, timeout, cancel_atom_v, std::string{}, id)
          .then(
            [self_ptr, req](uint32_t n) {
              self_ptr->respond(req,
                                n > 0 ? restinio::status_ok()
                                      : status_line(404),
                                R"({"cancelled":)" + std::to_string(n) + "}",
                                json_type, self_ptr->leave_when_written());
            },
            [self_ptr, req](const caf::error& err) {
              self_ptr->fail(req, err);
            });
      },
      shared_from_this(), req, dir, timeout, id);
  }

  /// A non-negative integer query parameter; `fallback` when absent,
  /// nullopt when malformed.
  static std::optional<int64_t> query_int(std::string_view query,
                                          std::string_view key,
                                          int64_t fallback) {
    size_t pos = 0;
    while (pos <= query.size()) {
      auto end = query.find('&', pos);
      if (end == std::string_view::npos)
        end = query.size();
      auto part = query.substr(pos, end - pos);
      if (part.size() > key.size() && part.substr(0, key.size()) == key
          && part[key.size()] == '=') {
        auto value = part.substr(key.size() + 1);
        if (value.empty() || value.size() > 18)
          return std::nullopt;
        int64_t x = 0;
        for (char c : value) {
          if (c < '0' || c > '9')
            return std::nullopt;
          x = x * 10 + (c - '0');
        }
        return x;
      }
      pos = end + 1;
    }
    return fallback;
  }

  /// GET /v1/threads/{id}/transcript?after=CURSOR&limit=N: gap backfill.
  void transcript(const request_handle& req, const std::string& id) {
    auto query = req->header().query();
    auto after = query_int(query, "after", 0);
    auto limit = query_int(query, "limit", 500);
    if (!after || !limit || *limit < 1 || *limit > 1000) {
      respond_error(req, butlers_errc::validation_error,
                    "query parameters: after (cursor, a non-negative "
                    "integer) and limit (1..1000)");
      return;
    }
    respond_read(req,
                 named_statement{"thread_transcript_read",
                                 {id, std::to_string(*after),
                                  std::to_string(*limit)}},
                 butlers_errc::internal_error, "transcript query failed");
  }

  /// Answers 200 with what `stmt` reads through the node's reader: the first
  /// column of its first row, a JSON document built in SQL. No row (or a
  /// failed read) is answered `missing_code` with `missing`.
  void respond_read(const request_handle& req, named_statement stmt,
                    butlers_errc missing_code, std::string missing) {
    auto reader = ctx->reader();
    if (!reader) {
      respond_error(req, butlers_errc::database_unavailable,
                    "no database reader on this node");
      return;
    }
    auto timeout = std::chrono::milliseconds{settings.http.request_timeout_ms};
    enter();
    sys.spawn(
      [](caf::event_based_actor* bridge, std::shared_ptr<impl> self_ptr,
         request_handle req, db_reader_actor reader,
         std::chrono::milliseconds timeout, named_statement stmt,
         butlers_errc missing_code, std::string missing) {
        bridge->request(reader, timeout, read_atom_v, std::move(stmt))
          .then(
            [self_ptr, req, missing_code, missing](const named_result& r) {
              if (!r.ok || r.rows.empty() || r.rows[0].empty()) {
                self_ptr->respond_error(req, missing_code, missing, "[]",
                                        self_ptr->leave_when_written());
                return;
              }
              self_ptr->respond(req, restinio::status_ok(), r.rows[0][0],
                                json_type, self_ptr->leave_when_written());
            },
            [self_ptr, req](const caf::error& err) {
              self_ptr->fail(req, err);
            });
      },
      shared_from_this(), req, reader, timeout, std::move(stmt), missing_code,
      std::move(missing));
  }

  /// GET /v1/threads/{id}/events (thread scope) or /v1/events/summary
  /// (`thread_id` empty): a server-sent event stream fed by the event hub.
  /// Not counted as in flight: a stream lasts until the client leaves or
  /// the server stops.
  void subscribe(const request_handle& req, const std::string& thread_id) {
    auto hub = ctx->events;
    if (!hub) {
      respond_error(req, butlers_errc::target_unavailable,
                    "this node serves no event streams");
      return;
    }
    if (hub->size() >= settings.threads.max_subscribers) {
      respond_error(req, butlers_errc::overload_rejected,
                    "threads.max_subscribers event streams are open");
      return;
    }
    using stream = restinio::response_builder_t<restinio::chunked_output_t>;
    auto out = std::make_shared<stream>(
      req->create_response<restinio::chunked_output_t>());
    out->append_header(restinio::http_field::content_type, "text/event-stream");
    out->append_header(restinio::http_field::cache_control, "no-store");
    std::string hello = thread_id.empty()
                          ? ": summary stream\n\n"
                          : ": thread stream " + thread_id + "\n\n";
    out->append_chunk(std::move(hello));
    out->flush();
    auto sub = hub->subscribe(thread_id, [out](std::string chunk,
                                               std::function<void(bool)> done) {
      out->append_chunk(std::move(chunk));
      out->flush([done](const asio::error_code& ec) {
        done(!ec);
      });
    });
    if (!sub) {
      // Lost a race for the last place.
      out->append_chunk(sse_frame("error", R"({"code":"overload_rejected"})"));
      out->done();
    }
  }

  /// Answers a failed actor round trip and leaves the in-flight count.
  void fail(const request_handle& req, const caf::error& err) {
    auto msg = message_of(err);
    if (msg.empty())
      msg = to_string(code_of(err));
    respond_error(req, code_of(err), msg, "[]", leave_when_written());
  }

  void observe(std::chrono::steady_clock::time_point started) {
    using ms = std::chrono::duration<double, std::milli>;
    accept_latency.observe(
      ms{std::chrono::steady_clock::now() - started}.count());
  }

  /// The write callback that ends a request's time in flight once its
  /// response has left (or failed to leave) through the socket, so a drain
  /// that waits for idle never closes a connection under a pending reply.
  restinio::write_status_cb_t leave_when_written() {
    return [self_ptr = shared_from_this()](const auto&) {
      self_ptr->leave();
    };
  }

  void enter() {
    std::lock_guard<std::mutex> guard{mtx};
    ++in_flight;
  }

  void leave() {
    std::lock_guard<std::mutex> guard{mtx};
    if (--in_flight == 0)
      idle_cv.notify_all();
  }

  void readyz(const request_handle& req) {
    auto& st = ctx->status;
    std::string body = R"({"ready":)";
    body += st.ready() ? "true" : "false";
    body += R"(,"draining":)";
    body += st.draining ? "true" : "false";
    body += R"(,"database":)";
    if (!st.database_configured) {
      body += R"("not configured")";
    } else {
      body += st.database_ready ? R"("ready")" : R"("unavailable")";
      auto err = st.database_error();
      if (!err.empty())
        body += R"(,"database_error":)" + json::quote(err);
    }
    body += "}";
    respond(req,
            st.ready() ? restinio::status_ok()
                       : restinio::status_service_unavailable(),
            std::move(body));
  }

  uint16_t start() {
    auto& http = settings.http;
    auto n = std::max<uint32_t>(1, http.threads);
    // Each HTTP thread takes its share of http.max_connections, rounded up.
    auto per_shard = std::max<std::size_t>(1,
                                           (http.max_connections + n - 1) / n);
    // Bodies up to twice the limit are read and answered 413 by us; larger
    // ones make restinio drop the connection before buffering them.
    auto body_cap = http.max_body_bytes * 2 + 65536;
    try {
      // With SO_REUSEPORT, binding would also succeed on a port that
      // another process of the same user listens on with that option (a
      // second node on the same port), and the two would silently share
      // its connections. So bind the port alone first, which fails if
      // anything listens on it, and keep the port the kernel picked when
      // http.port is 0.
      port = n > 1 ? reserve_port(http.bind, http.port) : http.port;
      for (uint32_t i = 0; i < n; ++i) {
        auto sh = std::make_unique<shard>();
        auto* raw = sh.get();
        sh->requests
          = &ctx->metrics.get_counter("butlers_http_thread_requests_total",
                                      "HTTP requests handled, by server thread",
                                      "thread=\"" + std::to_string(i) + "\"");
        sh->bridge = sys.spawn(ingest_bridge_actor, shared_from_this(), raw);
        sh->server = std::make_unique<restinio::http_server_t<
          traits>>(restinio::external_io_context(sh->ioctx),
                   restinio::server_settings_t<traits>{}
                     .address(http.bind)
                     .port(port)
                     .max_parallel_connections(per_shard)
                     .request_handler([this, raw](auto req) {
                       return handle(*raw, std::move(req));
                     })
                     .read_next_http_message_timelimit(std::chrono::seconds{60})
                     .handle_request_timeout(std::chrono::milliseconds{
                       http.request_timeout_ms + 1000})
                     .incoming_http_msg_limits(
                       restinio::incoming_http_msg_limits_t{}.max_body_size(
                         body_cap))
                     .acceptor_options_setter(
                       [n](restinio::acceptor_options_t& opts) {
                         opts.set_option(
                           asio::ip::tcp::acceptor::reuse_address(true));
                         if (n > 1)
                           opts.set_option(asio::detail::socket_option::boolean<
                                           SOL_SOCKET, SO_REUSEPORT>(true));
                       })
                     .acceptor_post_bind_hook(
                       [this](asio::ip::tcp::acceptor& acc) {
                         port = acc.local_endpoint().port();
                       }));
        auto work = std::make_shared<
          asio::executor_work_guard<asio::io_context::executor_type>>(
          raw->ioctx.get_executor());
        sh->thread = std::thread{[raw, work] {
          raw->ioctx.run();
        }};
        shards.push_back(std::move(sh));
      }
      for (auto& sh : shards)
        sh->server->open_sync();
    } catch (const std::exception& e) {
      stop();
      throw std::runtime_error("cannot listen on " + http.bind + ":"
                               + std::to_string(http.port) + ": " + e.what());
    }
    if (ctx->events) {
      heartbeat = std::thread{[this] {
        // Below the request timeout, which would close an idle stream.
        auto period = std::chrono::milliseconds{
          std::min<uint32_t>(settings.threads.heartbeat_ms,
                             settings.http.request_timeout_ms / 2)};
        std::unique_lock<std::mutex> guard{heartbeat_mtx};
        while (!heartbeat_cv.wait_for(guard, period, [this] {
          return stopping;
        })) {
          guard.unlock();
          ctx->events->heartbeat();
          guard.lock();
        }
      }};
    }
    return port;
  }

  /// Binds `port` (0: any) on `bind` without SO_REUSEPORT, which fails when
  /// anything listens there, and returns the bound port, released again.
  static uint16_t reserve_port(const std::string& bind, uint16_t port) {
    auto host = bind == "localhost"       ? std::string{"127.0.0.1"}
                : bind == "ip6-localhost" ? std::string{"::1"}
                                          : bind;
    asio::io_context io;
    asio::ip::tcp::endpoint ep{asio::ip::make_address(host), port};
    asio::ip::tcp::acceptor probe{io};
    probe.open(ep.protocol());
    probe.set_option(asio::ip::tcp::acceptor::reuse_address(true));
    probe.bind(ep);
    return probe.local_endpoint().port();
  }

  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx};
    return idle_cv.wait_for(guard, timeout, [this] {
      return in_flight == 0;
    });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard{heartbeat_mtx};
      stopping = true;
    }
    heartbeat_cv.notify_all();
    if (heartbeat.joinable())
      heartbeat.join();
    if (ctx->events)
      ctx->events->close_all();
    for (auto& sh : shards) {
      if (sh->server) {
        try {
          sh->server->close_sync();
        } catch (const std::exception& e) {
          spdlog::warn("closing the HTTP server: {}", e.what());
        }
      }
    }
    for (auto& sh : shards) {
      sh->ioctx.stop();
      if (sh->thread.joinable())
        sh->thread.join();
      sh->server.reset();
      if (sh->bridge) {
        caf::anon_send_exit(sh->bridge, caf::exit_reason::user_shutdown);
        sh->bridge = nullptr;
      }
    }
    // The shards stay until the impl goes: a bridge may still post to one.
  }
};

http_server::http_server(caf::actor_system& sys, const node_settings& settings,
                         node_context_ptr ctx, supervisor_actor sup)
  : impl_(
    std::make_unique<impl>(sys, settings, std::move(ctx), std::move(sup))) {
  // nop
}

http_server::~http_server() {
  impl_->stop();
}

uint16_t http_server::start() {
  return impl_->start();
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
  return impl_->wait_idle(timeout);
}

void http_server::stop() {
  impl_->stop();
}

} // namespace butlers
