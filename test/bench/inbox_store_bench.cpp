// The inbox's SQL alone: group-committed appends through inbox_store, with
// no HTTP and no actors, so the node's own overhead can be told apart from
// PostgreSQL's. Prints one table row per batch size.
//
//   butlers_inbox_store_bench URL [ROWS] [BATCH]   e.g. "host=/tmp/pg dbname=b"
//
// With BATCH, only that batch size runs (for profiling PostgreSQL while it
// executes one shape of the statement).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "runtime/inbox_store.hpp"
#include "runtime/migrations.hpp"
#include "runtime/uuid.hpp"

namespace {

butlers::inbox_record make_record(const std::string& run, int i, int64_t now) {
  butlers::inbox_record r;
  r.context.request_id = butlers::make_uuid_v7().to_string();
  r.context.received_at_us = now;
  r.context.source_channel = "api";
  r.context.source_endpoint_identity = "bench";
  r.context.source_sender_identity = "user-" + std::to_string(i % 100);
  r.dedupe_key = "idem:3:api:5:bench:" + run + "-" + std::to_string(i);
  r.raw_payload = R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
                  R"("provider":"internal","endpoint_identity":"bench"},)"
                  R"("event":{"external_event_id":"e-)"
                  + std::to_string(i)
                  + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
                    R"("sender":{"identity":"user-1"},"payload":{"raw":{},)"
                    R"("normalized_text":"remind me to call mom at 9"}})";
  r.normalized_text = "remind me to call mom at 9";
  r.policy_tier = "default";
  r.schema_version = "ingest.v1";
  return r;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [ROWS] [BATCH]\n", argv[0]);
    return 2;
  }
  std::string url = argv[1];
  int rows = argc > 2 ? std::atoi(argv[2]) : 20000;
  int only_batch = argc > 3 ? std::atoi(argv[3]) : 0;
  if (rows < 1 || (argc > 3 && (only_batch < 1 || only_batch > 100000))) {
    std::fprintf(stderr, "%s: ROWS must be positive, BATCH 1..100000\n",
                 argv[0]);
    return 2;
  }
  butlers::inbox_store store{url, "bench", 60};
  store.connect();
  store.migrate();
  store.ensure_partitions(1);
  auto run = butlers::make_uuid_v7().to_string().substr(24);
  std::printf("| batch | rows | seconds | rows/s | ms per commit |\n");
  std::printf("|---|---|---|---|---|\n");
  int next = 0;
  std::vector<int> batches{1, 8, 32, 64, 128, 256, 512};
  if (only_batch > 0)
    batches = {only_batch};
  for (int batch : batches) {
    using clock = std::chrono::steady_clock;
    auto start = clock::now();
    int written = 0;
    int commits = 0;
    while (written < rows) {
      butlers::write_batch b;
      auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
      for (int i = 0; i < batch; ++i)
        b.appends.push_back(make_record(run, next++, now));
      store.write(b);
      written += batch;
      ++commits;
      if (only_batch == 0 && batch == 1 && written >= rows / 10)
        break; // single rows are slow; a tenth is enough to measure
    }
    auto secs = std::chrono::duration<double>(clock::now() - start).count();
    std::printf("| %d | %d | %.2f | %.0f | %.3f |\n", batch, written, secs,
                written / secs, secs * 1000 / commits);
  }
  return 0;
}
