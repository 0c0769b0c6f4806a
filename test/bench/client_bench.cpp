// The client library against a running node: submit latency (the time
// `submit` takes to hand back its enqueue_ack, with and without the spool's
// fsync) and end-to-end throughput (first submit -> every operation durable
// on the node), printed as a Markdown table. run_client_bench.sh starts the
// node and PostgreSQL.
//
//   butlers_client_bench PORT [--ops N] [--keys K] [--shards S] [--spool DIR]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/client/butlers_client.hpp"

namespace bc = butlers::client;
using std::chrono::steady_clock;

namespace {

std::string envelope(const std::string& run, int key, int i) {
  auto id = run + "-" + std::to_string(key) + "-" + std::to_string(i);
  return R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
         R"("provider":"internal","endpoint_identity":"bench"},)"
         R"("event":{"external_event_id":")"
         + id + R"(","external_thread_id":"t)" + std::to_string(key)
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"bench"},"payload":{"raw":{},)"
           R"("normalized_text":"bench )"
         + id + R"("},"control":{"idempotency_key":")" + id + R"("}})";
}

double pct(std::vector<double>& v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

struct row {
  std::string name;
  int ops = 0;
  std::vector<double> submit_us;
  double seconds = 0;
  int failed = 0;
};

row run(const std::string& name, int port, int ops, int keys, size_t shards,
        const std::string& spool) {
  bc::http_options h;
  h.url = "http://127.0.0.1:" + std::to_string(port);
  bc::options o;
  o.shards = shards;
  o.queue_size = static_cast<size_t>(ops);
  o.spool_path = spool;
  std::atomic<int> failed{0};
  o.on_failure = [&](const bc::op_failure&) {
    ++failed;
  };
  row r;
  r.name = name;
  r.ops = ops;
  r.submit_us.reserve(static_cast<size_t>(ops));
  bc::client c{bc::make_http_transport(h), o};
  std::vector<std::string> bodies;
  for (int i = 0; i < ops; ++i)
    bodies.push_back(envelope(name, i % keys, i / keys));
  auto start = steady_clock::now();
  for (auto& b : bodies) {
    auto t0 = steady_clock::now();
    auto ack = c.submit_ingest(b);
    auto t1 = steady_clock::now();
    if (!ack)
      ++failed;
    r.submit_us.push_back(
      std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  auto report = c.close(steady_clock::now() + std::chrono::minutes{10});
  r.seconds = std::chrono::duration<double>(steady_clock::now() - start)
                .count();
  r.failed = failed + static_cast<int>(report.undelivered.size());
  return r;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s PORT [--ops N] [--keys K] [--shards S] "
                 "[--spool DIR]\n",
                 argv[0]);
    return 2;
  }
  int port = std::atoi(argv[1]);
  int ops = 20000;
  int keys = 64;
  size_t shards = 4;
  std::string spool_dir = "/tmp";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ops")
      ops = std::atoi(argv[i + 1]);
    else if (a == "--keys")
      keys = std::atoi(argv[i + 1]);
    else if (a == "--shards")
      shards = static_cast<size_t>(std::atoi(argv[i + 1]));
    else if (a == "--spool")
      spool_dir = argv[i + 1];
  }
  std::printf("| run | ops | keys | shards | submit p50 µs | p99 µs | max µs "
              "| end-to-end ops/s | failed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (auto spooled : {false, true}) {
    auto name = std::string{spooled ? "spool" : "memory"};
    auto r = run(name, port, ops, keys, shards,
                 spooled ? spool_dir + "/client-bench.spool" : "");
    std::printf("| %s | %d | %d | %zu | %.1f | %.1f | %.1f | %.0f | %d |\n",
                name.c_str(), r.ops, keys, shards, pct(r.submit_us, 0.5),
                pct(r.submit_us, 0.99), pct(r.submit_us, 1.0),
                r.ops / r.seconds, r.failed);
    std::fflush(stdout);
  }
  return 0;
}
