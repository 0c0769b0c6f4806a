#include "actors/http_server.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <restinio/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/connector_api.hpp"
#include "actors/connector_stats_api.hpp"
#include "actors/dashboard_api.hpp"
#include "actors/http_api.hpp"
#include "actors/http_body_limit.hpp"
#include "actors/http_guard.hpp"
#include "actors/http_ingest_bridge.hpp"
#include "actors/mcp_api.hpp"
#include "actors/worker_api.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/http_ingest_queue.hpp"
#include "runtime/http_render.hpp"
#include "runtime/http_router.hpp"
#include "runtime/ingest.hpp"
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
  /// Bodies over the limit end at the parser (see http_body_limit.hpp).
  using http_methods_mapper_t = body_limited_methods;
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

/// A status line for any code we answer with.
restinio::http_status_line_t status_line(int status) {
  return restinio::http_status_line_t{restinio::http_status_code_t{
                                        static_cast<uint16_t>(status)},
                                      reason_phrase(status)};
}

} // namespace

struct http_server::impl : std::enable_shared_from_this<impl> {
  // -- HTTP threads (see "HTTP threads" below) --------------------------------

  /// An io_context whose services can be shut down before it goes: that
  /// destroys the handlers still queued (and the connections they hold)
  /// while the server whose connection limiter they report to still lives.
  struct shard_context : asio::io_context {
    using asio::io_context::io_context;
    using asio::io_context::shutdown;
  };

  /// One HTTP thread: its io_context, server and ingest bridge.
  struct shard {
    /// One thread runs it; other threads post to it.
    shard_context ioctx{1};
    std::unique_ptr<restinio::http_server_t<traits>> server;
    std::thread thread;
    /// Carries the shard's ingest batches to the switchboard and back.
    http_ingest_bridge_actor bridge;
    /// butlers_http_thread_requests_total{thread="i"}.
    counter* requests = nullptr;
    /// The shard's ingest requests between parsing and their answer.
    http_ingest_queue<request_handle, inbox_record> ingests;
  };

  /// What answers one route: a function of this server (`on_server`) or of
  /// the API (`on_api`), given the shard the request arrived on, the
  /// request, and the parameters its path bound.
  using handler = void (*)(impl&, shard&, const request_handle&,
                           const path_params&);

  /// Every route of the API, one row each (see `routes()`).
  static const http_route_table<handler>& routes();

  caf::actor_system& sys;
  node_settings settings;
  node_context_ptr ctx;
  supervisor_actor sup;
  uint16_t port = 0;
  /// Credentials and the check of each request against its route's roles.
  http_guard guard;
  /// The endpoints that answer through an actor.
  http_api api;
  /// The routes that feed connectors.
  connector_api connectors;
  /// The routes of external workers.
  worker_api workers;
  /// The web dashboard and its /api.
  dashboard_api dashboard;
  /// Connector heartbeats, rollups and the connector dashboard API.
  connector_stats_api conn_stats;
  /// The tool server over MCP (/mcp).
  mcp_api mcp;

  // -- in-flight tracking for the drain ---------------------------------------
  std::mutex mtx;
  std::condition_variable idle_cv;
  size_t in_flight = 0;

  // -- event stream keep-alive ------------------------------------------------
  std::thread heartbeat;
  std::mutex heartbeat_mtx;
  std::condition_variable heartbeat_cv;
  bool stopping = false;

  // -- metrics ----------------------------------------------------------------
  counter& requests_total;
  histogram& accept_latency;

  impl(caf::actor_system& sys, const node_settings& settings,
       node_context_ptr ctx, supervisor_actor sup)
    : sys(sys), settings(settings), ctx(std::move(ctx)), sup(std::move(sup)),
      guard(sys, this->settings, this->ctx),
      api(sys, this->settings, this->ctx),
      connectors(sys, this->settings, this->ctx),
      workers(sys, this->settings, this->ctx),
      dashboard(sys, this->settings, this->ctx),
      conn_stats(sys, this->settings, this->ctx),
      mcp(sys, this->settings, this->ctx),
      requests_total(
        this->ctx->metrics.get_counter("butlers_http_requests_total",
                                       "HTTP requests received")),
      accept_latency(
        this->ctx->metrics
          .get_histogram("butlers_switchboard_ingress_accept_latency_ms",
                         "From receiving an ingest request to answering it")) {
    // nop
  }

  // -- writing answers --------------------------------------------------------

  /// Writes `r`; `on_written` runs once it has left (or failed to leave)
  /// through the socket.
  static void send(const request_handle& req, http_reply r,
                   restinio::write_status_cb_t on_written = {}) {
    auto resp = req->create_response(status_line(r.status));
    resp.append_header(restinio::http_field::content_type, r.content_type);
    if (r.no_store)
      resp.append_header(restinio::http_field::cache_control, "no-store");
    if (r.retry_after)
      resp.append_header(restinio::http_field::retry_after,
                         std::to_string(
                           std::max<uint32_t>(1, r.retry_after_s)));
    if (r.bearer_challenge)
      resp.append_header(restinio::http_field::www_authenticate,
                         "Bearer realm=\"butlers\"");
    for (auto& [name, value] : r.headers)
      resp.append_header(name, value);
    if (r.close_connection)
      resp.connection_close();
    resp.set_body(std::move(r.body)).done(std::move(on_written));
  }

  /// Writes `r` for a request in flight (see `enter`), which leaves once
  /// the answer is written.
  void answer(const request_handle& req, http_reply r) {
    send(req, std::move(r), leave_when_written());
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

  std::chrono::milliseconds request_timeout() const {
    return std::chrono::milliseconds{settings.http.request_timeout_ms};
  }

  // -- dispatch ---------------------------------------------------------------

  restinio::request_handling_status_t handle(shard& sh, request_handle req) {
    requests_total.inc();
    sh.requests->inc();
    auto& head = req->header();
    auto method = parse_http_method(head.method().c_str());
    auto m = routes().match(method, head.path());
    // Too large: not read to its end (see http_body_limit.hpp), the answer
    // closes the connection with the rest of the body on it.
    if (too_large(req))
      return restinio::request_accepted();
    auto v = guard.check(m.route ? m.route->roles : http_roles::all(),
                         m.route ? &m.params : nullptr, req->body(),
                         header_of(req, restinio::http_field::authorization),
                         head.method().c_str(), head.path());
    if (v.refusal)
      send(req, std::move(*v.refusal));
    else if (v.lookup)
      run_after(sh, req, std::move(v.lookup));
    else
      run(sh, req, m);
    return restinio::request_accepted();
  }

  /// Runs the route `m` found for `req` (404 when none did).
  void run(shard& sh, const request_handle& req,
           const route_match<handler>& m) {
    if (!m.route)
      return send(req, no_route_reply(req->header().method().c_str(),
                                      req->header().path()));
    m.route->handler(*this, sh, req, m.params);
  }

  /// Runs `req`'s route on its shard's thread once the guard's database
  /// look-up allowed it; the request is in flight meanwhile.
  void run_after(shard& sh, const request_handle& req,
                 std::shared_ptr<http_guard::pending> p) {
    enter();
    guard.resolve(std::move(p), [srv = shared_from_this(), &sh,
                                 req](std::optional<http_reply> no) {
      asio::post(sh.ioctx, [srv, &sh, req, no = std::move(no)]() mutable {
        if (no) {
          srv->answer(req, std::move(*no));
          return;
        }
        auto& head = req->header();
        srv->run(sh, req,
                 routes().match(parse_http_method(head.method().c_str()),
                                head.path()));
        srv->leave();
      });
    });
  }

  /// Answers 413 (and closes) when the request is over http.max_body_bytes.
  bool too_large(const request_handle& req) {
    std::optional<uint64_t> declared;
    auto max = settings.http.max_body_bytes;
    auto length = req->header().opt_value_of("Content-Length");
    if (!over_body_limit(length ? std::optional<std::string_view>{*length}
                                : std::nullopt,
                         req->body().size(), max, &declared))
      return false;
    send(req, body_over_limit_reply(declared, max));
    return true;
  }

  /// The value of header `field`, if the request has one.
  static std::optional<std::string_view> header_of(const request_handle& req,
                                                   restinio::http_field field) {
    auto value = req->header().opt_value_of(field);
    return value ? std::optional<std::string_view>{*value} : std::nullopt;
  }

  /// A route answered by a function of this server.
  template<void (impl::*F)(shard&, const request_handle&, const path_params&)>
  static void on_server(impl& srv, shard& sh, const request_handle& req,
                        const path_params& p) {
    (srv.*F)(sh, req, p);
  }

  /// A handler of one of the APIs below, which sees the request as an
  /// `http_call`.
  template<class Api>
  using api_fn = void (Api::*)(const http_call&, http_responder&,
                               const path_params&);

  /// The API a handler belongs to.
  http_api& part(api_fn<http_api>) {
    return api;
  }
  connector_api& part(api_fn<connector_api>) {
    return connectors;
  }
  worker_api& part(api_fn<worker_api>) {
    return workers;
  }
  dashboard_api& part(api_fn<dashboard_api>) {
    return dashboard;
  }
  connector_stats_api& part(api_fn<connector_stats_api>) {
    return conn_stats;
  }
  mcp_api& part(api_fn<mcp_api>) {
    return mcp;
  }

  /// A route answered by `F` of one of the APIs (the API, connectors,
  /// workers, the dashboard, connector statistics, MCP).
  template<auto F>
  static void on_api(impl& srv, shard&, const request_handle& req,
                     const path_params& p) {
    responder out{srv, req};
    (srv.part(F).*F)(call_of(req), out, p);
  }

  /// The request as an `http_call` (valid while `req` is).
  static http_call call_of(const request_handle& req) {
    auto& head = req->header();
    return http_call{head.method().c_str(),
                     head.path(),
                     head.query(),
                     header_of(req, restinio::http_field::content_type),
                     req->body(),
                     [&head](std::string_view name) {
                       auto value = head.opt_value_of(name);
                       return value ? std::optional<std::string_view>{*value}
                                    : std::nullopt;
                     }};
  }

  /// Answers for the API: at once, or later from any thread while the
  /// request counts as in flight.
  struct responder final : http_responder {
    responder(impl& srv, const request_handle& req) : srv(srv), req(req) {
      // nop
    }

    void now(http_reply r) override {
      send(req, std::move(r));
    }

    std::function<void(http_reply)> later() override {
      srv.enter();
      return [self_ptr = srv.shared_from_this(), req = req](http_reply r) {
        self_ptr->answer(req, std::move(r));
      };
    }

    impl& srv;
    const request_handle& req;
  };

  // -- probes and metrics -----------------------------------------------------

  /// GET /healthz.
  void healthz(shard&, const request_handle& req, const path_params&) {
    send(req, healthz_reply());
  }

  /// GET /readyz.
  void readyz(shard&, const request_handle& req, const path_params&) {
    send(req, readyz_reply(ctx->status));
  }

  /// POST /v1/operator/credentials/reload.
  void credentials_reload(shard&, const request_handle& req,
                          const path_params&) {
    send(req, http_guard::reload_reply(guard.reload()));
  }

  /// GET /metrics.
  void metrics(shard&, const request_handle& req, const path_params&) {
    send(req, metrics_reply(ctx->metrics.render()));
  }

  // -- ingest -----------------------------------------------------------------

  /// POST /v1/ingest: validate here, on the HTTP thread, then hand the
  /// record to the switchboard through the shard's ingest bridge, whose
  /// reply completes the response; no thread waits for the commit.
  void ingest(shard& sh, const request_handle& req, const path_params&) {
    auto started = std::chrono::steady_clock::now();
    if (ctx->status.draining)
      return send(req, draining_reply());
    auto type = header_of(req, restinio::http_field::content_type);
    if (!type || !is_json_media_type(*type))
      return send(req, not_json_reply());
    auto& body = req->body();
    if (body.size() > settings.http.max_body_bytes)
      return send(req, ingest_too_large_reply(body.size(),
                                              settings.http.max_body_bytes));
    if (!api.switchboard())
      return send(req,
                  no_ingest_switchboard_reply(ctx->status.database_configured,
                                              settings.cluster.switchboard));
    auto parsed = parse_ingest(body, settings.http.max_body_bytes,
                               settings.switchboard.dedupe_window_s,
                               unix_now_us());
    if (!parsed.parse_error.empty())
      return send(req, ingest_not_json_reply(parsed.parse_error));
    if (!parsed.record)
      return send(req, ingest_violations_reply(parsed.violations));
    enter();
    if (sh.ingests.track(req, started, started + request_timeout(),
                         std::move(*parsed.record)))
      asio::post(sh.ioctx, [self_ptr = shared_from_this(), &sh] {
        flush_ingests(sh);
      });
  }

  /// Any other method on /v1/ingest.
  void ingest_wrong_method(shard&, const request_handle& req,
                           const path_params&) {
    send(req, wrong_method_reply("POST", "/v1/ingest"));
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
  // 504) is kept here instead: the shard's `ingests` queue keeps deadlines in
  // arrival order, so the bridge's periodic sweep only looks at its front.
  // Whichever comes first, the commit's answer or the deadline, takes the
  // request out of the queue and answers it; the other finds it gone.

  std::vector<std::unique_ptr<shard>> shards;

  /// Sends the batch gathered since the last flush to the shard's bridge.
  /// Posted to the shard's io_context by the first request of a batch, it
  /// runs after the handlers already due, so one batch carries every
  /// request parsed in the same round of socket events (one wake-up of a
  /// CAF worker for all).
  static void flush_ingests(shard& sh) {
    auto batch = sh.ingests.take_batch();
    if (!batch.records.empty())
      caf::anon_send(sh.bridge, ingest_atom_v, std::move(batch.records),
                     std::move(batch.tokens));
  }

  /// Answers the ingest request `token` of `sh` with `r`, unless answered
  /// already (504 before a late commit, which a retry then finds).
  void ingest_answer(shard& sh, uint64_t token, http_reply r) {
    auto p = sh.ingests.untrack(token);
    if (!p)
      return;
    observe(p->started);
    answer(p->waiter, std::move(r));
  }

  /// Answers 504 for every tracked request of the shard past its deadline.
  void expire_ingests(shard& sh) {
    for (auto token : sh.ingests.due(std::chrono::steady_clock::now()))
      ingest_answer(sh, token, ingest_timeout_reply());
  }

  /// Answers each request of a batch with its record's result.
  void ingests_done(shard& sh, const std::vector<uint64_t>& tokens,
                    const std::vector<append_result>& res) {
    for (size_t i = 0; i < tokens.size(); ++i)
      ingest_answer(sh, tokens[i],
                    i < res.size()
                      ? ingest_result_reply(res[i])
                      : ingest_failure_reply(butlers_errc::internal_error,
                                             "no result for this record"));
  }

  /// What the ingest bridge of `sh` (which lives as long as this) calls.
  http_ingest_hooks ingest_hooks(shard* sh) {
    auto srv = shared_from_this();
    http_ingest_hooks h;
    h.switchboard = [srv] {
      return srv->api.switchboard();
    };
    h.done = [srv, sh](std::vector<uint64_t> tokens,
                       std::vector<append_result> res) {
      // Answered on the shard's io_context in one go: one wake-up of its
      // thread for the batch, not one per response.
      asio::post(sh->ioctx,
                 [srv, sh, tokens = std::move(tokens), res = std::move(res)] {
                   srv->ingests_done(*sh, tokens, res);
                 });
    };
    h.failed = [srv, sh](const std::vector<uint64_t>& tokens, http_reply r) {
      for (auto token : tokens)
        srv->ingest_answer(*sh, token, r);
    };
    h.sweep = [srv, sh] {
      srv->expire_ingests(*sh);
    };
    // A tenth of the timeout, between 10 ms and 100 ms.
    h.sweep_interval = std::chrono::milliseconds{
      std::clamp<uint64_t>(settings.http.request_timeout_ms / 10, 10, 100)};
    return h;
  }

  /// Records how long the ingest request that arrived at `started` took.
  void observe(std::chrono::steady_clock::time_point started) {
    using ms = std::chrono::duration<double, std::milli>;
    accept_latency.observe(
      ms{std::chrono::steady_clock::now() - started}.count());
  }

  // -- event streams (spec 003) ----------------------------------------------

  /// GET /v1/threads/{id}/events: the thread's event stream.
  void thread_events(shard&, const request_handle& req, const path_params& p) {
    auto id = std::string{p["id"]};
    if (!valid_thread_id(id))
      return send(req, bad_thread_id_reply());
    subscribe(req, id);
  }

  /// GET /v1/events/summary: the summary event stream.
  void events_summary(shard&, const request_handle& req, const path_params&) {
    subscribe(req, {});
  }

  /// Any other method on /v1/events/summary.
  void events_wrong_method(shard&, const request_handle& req,
                           const path_params&) {
    send(req, wrong_method_reply("GET", "/v1/events/summary"));
  }

  /// A server-sent event stream fed by the event hub: one thread's, or the
  /// summary (`thread_id` empty). Not counted as in flight: a stream lasts
  /// until the client leaves or the server stops.
  void subscribe(const request_handle& req, const std::string& thread_id) {
    auto hub = ctx->events;
    if (!hub)
      return send(req, no_streams_reply());
    if (hub->size() >= settings.threads.max_subscribers)
      return send(req, too_many_streams_reply());
    using stream = restinio::response_builder_t<restinio::chunked_output_t>;
    auto out = std::make_shared<stream>(
      req->create_response<restinio::chunked_output_t>());
    out->append_header(restinio::http_field::content_type, "text/event-stream");
    out->append_header(restinio::http_field::cache_control, "no-store");
    out->append_chunk(stream_greeting(thread_id));
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
      out->append_chunk(stream_overload_frame());
      out->done();
    }
  }

  // -- lifecycle --------------------------------------------------------------

  uint16_t start() {
    auto& http = settings.http;
    auto n = std::max<uint32_t>(1, http.threads);
    try {
      // With SO_REUSEPORT, binding would also succeed on a port that
      // another process of the same user listens on with that option (a
      // second node on the same port), and the two would silently share
      // its connections. So bind the port alone first, which fails if
      // anything listens on it, and keep the port the kernel picked when
      // http.port is 0.
      port = n > 1 ? reserve_port(http.bind, http.port) : http.port;
      for (uint32_t i = 0; i < n; ++i)
        shards.push_back(make_shard(i, n));
      for (auto& sh : shards)
        sh->server->open_sync();
    } catch (const std::exception& e) {
      stop();
      throw std::runtime_error("cannot listen on " + http.bind + ":"
                               + std::to_string(http.port) + ": " + e.what());
    }
    if (ctx->events)
      heartbeat = std::thread{[this] {
        beat();
      }};
    return port;
  }

  /// Creates HTTP thread `i` of `n`: its bridge, its server on `port`, and
  /// the thread that runs its io_context.
  std::unique_ptr<shard> make_shard(uint32_t i, uint32_t n) {
    auto& http = settings.http;
    // Each HTTP thread takes its share of http.max_connections, rounded up.
    auto per_shard = std::max<std::size_t>(1,
                                           (http.max_connections + n - 1) / n);
    // Past it, a body is not read: see http_body_limit.hpp.
    auto body_cap = http.max_body_bytes;
    auto sh = std::make_unique<shard>();
    auto* raw = sh.get();
    sh->requests = &ctx->metrics
                      .get_counter("butlers_http_thread_requests_total",
                                   "HTTP requests handled, by server thread",
                                   "thread=\"" + std::to_string(i) + "\"");
    sh->bridge = sys.spawn(http_ingest_bridge, ingest_hooks(raw));
    sh->server = std::make_unique<restinio::http_server_t<traits>>(
      restinio::external_io_context(sh->ioctx),
      restinio::server_settings_t<traits>{}
        .address(http.bind)
        .port(port)
        .max_parallel_connections(per_shard)
        .request_handler([this, raw](auto req) {
          return handle(*raw, std::move(req));
        })
        .read_next_http_message_timelimit(std::chrono::seconds{60})
        .handle_request_timeout(
          std::chrono::milliseconds{http.request_timeout_ms + 1000})
        .incoming_http_msg_limits(
          restinio::incoming_http_msg_limits_t{}.max_body_size(body_cap))
        .acceptor_options_setter([n](restinio::acceptor_options_t& opts) {
          opts.set_option(asio::ip::tcp::acceptor::reuse_address(true));
          if (n > 1)
            opts.set_option(
              asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(
                true));
        })
        .acceptor_post_bind_hook([this](asio::ip::tcp::acceptor& acc) {
          port = acc.local_endpoint().port();
        }));
    auto work = std::make_shared<
      asio::executor_work_guard<asio::io_context::executor_type>>(
      raw->ioctx.get_executor());
    sh->thread = std::thread{[raw, work] {
      raw->ioctx.run();
    }};
    return sh;
  }

  /// The event streams' keep-alive, until `stop`.
  void beat() {
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
      // Connections still held by queued handlers go now, before the
      // server and its connection limiter (TSan: heap-use-after-free when
      // ~io_context destroyed them after the server).
      sh->ioctx.shutdown();
      sh->server.reset();
      if (sh->bridge) {
        caf::anon_send_exit(sh->bridge, caf::exit_reason::user_shutdown);
        sh->bridge = nullptr;
      }
    }
    // The shards stay until the impl goes: a bridge may still post to one.
  }
};

// Who may call each route (actors/README.md "Roles"): `open` asks no
// credential; the `[http] token` has every role. The first row that fits a
// request wins; a row for `m::any` answers what the rows of its path above
// it refuse. No row fits: 404 (after the credential check, so an unknown
// path tells nothing without one).
const http_route_table<http_server::impl::handler>& http_server::impl::
  routes() {
  using m = route_methods;
  using r = http_role;
  constexpr auto open = http_roles::open();
  constexpr auto ingest = http_roles{r::ingest};
  constexpr auto worker = http_roles{r::worker};
  constexpr auto operate = http_roles{r::operate};
  constexpr auto read = http_roles{r::read};
  constexpr auto thread = http_roles{r::thread};
  constexpr auto thread_read = http_roles{r::thread, r::read};
  constexpr auto thread_operate = http_roles{r::thread, r::operate};
  constexpr auto read_operate = http_roles{r::read, r::operate};
  static const http_route_table<handler> table{
    {m::get, "/healthz", open, on_server<&impl::healthz>},
    {m::get, "/readyz", open, on_server<&impl::readyz>},
    {m::get, "/metrics", read, on_server<&impl::metrics>},
    {m::post, "/v1/ingest", ingest, on_server<&impl::ingest>},
    {m::any, "/v1/ingest", ingest, on_server<&impl::ingest_wrong_method>},
    {m::get, "/v1/requests/{id}", read, on_api<&http_api::request_inspect>},
    {m::get, "/v1/requests/{id}/", read, on_api<&http_api::request_inspect>},
    {m::post, "/v1/requests/{id}/{action}", operate,
     on_api<&http_api::request_operate>},
    {m::any, "/v1/requests/{rest...}", read_operate,
     on_api<&http_api::request_other>},
    {m::post, "/v1/operator/forget", operate,
     on_api<&http_api::operator_forget>},
    {m::get, "/v1/butlers", read, on_api<&http_api::butlers_list>},
    {m::get, "/v1/butlers/", read, on_api<&http_api::butlers_list>},
    {m::post, "/v1/butlers/{name}/route", operate,
     on_api<&http_api::butler_route>},
    {m::post, "/v1/butlers/{name}/work/recv", worker,
     on_api<&worker_api::recv>},
    {m::post, "/v1/butlers/{name}/work/{work_id...}/cancel", operate,
     on_api<&http_api::butler_work_cancel>},
    {m::post, "/v1/butlers/{name}/work/{work_id}/{verb}", worker,
     on_api<&worker_api::item>},
    {m::get, "/v1/butlers/{name}/work/{work_id}/files/{sha256}", worker,
     on_api<&worker_api::file>},
    {m::any, "/v1/butlers", read, on_api<&http_api::butlers_other>},
    {m::any, "/v1/butlers/{rest...}", read, on_api<&http_api::butlers_other>},
    {m::get, "/v1/threads", read, on_api<&http_api::threads_list>},
    {m::get, "/v1/threads/{id}", thread_read, on_api<&http_api::thread_get>},
    {m::post, "/v1/threads/{id}/turns", thread,
     on_api<&http_api::thread_turn_post>},
    {m::post, "/v1/threads/{id}/cancel", thread_operate,
     on_api<&http_api::thread_cancel>},
    {m::get, "/v1/threads/{id}/events", thread_read,
     on_server<&impl::thread_events>},
    {m::get, "/v1/threads/{id}/transcript", thread_read,
     on_api<&http_api::thread_transcript>},
    {m::post, "/v1/runs/{run_id}/cancel", thread_operate,
     on_api<&http_api::run_cancel>},
    {m::post, "/v1/runs/{run_id}/approvals/{approval_id}", thread,
     on_api<&http_api::approval_post>},
    // Telegram sends no bearer token: the connector's secret guards it.
    {m::post, "/v1/connectors/{name}/webhook", open,
     on_api<&connector_api::telegram_webhook>},
    // Slack signs its Events API requests instead (actors/SLACK.md).
    {m::post, "/v1/connectors/{name}/events", open,
     on_api<&connector_api::slack_events>},
    {m::post, "/v1/connectors/{name}/ingest", ingest,
     on_api<&connector_api::ingest>},
    {m::post, "/v1/connectors/heartbeat", ingest, // health and statistics
     on_api<&connector_stats_api::heartbeat>},
    {m::post, "/v1/connectors/rollup", ingest,
     on_api<&connector_stats_api::rollup>},
    {m::get, "/api/connectors", read, on_api<&connector_stats_api::list>},
    {m::get, "/api/connectors/summary", read,
     on_api<&connector_stats_api::summary>},
    {m::get, "/api/connectors/fanout", read,
     on_api<&connector_stats_api::fanout>},
    {m::get, "/api/connectors/{type}/{identity}", read,
     on_api<&connector_stats_api::detail>},
    {m::get, "/api/connectors/{type}/{identity}/stats", read,
     on_api<&connector_stats_api::stats>},
    {m::any, "/v1/connectors/{rest...}", ingest, on_api<&connector_api::other>},
    // Sessions' tools: each request carries its session's capability
    // token, which mcp_api checks (the node's token is not one).
    {m::post, "/mcp", open, on_api<&mcp_api::post>},
    {m::get, "/mcp", open, on_api<&mcp_api::get>},
    {m::any, "/mcp", open, on_api<&mcp_api::other>},
    {m::post, "/v1/operator/credentials/reload", operate,
     on_server<&impl::credentials_reload>},
    {m::get, "/v1/events/summary", read, on_server<&impl::events_summary>},
    {m::any, "/v1/events/summary", read, on_server<&impl::events_wrong_method>},
    // dashboard: the web dashboard and the /api it reads
    // (runtime/dashboard/README.md); the shell holds no data, so it is open.
    {m::get, "/", open, on_api<&dashboard_api::file>},
    {m::get, "/index.html", open, on_api<&dashboard_api::file>},
    {m::get, "/chat", open, on_api<&dashboard_api::file>},
    {m::get, "/assets/{file}", open, on_api<&dashboard_api::file>},
    {m::get, "/api/overview", read, on_api<&dashboard_api::overview>},
    {m::get, "/api/requests", read, on_api<&dashboard_api::requests>},
    {m::get, "/api/requests/{id}", read, on_api<&dashboard_api::request>},
    {m::get, "/api/butlers", read, on_api<&dashboard_api::butlers>},
    {m::get, "/api/dead-letters", read, on_api<&dashboard_api::dead_letters>},
    {m::get, "/api/approvals", read, on_api<&dashboard_api::approvals>},
  };
  return table;
}

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

void http_server::reload_credentials() {
  impl_->guard.reload();
}

std::vector<http_server::route_row> http_server::route_rows() {
  std::vector<route_row> out;
  for (auto& r : impl::routes().rows()) {
    auto ms = r.methods == route_methods::get    ? "GET"
              : r.methods == route_methods::post ? "POST"
                                                 : "ANY";
    out.push_back(route_row{ms, r.pattern.text(), r.roles});
  }
  return out;
}

} // namespace butlers
