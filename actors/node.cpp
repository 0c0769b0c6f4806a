#include "actors/node.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actors/cluster.hpp"
#include "actors/http_server.hpp"
#include "actors/supervisor.hpp"
#include "actors/type_ids.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/forget.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/migrations.hpp"

namespace butlers {

namespace {

void configure_caf(caf::actor_system_config& cfg, const node_settings& s) {
  register_types(cfg);
  auto threads = s.scheduler.threads;
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  cfg.set("scheduler.policy",
          caf::atom_from_string(std::string{to_string(s.scheduler.policy)}));
  if (s.scheduler.max_throughput > 0)
    cfg.set("scheduler.max-throughput",
            static_cast<size_t>(s.scheduler.max_throughput));
  // Work stealing: an idle worker spins briefly (the aggressive phase),
  // then waits on its condition variable, which an enqueue signals. CAF's
  // moderate phase in between (500 sleeps of 50 us, about 25 ms after every
  // wake-up) kept an idle node at a fifth of a core and took CPU from
  // PostgreSQL under load; without it, received -> parsed at 200 msg/s went
  // from 6.1 to 4.3 ms (p50), and saturation throughput did not drop.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  if (s.cluster.active()) {
    cfg.load<caf::io::middleman>();
    if (s.cluster.tls()) {
      // After the middleman (the OpenSSL module needs it). With all three
      // set, CAF requires and verifies a peer certificate on both sides.
      cfg.load<caf::openssl::manager>();
      cfg.set("openssl.certificate", s.cluster.tls_certificate);
      cfg.set("openssl.key", s.cluster.tls_key);
      cfg.set("openssl.cafile", s.cluster.tls_cafile);
    }
    cfg.set("middleman.heartbeat-interval",
            caf::timespan{
              std::chrono::milliseconds{s.cluster.heartbeat_interval_ms}});
    cfg.set("middleman.connection-timeout",
            caf::timespan{
              std::chrono::milliseconds{s.cluster.connection_timeout_ms}});
  }
}

/// Starts the cluster actor and, with `cluster.port` set, publishes it on
/// the cluster port. Returns false when the port cannot be opened.
bool start_cluster(caf::actor_system& sys, const node_settings& s,
                   const node_context_ptr& ctx) {
  if (!s.cluster.active())
    return true;
  auto cl = sys.spawn(cluster, s.cluster, s.node.name, ctx);
  ctx->set_cluster(cl);
  if (s.cluster.port == 0) {
    spdlog::info("cluster: not listening (cluster.port = 0), dialling {} "
                 "peer(s)",
                 s.cluster.peers.size());
    return true;
  }
  auto bind = s.cluster.bind.c_str();
  auto port = s.cluster.tls()
                ? caf::openssl::publish(cl, s.cluster.port, bind, true)
                : sys.middleman().publish(cl, s.cluster.port, bind, true);
  if (!port) {
    spdlog::error("cluster: cannot listen on {}:{}: {}", s.cluster.bind,
                  s.cluster.port, sys.render(port.error()));
    caf::anon_send_exit(cl, caf::exit_reason::user_shutdown);
    ctx->set_cluster({});
    return false;
  }
  spdlog::info("cluster: listening on {}:{}{}, peers {}", s.cluster.bind, *port,
               s.cluster.tls() ? " (mutual TLS)" : "", s.cluster.peers.size());
  return true;
}

/// Waits for SIGINT or SIGTERM; a SIGHUP meanwhile reloads the HTTP
/// credentials and waits on.
int wait_for_signal(http_server& http) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  int sig = 0;
  while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
    spdlog::info("received SIGHUP, reloading the HTTP credentials");
    http.reload_credentials();
  }
  return sig;
}

/// libpq's connect timeout for every connection of this process, unless the
/// environment already chose one.
void apply_connect_timeout(const node_settings& s) {
  auto value = std::to_string(s.database.connect_timeout_s);
  ::setenv("PGCONNECT_TIMEOUT", value.c_str(), 0);
}

/// Hands back the work this node holds: the butlers wait for their running
/// sessions until a second before `drain_end`, then they and the
/// switchboard release every lease still held, so that a restarted node or
/// a peer takes the work over at once instead of after `lease_s`.
void release_leases(caf::actor_system& sys, const supervisor_actor& sup,
                    std::chrono::steady_clock::time_point drain_end) {
  using namespace std::chrono;
  auto left = duration_cast<milliseconds>(drain_end - steady_clock::now());
  auto wait = std::max(left - milliseconds{1000}, milliseconds{0});
  caf::scoped_actor self{sys};
  self
    ->request(sup, std::max(left, milliseconds{0}) + milliseconds{1500},
              drain_atom_v, caf::timespan{wait})
    .receive(
      [](uint32_t n) {
        spdlog::info("released {} lease(s) held", n);
      },
      [&](const caf::error& err) {
        spdlog::warn("leases not released ({}): they expire after lease_s",
                     sys.render(err));
      });
}

} // namespace

void block_shutdown_signals() {
  // A shell starts background jobs with SIGINT ignored; an ignored signal is
  // discarded before sigwait() could see it, so restore the default first.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGHUP, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

/// Ends the process if the shutdown outlives the drain deadline (e.g. a
/// libpq call against a dead server), so that an operator's SIGTERM always
/// takes effect. Armed at the signal; it covers everything up to its own
/// destruction, the last thing `run_node` does.
class drain_watchdog {
 public:
  drain_watchdog() = default;
  drain_watchdog(const drain_watchdog&) = delete;
  drain_watchdog& operator=(const drain_watchdog&) = delete;

  ~drain_watchdog() {
    if (!thread_.joinable())
      return;
    done_.set_value();
    thread_.join();
  }

  /// Starts the countdown: `deadline` to drain, two seconds to stop.
  void arm(std::chrono::seconds deadline) {
    end_ = std::chrono::steady_clock::now() + deadline;
    thread_ = std::thread{[deadline, done = done_.get_future()] {
      if (done.wait_for(deadline + std::chrono::seconds{2})
          == std::future_status::ready)
        return;
      spdlog::error("drain deadline exceeded, exiting");
      std::fflush(nullptr);
      std::_Exit(exit_drain_timeout);
    }};
  }

  /// When the drain should be over.
  std::chrono::steady_clock::time_point drain_end() const {
    return end_;
  }

 private:
  std::promise<void> done_;
  std::thread thread_;
  std::chrono::steady_clock::time_point end_;
};

/// Runs the actor system and the HTTP server until SIGTERM or SIGINT, then
/// drains (arming `dog`) and stops every actor.
int serve(const node_settings& settings, const node_context_ptr& ctx,
          drain_watchdog& dog) {
  caf::actor_system_config cfg;
  configure_caf(cfg, settings);
  caf::actor_system sys{cfg};
  spdlog::info("starting node {} (scheduler: {} threads, policy {})",
               settings.node.name, sys.scheduler().num_workers(),
               to_string(settings.scheduler.policy));
  if (!ctx->status.database_configured)
    spdlog::warn("no database configured: ingest is unavailable");
  int code = exit_ok;
  if (!start_cluster(sys, settings, ctx))
    code = exit_failure;
  // Sessions reach their tools here (loopback: they run on this machine).
  auto mcp_url = [&](uint16_t port) {
    return settings.tools.url.empty()
             ? "http://127.0.0.1:" + std::to_string(port) + "/mcp"
             : settings.tools.url;
  };
  if (settings.http.enabled && settings.http.port != 0)
    ctx->set_mcp_url(mcp_url(settings.http.port));
  auto sup = sys.spawn(supervisor, settings, ctx);
  http_server http{sys, settings, ctx, sup};
  if (code == exit_ok && settings.http.enabled) {
    try {
      auto port = http.start();
      ctx->set_mcp_url(mcp_url(port));
      spdlog::info("HTTP listening on {}:{}", settings.http.bind, port);
      // One machine-readable line on stdout for scripts and tests.
      std::printf("{\"event\":\"listening\",\"address\":\"%s\",\"port\":%u}\n",
                  settings.http.bind.c_str(), static_cast<unsigned>(port));
      std::fflush(stdout);
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      code = exit_failure;
    }
  }
  if (code == exit_ok) {
    auto sig = wait_for_signal(http);
    spdlog::info("received {}, draining (deadline {} s)",
                 sig == SIGINT ? "SIGINT" : "SIGTERM",
                 settings.node.drain_deadline_s);
  }
  // Shutdown: stop intake, drain, stop actors.
  ctx->status.draining = true;
  auto deadline = std::chrono::seconds{settings.node.drain_deadline_s};
  dog.arm(deadline);
  if (!http.wait_idle(deadline))
    spdlog::warn("HTTP requests still in flight at the drain deadline");
  http.stop();
  release_leases(sys, sup, dog.drain_end());
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  if (auto cl = ctx->cluster())
    caf::anon_send_exit(cl, caf::exit_reason::user_shutdown);
  ctx->set_cluster({});
  // The context outlives the actor system: drop its handles, or a detached
  // actor (the reader) is never destroyed and the system waits for it.
  ctx->set_switchboard({});
  ctx->set_registry({});
  ctx->set_messenger({});
  ctx->set_reader({});
  ctx->set_threads({});
  ctx->set_connectors({});
  ctx->set_connector_stats({});
  sys.await_all_actors_done();
  return code;
}

} // namespace

int run_node(const node_settings& settings) {
  apply_connect_timeout(settings);
  drain_watchdog dog;
  int code = exit_ok;
  {
    auto ctx = std::make_shared<node_context>();
    ctx->status.database_configured = !settings.database.url.empty();
    ctx->lifecycle = lifecycle_policy{settings.messenger.adapters};
    ctx->traces = std::make_shared<tracer>(tracer_options_of(settings.telemetry,
                                                             settings.node
                                                               .name),
                                           &ctx->metrics);
    ctx->events = std::make_shared<
      event_hub>(settings.threads.max_subscribers,
                 settings.threads.subscriber_buffer,
                 &ctx->metrics
                    .get_counter("butlers_thread_events_dropped_total",
                                 "Event stream frames dropped because a "
                                 "subscriber's buffer was full"));
    code = serve(settings, ctx, dog);
  }
  // Jobs still running on pool threads (a delivery cancelled by the
  // shutdown) end before the process does: the static objects they use are
  // destroyed at exit.
  if (!blocking_pool::await_all_threads(dog.drain_end()
                                        + std::chrono::seconds{1}))
    spdlog::warn("{} blocking thread(s) still busy at the drain deadline",
                 blocking_pool::live_threads());
  spdlog::info("node stopped");
  return code;
}

int migrate_database(const node_settings& settings) {
  if (settings.database.url.empty()) {
    spdlog::error("no database configured (database.url or "
                  "BUTLERS_DATABASE_URL)");
    return exit_config;
  }
  apply_connect_timeout(settings);
  try {
    pqxx::connection conn{settings.database.url};
    auto applied = apply_migrations(conn);
    for (auto& name : applied)
      spdlog::info("applied migration {}", name);
    spdlog::info("{} migration(s) applied, schema is current", applied.size());
    return exit_ok;
  } catch (const std::exception& e) {
    spdlog::error("migration failed: {}", e.what());
    return exit_failure;
  }
}

int replay_request(const node_settings& settings, const std::string& request_id,
                   const std::string& who, const std::string& why) {
  if (settings.database.url.empty()) {
    spdlog::error("no database configured (database.url or "
                  "BUTLERS_DATABASE_URL)");
    return exit_config;
  }
  apply_connect_timeout(settings);
  try {
    pqxx::connection conn{settings.database.url};
    pqxx::work tx{conn};
    auto r = run_named(tx, named_statement{"request_replay",
                                           {request_id, who, why}});
    tx.commit();
    if (r.rows.empty()) {
      spdlog::error("replay of {} refused: the request is not errored "
                    "(the refusal is audited)",
                    request_id);
      return exit_failure;
    }
    spdlog::info("request {} replayed: {} subrequest(s) run again once a "
                 "node's cold path takes it",
                 request_id, r.rows[0][1]);
    return exit_ok;
  } catch (const std::exception& e) {
    spdlog::error("replay failed: {}", e.what());
    return exit_failure;
  }
}

int forget_sender(const node_settings& settings, const std::string& sender,
                  const std::string& who, const std::string& why, int batch) {
  forget_order order;
  order.who = who;
  order.why = why;
  order.batch = batch;
  auto bad = parse_forget_sender(sender, order);
  if (bad.empty())
    bad = check_forget_order(order);
  if (!bad.empty()) {
    spdlog::error("forget refused: {}", bad);
    return exit_config;
  }
  if (settings.database.url.empty()) {
    spdlog::error("no database configured (database.url or "
                  "BUTLERS_DATABASE_URL)");
    return exit_config;
  }
  apply_connect_timeout(settings);
  try {
    // The node that runs applies them too; a forget may come first.
    pqxx::connection conn{settings.database.url};
    apply_migrations(conn);
  } catch (const std::exception& e) {
    spdlog::error("forget failed: {}", e.what());
    return exit_failure;
  }
  auto report = run_forget(settings.database.url, order,
                           [](const std::string& line) {
                             spdlog::info("{}", line);
                           });
  auto hash = forget_sender_hash(order);
  std::cout << forget_report_json(report, hash) << std::endl;
  if (!report.ok) {
    spdlog::error("forget of sender {} failed after {} row(s): {} (run it "
                  "again; audit row {})",
                  hash, report.total, report.error, report.audit_id);
    return exit_failure;
  }
  spdlog::info("forget of sender {} done: {} row(s) erased, {} run(s) in "
               "flight, audit row {}",
               hash, report.total, report.in_flight, report.audit_id);
  return exit_ok;
}

} // namespace butlers
