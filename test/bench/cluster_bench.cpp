// Cross-node routing cost: route.execute accept round trips (p50, p99) and
// routed messages per second to a butler on another node, beside the same
// figures in-process.
//
//   butlers_cluster_bench DATABASE_URL [--calls N] [--messages M]
//                         [--window W] [--policy stealing|sharing]
//
// Two actor systems in one process, each with its own middleman (as two
// nodes have): "node-b" hosts a butler (the real butler actor, the real
// inbox writer, PostgreSQL) and publishes it on a loopback port; "node-a"
// reaches it with remote_actor, so every call and its answer cross a real
// TCP connection through CAF's BASP serialization, exactly as the
// switchboard's calls to a remote butler do. The in-process rows send the
// same calls from node-b itself. test/bench/run_cluster_bench.sh starts a
// throwaway PostgreSQL and runs it; test/bench/README.md shows results.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/after.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/butler.hpp"
#include "actors/inbox_writer.hpp"
#include "actors/type_ids.hpp"
#include "runtime/uuid.hpp"
#include "test/support/poll.hpp"

using namespace butlers;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(std::ceil(p / 100.0 * xs.size())) - 1;
  return xs[std::min(i, xs.size() - 1)];
}

std::string envelope(const std::string& butler, const std::string& rid) {
  route_envelope env;
  env.request_id = rid;
  env.received_at = rfc3339_utc(0);
  env.source_channel = "api";
  env.source_endpoint_identity = "bench";
  env.source_sender_identity = "bench";
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = "benchmark message";
  return make_route_json(env);
}

void configure(caf::actor_system_config& cfg, const std::string& policy) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom_from_string(policy));
}

/// Sequential route.execute round trips from `sys` to `butler`: send,
/// wait for the answer, repeat. Milliseconds each. With `refused`, the
/// envelope names another butler, so the butler refuses it at admission
/// (validation_error) without touching the database: the messaging cost
/// alone.
std::vector<double> round_trips(caf::actor_system& sys,
                                const butler_actor& butler,
                                const std::string& name, int n,
                                bool refused = false) {
  auto expected = refused ? "error" : "accepted";
  auto target = refused ? name + "-elsewhere" : name;
  caf::scoped_actor self{sys};
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    route_request req{envelope(target, make_uuid_v7().to_string()),
                      "route",
                      {},
                      {}};
    auto t0 = clock_type::now();
    self->request(butler, 10s, route_atom_v, std::move(req))
      .receive(
        [&](route_response& r) {
          if (r.status != expected)
            std::fprintf(stderr, "unexpected %s: %s\n", r.status.c_str(),
                         r.error_message.c_str());
          out.push_back(ms(clock_type::now() - t0));
        },
        [&](caf::error& err) {
          std::fprintf(stderr, "round trip failed: %s\n",
                       sys.render(err).c_str());
        });
  }
  return out;
}

/// `n` messages routed with up to `window` awaiting acceptance, each with
/// the sender as reply_to (as the switchboard sends them); messages per
/// second from the first send until every result came back.
double routed_per_second(caf::actor_system& sys, const butler_actor& butler,
                         const std::string& name, int n, int window) {
  caf::scoped_actor self{sys};
  auto me = caf::actor_cast<caf::actor>(self);
  int sent = 0, accepted = 0, done = 0;
  auto send_one = [&] {
    ++sent;
    self->send(butler, route_atom_v,
               route_request{envelope(name, make_uuid_v7().to_string()),
                             "route",
                             {},
                             me});
  };
  auto t0 = clock_type::now();
  for (int i = 0; i < window && sent < n; ++i)
    send_one();
  bool timed_out = false;
  self->receive_while([&] {
    return !timed_out && (accepted < n || done < n);
  })(
    [&](route_response& r) {
      ++accepted;
      if (r.status != "accepted")
        std::fprintf(stderr, "not accepted: %s\n", r.error_message.c_str());
      if (sent < n)
        send_one();
    },
    [&](done_atom, route_response&) {
      ++done;
    },
    caf::after(30s) >>
      [&] {
        std::fprintf(stderr, "timed out: %d accepted, %d done of %d\n",
                     accepted, done, n);
        timed_out = true;
      });
  return n / std::chrono::duration<double>(clock_type::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DATABASE_URL [--calls N] [--messages M] "
                 "[--window W] [--policy stealing|sharing]\n",
                 argv[0]);
    return 2;
  }
  std::string url = argv[1];
  int calls = 2000;
  int messages = 3000;
  int window = 32;
  std::string policy = "stealing";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--calls")
      calls = std::stoi(argv[i + 1]);
    else if (flag == "--messages")
      messages = std::stoi(argv[i + 1]);
    else if (flag == "--window")
      window = std::stoi(argv[i + 1]);
    else if (flag == "--policy")
      policy = argv[i + 1];
  }
  // The refused calls are logged at info: keep the table readable.
  spdlog::set_level(spdlog::level::warn);
  // node-b: the butler's node.
  caf::actor_system_config cfg_b;
  configure(cfg_b, policy);
  caf::actor_system node_b{cfg_b};
  auto ctx = std::make_shared<node_context>();
  database_config db;
  db.url = url;
  auto writer = node_b.spawn(inbox_writer, db, "node-b", 30u, ctx);
  if (!test::eventually(
        [&] {
          return ctx->status.database_ready.load();
        },
        30s, 100ms)) {
    std::fprintf(stderr, "database not ready: %s\n",
                 ctx->status.database_error().c_str());
    return 1;
  }
  // Unique per run: items another run left are never recovered here.
  auto name = "bench-" + make_uuid_v7().to_string().substr(24, 8);
  butler_params p;
  p.cfg.name = name;
  p.cfg.max_concurrent_sessions = 16;
  p.cfg.max_pending = 100000;
  p.cfg.runtime.turn_ms = 1;
  p.cfg.runtime.turns = 1;
  p.cfg.runtime.reply = ""; // nothing to hand to a messenger
  p.node = "node-b";
  auto butler_hdl = node_b.spawn(butler, std::move(p), writer, ctx);
  auto port = node_b.middleman().publish(butler_hdl, 0, "127.0.0.1", true);
  if (!port) {
    std::fprintf(stderr, "publish: %s\n", node_b.render(port.error()).c_str());
    return 1;
  }
  // node-a: the switchboard's side.
  caf::actor_system_config cfg_a;
  configure(cfg_a, policy);
  caf::actor_system node_a{cfg_a};
  auto remote = node_a.middleman().remote_actor<butler_actor>("127.0.0.1",
                                                              *port);
  if (!remote) {
    std::fprintf(stderr, "remote_actor: %s\n",
                 node_a.render(remote.error()).c_str());
    return 1;
  }
  // Warm-up: connections, prepared statements, page cache, both paths.
  round_trips(node_b, butler_hdl, name, 200);
  round_trips(node_a, *remote, name, 200);
  auto local_rt = round_trips(node_b, butler_hdl, name, calls);
  auto remote_rt = round_trips(node_a, *remote, name, calls);
  auto local_refused = round_trips(node_b, butler_hdl, name, calls, true);
  auto remote_refused = round_trips(node_a, *remote, name, calls, true);
  auto local_rate = routed_per_second(node_b, butler_hdl, name, messages,
                                      window);
  auto remote_rate = routed_per_second(node_a, *remote, name, messages, window);
  std::printf("route.execute to a butler: accept round trip (%d sequential "
              "calls; durable: the work item is committed before "
              "`accepted`) and routed messages/s (%d messages, %d awaiting "
              "acceptance, results back to the sender; scripted 1 ms "
              "sessions, 16 slots). \"Refused at admission\": the same call "
              "naming another butler, answered validation_error without a "
              "database write (the messaging cost alone). Scheduler: %s, 2 "
              "threads per node.\n\n",
              calls, messages, window, policy.c_str());
  std::printf("| path | accept p50 (ms) | accept p99 (ms) | refused at "
              "admission p50 (ms) | refused p99 (ms) | routed msgs/s "
              "|\n|---|---|---|---|---|---|\n");
  std::printf("| in-process | %.3f | %.3f | %.3f | %.3f | %.0f |\n",
              percentile(local_rt, 50), percentile(local_rt, 99),
              percentile(local_refused, 50), percentile(local_refused, 99),
              local_rate);
  std::printf("| cross-node (loopback TCP, middleman) | %.3f | %.3f | %.3f | "
              "%.3f | %.0f |\n",
              percentile(remote_rt, 50), percentile(remote_rt, 99),
              percentile(remote_refused, 50), percentile(remote_refused, 99),
              remote_rate);
  caf::anon_send_exit(butler_hdl, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  return 0;
}
