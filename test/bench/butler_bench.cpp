// The latency table of spec 000 §2.4 with the scripted runtime: ten
// concurrent messages to one butler at max_concurrent_sessions = 1, 3, 10,
// and spread over ten butlers, each message's latency (route.execute sent →
// its result durable), the makespan and the ideal side by side; then route
// accept latency while the target butler is busy.
//
//   butlers_butler_bench DATABASE_URL [--turn-ms T] [--accepts N]
//
// Runs in-process: real actors, the real inbox writer and PostgreSQL; no
// HTTP. test/bench/run_butler_bench.sh starts a throwaway PostgreSQL and
// runs it; test/bench/README.md shows results.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/butler.hpp"
#include "actors/inbox_writer.hpp"
#include "actors/type_ids.hpp"
#include "runtime/uuid.hpp"

using namespace butlers;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
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

struct bench {
  caf::actor_system& sys;
  inbox_writer_actor writer;
  node_context_ptr ctx;
  uint32_t turn_ms;
  /// Butler names are unique per run, so items another run left in the
  /// same database are never recovered into this one.
  std::string run = "b" + make_uuid_v7().to_string().substr(24, 8) + "-";
  int round = 0;

  std::vector<butler_actor> spawn(caf::scoped_actor& self, int n,
                                  uint32_t slots, uint32_t max_pending) {
    std::vector<butler_actor> out;
    ++round;
    for (int i = 0; i < n; ++i) {
      butler_params p;
      p.cfg.name = run + std::to_string(round) + "-" + std::to_string(i);
      p.cfg.max_concurrent_sessions = slots;
      p.cfg.max_pending = max_pending;
      p.cfg.runtime.turn_ms = turn_ms;
      p.cfg.runtime.turns = 1;
      // No reply: nothing to hand to a messenger, the result is the end.
      p.cfg.runtime.reply = "";
      p.node = "bench";
      p.listener = caf::actor_cast<caf::actor>(self);
      out.push_back(sys.spawn(butler, std::move(p), writer, ctx));
    }
    return out;
  }

  /// One message through each butler, answered: their start-up (the first
  /// lease renewal and recovery) is behind them before anything is timed.
  void warm_up(caf::scoped_actor& self, const std::vector<butler_actor>& bs) {
    for (size_t k = 0; k < bs.size(); ++k)
      self->send(bs[k], route_atom_v,
                 route_request{envelope(run + std::to_string(round) + "-"
                                          + std::to_string(k),
                                        make_uuid_v7().to_string()),
                               "route",
                               {},
                               {}});
    size_t done = 0;
    self->receive_while([&] {
      return done < bs.size();
    })([&](route_response&) {},
       [&](done_atom, route_response&) {
         ++done;
       },
       caf::after(60s) >>
         [&] {
           done = bs.size();
         });
  }

  /// Ten messages at once; returns each message's latency (ms), in send
  /// order, and the makespan.
  std::pair<std::vector<double>, double> ten(int butlers, uint32_t slots) {
    caf::scoped_actor self{sys};
    auto bs = spawn(self, butlers, slots, 100);
    warm_up(self, bs);
    std::map<std::string, int> index;
    std::vector<double> latency(10, 0);
    auto t0 = clock_type::now();
    for (int i = 0; i < 10; ++i) {
      auto rid = make_uuid_v7().to_string();
      index[rid] = i;
      auto k = i % butlers;
      auto name = run + std::to_string(round) + "-" + std::to_string(k);
      self->send(bs[static_cast<size_t>(k)], route_atom_v,
                 route_request{envelope(name, rid), "route", {}, {}});
    }
    int accepted = 0;
    int done = 0;
    double makespan = 0;
    self->receive_while([&] {
      return accepted < 10 || done < 10;
    })(
      [&](route_response& r) {
        ++accepted;
        if (std::getenv("BENCH_DEBUG"))
          std::fprintf(stderr, "accept %.2f ms at %.2f\n", r.duration_ms,
                       ms(clock_type::now() - t0));
        if (r.status != "accepted")
          std::fprintf(stderr, "not accepted: %s %s\n", r.error_class.c_str(),
                       r.error_message.c_str());
      },
      [&](done_atom, route_response& r) {
        ++done;
        auto t = ms(clock_type::now() - t0);
        if (std::getenv("BENCH_DEBUG"))
          std::fprintf(stderr, "done: session %.2f ms, at %.2f\n",
                       r.duration_ms, t);
        auto i = index.find(r.request_id);
        if (i == index.end()) {
          std::fprintf(stderr, "result for an unknown request %s (%s %s)\n",
                       r.request_id.c_str(), r.status.c_str(),
                       r.work_id.c_str());
          for (auto& [k, v] : index)
            std::fprintf(stderr, "  sent %s as %d\n", k.c_str(), v);
          return;
        }
        latency[static_cast<size_t>(i->second)] = t;
        makespan = std::max(makespan, t);
      },
      caf::after(60s) >>
        [&] {
          std::fprintf(stderr, "timed out waiting for results\n");
          accepted = done = 10;
        });
    for (auto& b : bs)
      self->send_exit(b, caf::exit_reason::user_shutdown);
    return {latency, makespan};
  }

  /// route.execute round trips while the butler is busy (one slot, a long
  /// backlog): `n` calls, `window` outstanding at a time.
  std::vector<double> accepts(int n, int window) {
    caf::scoped_actor self{sys};
    auto bs = spawn(self, 1, 1, static_cast<uint32_t>(n + 10));
    warm_up(self, bs);
    auto name = run + std::to_string(round) + "-0";
    std::map<std::string, clock_type::time_point> sent;
    std::vector<double> out;
    int next = 0;
    auto send_one = [&] {
      auto rid = make_uuid_v7().to_string();
      sent[rid] = clock_type::now();
      self->send(bs[0], route_atom_v,
                 route_request{envelope(name, rid), "route", {}, {}});
      ++next;
    };
    for (int i = 0; i < window && next < n; ++i)
      send_one();
    self->receive_while([&] {
      return out.size() < static_cast<size_t>(n);
    })(
      [&](route_response& r) {
        out.push_back(ms(clock_type::now() - sent[r.request_id]));
        if (next < n)
          send_one();
      },
      [&](done_atom, route_response&) {
        // Sessions finishing in the background: the butler stays busy.
      },
      caf::after(60s) >>
        [&] {
          std::fprintf(stderr, "timed out waiting for accepts\n");
          out.resize(static_cast<size_t>(n));
        });
    self->send_exit(bs[0], caf::exit_reason::user_shutdown);
    return out;
  }
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(std::ceil(p / 100.0 * xs.size())) - 1;
  return xs[std::min(i, xs.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATABASE_URL [--turn-ms T] [--accepts N]\n",
                 argv[0]);
    return 2;
  }
  std::string url = argv[1];
  uint32_t turn_ms = 200;
  int n_accepts = 1000;
  uint32_t writer_connections = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--turn-ms")
      turn_ms = static_cast<uint32_t>(std::stoul(argv[i + 1]));
    else if (flag == "--accepts")
      n_accepts = std::stoi(argv[i + 1]);
    else if (flag == "--writer-connections")
      writer_connections = static_cast<uint32_t>(std::stoul(argv[i + 1]));
  }
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto ctx = std::make_shared<node_context>();
  database_config db;
  db.url = url;
  db.writer_connections = writer_connections;
  auto writer = sys.spawn(inbox_writer, db, "bench", 30u, ctx);
  for (int i = 0; i < 300 && !ctx->status.database_ready; ++i)
    std::this_thread::sleep_for(100ms);
  if (!ctx->status.database_ready) {
    std::fprintf(stderr, "database not ready: %s\n",
                 ctx->status.database_error().c_str());
    return 1;
  }
  bench b{sys, writer, ctx, turn_ms};
  b.ten(1, 1); // warm-up: connections, plans, page cache
  b.ten(10, 1);
  struct row {
    std::string name;
    int butlers;
    uint32_t slots;
    double ideal;
  };
  auto t = static_cast<double>(turn_ms);
  std::vector<row> rows{
    {"one butler, max_concurrent_sessions = 1", 1, 1, 10 * t},
    {"one butler, max_concurrent_sessions = 3", 1, 3, 4 * t},
    {"one butler, max_concurrent_sessions = 10", 1, 10, t},
    {"ten butlers, max_concurrent_sessions = 1", 10, 1, t},
  };
  std::printf("Ten concurrent messages, scripted runtime, %u ms per "
              "session\n\n",
              turn_ms);
  std::printf("| scenario | latency of messages 1..10 (ms) | makespan (ms) "
              "| ideal (ms) | makespan / ideal |\n");
  std::printf("|---|---|---|---|---|\n");
  for (auto& r : rows) {
    auto [lat, makespan] = b.ten(r.butlers, r.slots);
    std::string cells;
    for (size_t i = 0; i < lat.size(); ++i)
      cells += (i ? " " : "") + std::to_string(static_cast<int>(lat[i]));
    std::printf("| %s | %s | %.1f | %.0f | %.3f |\n", r.name.c_str(),
                cells.c_str(), makespan, r.ideal, makespan / r.ideal);
  }
  auto acc = b.accepts(n_accepts, 10);
  std::printf("\nroute.execute accept latency while the butler is busy "
              "(%d calls, 10 outstanding, one slot, backlog growing)\n\n",
              n_accepts);
  std::printf("| p50 (ms) | p99 (ms) | max (ms) |\n|---|---|---|\n");
  std::printf("| %.2f | %.2f | %.2f |\n", percentile(acc, 50),
              percentile(acc, 99), percentile(acc, 100));
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  return 0;
}
