// Thread benchmarks:
//
//   butlers_thread_bench idle N
//     spawns N idle thread actors through a real thread directory (no
//     database needed: an idle thread holds nothing) and prints one Markdown
//     row: creation rate, resident memory before and after (VmRSS of this
//     process), bytes per thread.
//
//   butlers_thread_bench steer PORT [--threads K] [--steers N]
//     against a running node (scripted `general`): starts one long run on
//     each of K threads, follows each thread's event stream, sends N steer
//     turns over loopback HTTP at random moments, and prints the steer
//     latency table from the timestamps the scripted runtime recorded.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/thread_directory.hpp"
#include "actors/type_ids.hpp"
#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"

namespace {

using namespace butlers;
using namespace std::chrono_literals;

/// Resident set size of this process in bytes (VmRSS).
uint64_t rss_bytes() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;
  return 0;
}

int idle_bench(uint64_t n) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  auto ctx = std::make_shared<node_context>();
  thread_env env;
  // Long enough that nothing is retired while we measure.
  env.cfg.idle_timeout_s = 86400;
  auto dir = sys.spawn(thread_directory, env, ctx);
  caf::scoped_actor self{sys};
  auto count = [&] {
    uint64_t live = 0;
    self->request(dir, caf::infinite, status_atom_v)
      .receive(
        [&](uint64_t x) {
          live = x;
        },
        [&](caf::error& err) {
          std::fprintf(stderr, "status: %s\n", sys.render(err).c_str());
        });
    return live;
  };
  count();
  auto before = rss_bytes();
  auto t0 = std::chrono::steady_clock::now();
  std::string id;
  for (uint64_t i = 0; i < n; ++i) {
    id = "thread-" + std::to_string(i);
    // Fire and forget; the status request below (same mailbox, sent
    // after) waits until every one of them was handled.
    caf::anon_send(dir, touch_atom_v, id);
    if (i % 10000 == 9999)
      count(); // keep the mailbox short
  }
  auto live = count();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                            - t0)
                .count();
  auto after = rss_bytes();
  auto per = static_cast<double>(after - before) / static_cast<double>(n);
  std::printf("| %llu | %llu | %.0f | %.1f | %.1f | %.1f | %.0f |\n",
              static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(live),
              static_cast<double>(n) / secs, secs,
              static_cast<double>(before) / (1 << 20),
              static_cast<double>(after) / (1 << 20), per);
  std::fflush(stdout);
  self->send_exit(dir, caf::exit_reason::user_shutdown);
  return live == n ? 0 : 1;
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

std::string field(const std::string& body, const std::string& key) {
  rapidjson::Document doc;
  if (json::parse(body, doc) || !doc.IsObject() || !doc.HasMember(key)
      || !doc[key].IsString())
    return {};
  return doc[key].GetString();
}

struct sample {
  int64_t sent_us = 0;
  int64_t answered_us = 0;
};

int steer_bench(uint16_t port, int threads, int steers) {
  test::http_client http{"127.0.0.1", port, 10s};
  std::vector<std::unique_ptr<test::sse_client>> streams;
  std::vector<std::string> ids;
  std::vector<std::string> runs;
  auto tag = std::to_string(now_us());
  for (int k = 0; k < threads; ++k) {
    ids.push_back("bench-" + tag + "-" + std::to_string(k));
    streams.push_back(std::make_unique<test::sse_client>(port, "/v1/threads/"
                                                                 + ids.back()
                                                                 + "/events"));
  }
  for (auto& s : streams)
    test::eventually(
      [&] {
        return s->open();
      },
      2s, 10ms);
  for (int k = 0; k < threads; ++k) {
    auto r = http.post("/v1/threads/" + ids[k] + "/turns",
                       R"({"message_id":"start","text":"long run"})");
    auto run = field(r.body, "run_id");
    if (r.status != 200 || run.empty()) {
      std::fprintf(stderr, "start failed: %d %s\n", r.status, r.body.c_str());
      return 1;
    }
    runs.push_back(run);
  }
  // Steer only once every run is running (its butler took the work item).
  for (auto& s : streams)
    test::eventually(
      [&] {
        return s->count(R"("state":"running")") > 0;
      },
      10s, 10ms);
  std::mt19937 rng{42};
  std::uniform_int_distribution<int> pause_us{0, 20000};
  std::map<std::string, sample> samples;
  int failed = 0;
  for (int i = 0; i < steers; ++i) {
    auto k = static_cast<size_t>(i % threads);
    auto mid = "s" + std::to_string(i);
    sample s;
    s.sent_us = now_us();
    auto r = http.post("/v1/threads/" + ids[k] + "/turns",
                       R"({"message_id":")" + mid
                         + R"(","text":"steer","expected_run_id":")" + runs[k]
                         + "\"}");
    s.answered_us = now_us();
    if (r.status != 200 || field(r.body, "kind") != "steer") {
      ++failed;
      continue;
    }
    samples[mid] = s;
    std::this_thread::sleep_for(std::chrono::microseconds{pause_us(rng)});
  }
  // Every accepted steer is applied at its run's next boundary.
  std::vector<double> from_answer;
  std::vector<double> from_send;
  std::vector<double> boundary_wait;
  std::vector<double> raw_from_answer;
  size_t matched = 0;
  // Polled under a deadline: each look recounts from the streams' text.
  test::eventually(
    [&] {
      from_answer.clear();
      from_send.clear();
      boundary_wait.clear();
      raw_from_answer.clear();
      matched = 0;
      for (auto& s : streams) {
        auto text = s->text();
        size_t pos = 0;
        const std::string marker = "event: steer.applied\ndata: ";
        while ((pos = text.find(marker, pos)) != std::string::npos) {
          pos += marker.size();
          auto end = text.find('\n', pos);
          rapidjson::Document doc;
          if (json::parse(text.substr(pos, end - pos), doc) || !doc.IsObject())
            continue;
          auto applied_us = doc["applied_us"].GetInt64();
          for (auto& in : doc["inputs"].GetArray()) {
            auto i = samples.find(in["message_id"].GetString());
            if (i == samples.end())
              continue;
            ++matched;
            auto waited = in["waited_us"].GetInt64();
            // As specified: the run seeing the input at its boundary, minus
            // the HTTP answer time, minus the wait for the boundary.
            auto lat = static_cast<double>(applied_us - i->second.answered_us
                                           - waited)
                       / 1000.0;
            raw_from_answer.push_back(lat);
            from_answer.push_back(std::max(0.0, lat));
            from_send.push_back(static_cast<double>(in["arrived_us"].GetInt64()
                                                    - i->second.sent_us)
                                / 1000.0);
            boundary_wait.push_back(static_cast<double>(waited) / 1000.0);
          }
        }
      }
      return matched >= samples.size();
    },
    30s, 100ms);
  for (auto& id : ids)
    http.post("/v1/threads/" + id + "/cancel", "");
  std::printf("steers sent %d, accepted %zu, refused %d, applied and seen "
              "%zu\n\n",
              steers, samples.size(), failed, matched);
  std::printf("| measure (ms) | p50 | p99 | max |\n|---|---|---|---|\n");
  auto row = [](const char* name, const std::vector<double>& xs) {
    std::printf("| %s | %.3f | %.3f | %.3f |\n", name, percentile(xs, 0.50),
                percentile(xs, 0.99), percentile(xs, 1.0));
  };
  row("applied - HTTP answer - boundary wait (signed)", raw_from_answer);
  row("same, negative clipped to 0", from_answer);
  row("HTTP request sent -> input reached the run", from_send);
  row("boundary wait (input at the run -> next turn)", boundary_wait);
  return matched == samples.size() && failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "idle") == 0)
    return idle_bench(std::stoull(argv[2]));
  if (argc >= 3 && std::strcmp(argv[1], "steer") == 0) {
    int threads = 8;
    int steers = 1000;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--threads") == 0)
        threads = std::stoi(argv[i + 1]);
      else if (std::strcmp(argv[i], "--steers") == 0)
        steers = std::stoi(argv[i + 1]);
    }
    return steer_bench(static_cast<uint16_t>(std::stoi(argv[2])), threads,
                       steers);
  }
  std::fprintf(stderr,
               "usage: %s idle N | steer PORT [--threads K] "
               "[--steers N]\n",
               argv[0]);
  return 2;
}
