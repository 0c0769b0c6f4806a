// The client library against an in-memory transport: per-key order,
// retries and backoff bounds, queue_full, close and drain, failure
// reporting, the spool's replay and its torn tail.

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/client/backoff.hpp"
#include "runtime/client/butlers_client.hpp"
#include "runtime/client/spool.hpp"
#include "test/support/poll.hpp"
#include "test/support/temp_dir.hpp"

namespace butlers::client {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

/// The node, in memory: answers by a script (default 202), records what it
/// was sent in order, and can hold every exchange until released or
/// cancelled.
class fake_transport : public transport {
 public:
  using script_fn = std::function<response(const request&, int call)>;

  response perform(const request& req,
                   const std::atomic<bool>& cancel) override {
    int call = 0;
    {
      std::unique_lock<std::mutex> lk{mtx_};
      call = ++calls_[req.body];
      ++in_flight_;
      // Polls the cancel flag as libcurl's progress callback does.
      while (hold_ && !cancel)
        cv_.wait_for(lk, 1ms);
      --in_flight_;
      if (cancel) {
        response r;
        r.transport_error = true;
        r.error = "cancelled";
        return r;
      }
    }
    auto r = script_ ? script_(req, call) : ok();
    std::lock_guard<std::mutex> guard{mtx_};
    if (r.status / 100 == 2)
      delivered_.push_back(req.body);
    return r;
  }

  static response ok() {
    response r;
    r.status = 202;
    r.body = R"({"status":"accepted"})";
    return r;
  }

  static response status(int s, std::optional<milliseconds> retry_after = {}) {
    response r;
    r.status = s;
    r.retry_after = retry_after;
    r.body = R"({"error":{"code":")" + std::to_string(s) + R"("}})";
    return r;
  }

  void script(script_fn f) {
    script_ = std::move(f);
  }

  /// Holds every exchange until `release`.
  void hold() {
    std::lock_guard<std::mutex> guard{mtx_};
    hold_ = true;
  }

  void release() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      hold_ = false;
    }
    cv_.notify_all();
  }

  std::vector<std::string> delivered() {
    std::lock_guard<std::mutex> guard{mtx_};
    return delivered_;
  }

  int in_flight() {
    std::lock_guard<std::mutex> guard{mtx_};
    return in_flight_;
  }

  int calls(const std::string& body) {
    std::lock_guard<std::mutex> guard{mtx_};
    return calls_[body];
  }

 private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool hold_ = false;
  int in_flight_ = 0;
  std::map<std::string, int> calls_;
  std::vector<std::string> delivered_;
  script_fn script_;
};

operation op(const std::string& key, int i) {
  operation o;
  o.key = key;
  o.path = "/v1/ingest";
  o.body = key + ":" + std::to_string(i);
  o.identity = o.body;
  return o;
}

/// Options whose backoff waits are recorded instead of slept.
options quick(std::vector<milliseconds>* waits = nullptr) {
  options o;
  o.seed = 42;
  auto mtx = std::make_shared<std::mutex>();
  o.sleep_for = [waits, mtx](milliseconds d) {
    if (waits != nullptr) {
      std::lock_guard<std::mutex> guard{*mtx};
      waits->push_back(d);
    }
  };
  return o;
}

steady_clock::time_point in(milliseconds d) {
  return steady_clock::now() + d;
}

/// Two keys that land in different shards of `c`.
std::pair<std::string, std::string> keys_in_two_shards(const client& c) {
  std::string a = "key-0";
  for (int i = 1; i < 100; ++i) {
    auto b = "key-" + std::to_string(i);
    if (c.shard_of(b) != c.shard_of(a))
      return {a, b};
  }
  return {a, a};
}

TEST(Client, KeepsEachKeysOperationsInSubmissionOrder) {
  auto t = std::make_shared<fake_transport>();
  // Every third exchange is refused once with 503: retries must not let a
  // later operation of the key overtake.
  t->script([](const request& req, int call) {
    if (call == 1 && std::hash<std::string>{}(req.body) % 3 == 0)
      return fake_transport::status(503, 0ms);
    return fake_transport::ok();
  });
  client c{t, quick()};
  for (int i = 0; i < 300; ++i)
    for (int k = 0; k < 6; ++k)
      ASSERT_TRUE(c.submit(op("k" + std::to_string(k), i)));
  auto report = c.close(in(10s));
  EXPECT_TRUE(report.drained);
  std::map<std::string, int> next;
  for (auto& body : t->delivered()) {
    auto key = body.substr(0, body.find(':'));
    auto i = std::stoi(body.substr(body.find(':') + 1));
    EXPECT_EQ(i, next[key]) << body;
    next[key] = i + 1;
  }
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(next["k" + std::to_string(k)], 300);
}

TEST(Client, RunsKeysOfOtherShardsWhileOneKeyWaits) {
  auto t = std::make_shared<fake_transport>();
  auto release_a = std::make_shared<std::atomic<bool>>(false);
  client c{t, quick()};
  auto [a, b] = keys_in_two_shards(c);
  ASSERT_NE(c.shard_of(a), c.shard_of(b));
  // Key a's first exchange hangs until released.
  t->script([a = a, release_a](const request& req, int) {
    while (req.body == a + ":0" && !*release_a)
      std::this_thread::sleep_for(1ms);
    return fake_transport::ok();
  });
  ASSERT_TRUE(c.submit(op(a, 0)));
  ASSERT_TRUE(c.submit(op(b, 0)));
  ASSERT_TRUE(c.submit(op(b, 1)));
  auto got = c.await_consistency(b, in(5s));
  EXPECT_TRUE(got.reached);
  EXPECT_TRUE(got.failed.empty());
  EXPECT_FALSE(c.await_consistency(a, in(1ms)).reached);
  auto d = t->delivered();
  EXPECT_EQ(std::count(d.begin(), d.end(), a + ":0"), 0);
  *release_a = true;
  auto after = c.await_consistency(a, in(5s));
  EXPECT_TRUE(after.reached);
  EXPECT_TRUE(after.failed.empty());
  d = t->delivered();
  EXPECT_EQ(std::count(d.begin(), d.end(), a + ":0"), 1);
}

TEST(Client, RetriesOnly429And503And504AndTransportErrors) {
  auto t = std::make_shared<fake_transport>();
  t->script([](const request& req, int call) {
    auto code = std::stoi(req.body.substr(req.body.find(':') + 1));
    if (call > 1)
      return fake_transport::ok();
    if (code == 0) {
      response r;
      r.transport_error = true;
      r.error = "connect: refused";
      return r;
    }
    return fake_transport::status(code);
  });
  std::mutex mtx;
  std::vector<op_failure> failures;
  auto o = quick();
  o.on_failure = [&](const op_failure& f) {
    std::lock_guard<std::mutex> guard{mtx};
    failures.push_back(f);
  };
  client c{t, o};
  for (int code : {429, 503, 504, 0, 400, 404, 409, 500})
    ASSERT_TRUE(c.submit(op("k", code)));
  auto got = c.await_consistency("k", in(5s));
  ASSERT_TRUE(got.reached);
  for (int code : {429, 503, 504, 0})
    EXPECT_EQ(t->calls("k:" + std::to_string(code)), 2) << code;
  std::set<int> failed;
  for (auto& f : got.failed) {
    EXPECT_EQ(f.reason, failure_reason::rejected);
    EXPECT_EQ(f.attempts, 1);
    failed.insert(f.status);
  }
  EXPECT_EQ(failed, (std::set<int>{400, 404, 409, 500}));
  std::lock_guard<std::mutex> guard{mtx};
  EXPECT_EQ(failures.size(), 4u) << "the callback saw each failure once";
}

TEST(Client, GivesUpAfterMaxAttemptsAndSaysSo) {
  auto t = std::make_shared<fake_transport>();
  t->script([](const request&, int) {
    return fake_transport::status(429, 0ms);
  });
  auto o = quick();
  o.retry.max_attempts = 5;
  client c{t, o};
  auto ack = c.submit(op("k", 1));
  ASSERT_TRUE(ack);
  auto got = c.await_consistency("k", in(5s));
  ASSERT_TRUE(got.reached);
  ASSERT_EQ(got.failed.size(), 1u);
  EXPECT_EQ(got.failed[0].reason, failure_reason::exhausted);
  EXPECT_EQ(got.failed[0].attempts, 5);
  EXPECT_EQ(got.failed[0].sequence, ack.ack->sequence);
  EXPECT_EQ(t->calls("k:1"), 5);
}

TEST(Client, BackoffIsFullJitterBelowTheCapAndHonoursRetryAfter) {
  retry_policy p;
  p.base = 100ms;
  p.cap = 20000ms;
  std::mt19937_64 rng{7};
  for (int retry = 1; retry <= 12; ++retry) {
    auto ceiling = std::min<milliseconds::rep>(20000, 100LL << (retry - 1));
    milliseconds::rep highest = 0;
    for (int i = 0; i < 2000; ++i) {
      auto d = backoff_delay(p, retry, std::nullopt, rng).count();
      ASSERT_GE(d, 0);
      ASSERT_LE(d, ceiling) << "retry " << retry;
      highest = std::max(highest, d);
    }
    EXPECT_GT(highest, ceiling / 2) << "jitter spans the range";
    for (int i = 0; i < 200; ++i) {
      ASSERT_GE(backoff_delay(p, retry, 3000ms, rng).count(), 3000);
      ASSERT_LE(backoff_delay(p, retry, 3000ms, rng).count(),
                std::max<milliseconds::rep>(ceiling, 3000));
    }
  }
  // A Retry-After beyond the cap waits the cap.
  EXPECT_EQ(backoff_delay(p, 1, 3600s, rng), 20000ms);
}

TEST(Client, WaitsTheNodesRetryAfterBetweenAttempts) {
  auto t = std::make_shared<fake_transport>();
  t->script([](const request&, int call) {
    return call < 4 ? fake_transport::status(503, 1000ms)
                    : fake_transport::ok();
  });
  std::vector<milliseconds> waits;
  client c{t, quick(&waits)};
  ASSERT_TRUE(c.submit(op("k", 1)));
  ASSERT_TRUE(c.await_consistency("k", in(5s)).reached);
  c.close(in(1s));
  ASSERT_EQ(waits.size(), 3u);
  for (auto w : waits) {
    EXPECT_GE(w, 1000ms);
    EXPECT_LE(w, 20000ms);
  }
}

TEST(Client, RefusesWithQueueFullWhenTheShardHoldsQueueSize) {
  auto t = std::make_shared<fake_transport>();
  t->hold();
  auto o = quick();
  o.shards = 1;
  o.queue_size = 3;
  std::atomic<int> full{0};
  std::atomic<size_t> deepest{0};
  o.metrics.queue_full = [&](size_t) {
    ++full;
  };
  o.metrics.queue_depth = [&](size_t, size_t d) {
    deepest = std::max(deepest.load(), d);
  };
  client c{t, o};
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(c.submit(op("k", i)));
  auto r = c.submit(op("other", 0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, submit_errc::queue_full);
  EXPECT_EQ(full.load(), 1);
  EXPECT_EQ(deepest.load(), 3u);
  EXPECT_EQ(c.depth(0), 3u);
  t->release();
  EXPECT_TRUE(c.await_consistency("k", in(5s)).reached);
  EXPECT_TRUE(c.submit(op("other", 0)));
}

TEST(Client, CloseDrainsThenRefusesWithClosed) {
  auto t = std::make_shared<fake_transport>();
  client c{t, quick()};
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(c.submit(op("k" + std::to_string(i % 5), i)));
  auto report = c.close(in(5s));
  EXPECT_TRUE(report.drained);
  EXPECT_TRUE(report.undelivered.empty());
  EXPECT_EQ(t->delivered().size(), 50u);
  auto r = c.submit(op("k", 99));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error, submit_errc::closed);
}

TEST(Client, CloseAtItsDeadlineReportsEveryUndeliveredOperation) {
  auto t = std::make_shared<fake_transport>();
  t->hold();
  std::mutex mtx;
  std::vector<op_failure> seen;
  auto o = quick();
  o.on_failure = [&](const op_failure& f) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.push_back(f);
  };
  client c{t, o};
  std::set<uint64_t> acked;
  for (int i = 0; i < 20; ++i)
    acked.insert(c.submit(op("k" + std::to_string(i % 3), i)).ack->sequence);
  ASSERT_TRUE(butlers::test::eventually(
    [&] {
      return t->in_flight() > 0;
    },
    5s));
  auto report = c.close(in(100ms));
  EXPECT_FALSE(report.drained);
  std::set<uint64_t> reported;
  for (auto& f : report.undelivered) {
    EXPECT_EQ(f.reason, failure_reason::undelivered);
    EXPECT_FALSE(f.spooled);
    reported.insert(f.sequence);
  }
  EXPECT_EQ(reported, acked) << "nothing acknowledged is dropped silently";
  std::lock_guard<std::mutex> guard{mtx};
  EXPECT_EQ(seen.size(), 20u);
}

TEST(Client, AwaitConsistencyReportsTheFailedOperationsOnce) {
  auto t = std::make_shared<fake_transport>();
  t->script([](const request& req, int) {
    return req.body == "k:2" ? fake_transport::status(400)
                             : fake_transport::ok();
  });
  client c{t, quick()};
  uint64_t bad = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = c.submit(op("k", i));
    if (i == 2)
      bad = r.ack->sequence;
  }
  auto got = c.await_consistency("k", in(5s));
  ASSERT_TRUE(got.reached);
  ASSERT_EQ(got.failed.size(), 1u);
  EXPECT_EQ(got.failed[0].sequence, bad);
  EXPECT_EQ(got.failed[0].status, 400);
  EXPECT_EQ(t->delivered().size(), 4u);
  auto again = c.await_consistency("k", in(5s));
  EXPECT_TRUE(again.reached);
  EXPECT_TRUE(again.failed.empty());
}

TEST(Client, AwaitConsistencyReturnsAtItsDeadlineWhenOperationsAreOpen) {
  auto t = std::make_shared<fake_transport>();
  t->hold();
  client c{t, quick()};
  auto ack = c.submit(op("k", 0));
  auto got = c.await_consistency("k", in(50ms));
  EXPECT_FALSE(got.reached);
  EXPECT_EQ(got.through, ack.ack->sequence);
  t->release();
  EXPECT_TRUE(c.await_consistency("k", in(5s)).reached);
}

TEST(Client, SpoolReplaysWhatWasAcknowledgedButNotDelivered) {
  butlers::test::temp_dir dir;
  auto path = dir.str() + "/spool";
  auto held = std::make_shared<fake_transport>();
  held->hold();
  auto o = quick();
  o.spool_path = path;
  o.shards = 2;
  uint64_t last = 0;
  {
    client c{held, o};
    for (int i = 0; i < 30; ++i)
      last = c.submit(op("k" + std::to_string(i % 3), i)).ack->sequence;
    auto report = c.close(in(50ms));
    ASSERT_EQ(report.undelivered.size(), 30u);
    for (auto& f : report.undelivered)
      EXPECT_TRUE(f.spooled);
  }
  auto t = std::make_shared<fake_transport>();
  {
    client c{t, o};
    EXPECT_EQ(c.recovered(), 30u);
    auto next = c.submit(op("k0", 30));
    ASSERT_TRUE(next);
    EXPECT_GT(next.ack->sequence, last);
    EXPECT_TRUE(c.close(in(5s)).drained);
  }
  std::map<std::string, int> expect;
  for (auto& body : t->delivered()) {
    auto key = body.substr(0, body.find(':'));
    auto i = std::stoi(body.substr(body.find(':') + 1));
    EXPECT_EQ(i % 3, std::stoi(key.substr(1)));
    EXPECT_GE(i, expect[key]) << "in order per key: " << body;
    expect[key] = i + 1;
  }
  EXPECT_EQ(t->delivered().size(), 31u);
  // Everything done: the spool was compacted, and a third start replays
  // nothing but keeps counting.
  client c{t, o};
  EXPECT_EQ(c.recovered(), 0u);
  EXPECT_GT(c.submit(op("k1", 99)).ack->sequence, last + 1);
}

TEST(Client, SpoolCutsATornTailAndRefusesCorruptionBeforeIt) {
  butlers::test::temp_dir dir;
  auto path = dir.str() + "/spool";
  {
    spool::contents c;
    auto sp = spool::open(path, c);
    for (int i = 1; i <= 3; ++i)
      ASSERT_TRUE(sp->append_op(i, op("k", i), nullptr));
    sp->append_done(1, false);
  }
  auto good_size = std::filesystem::file_size(path);
  {
    std::ofstream out{path, std::ios::app};
    out << "0badc0de {\"t\":\"op\",\"seq\":4,\"ki"; // torn mid-record
  }
  {
    spool::contents c;
    auto sp = spool::open(path, c);
    EXPECT_GT(c.torn_bytes, 0u);
    ASSERT_EQ(c.pending.size(), 2u);
    EXPECT_EQ(c.pending[0].seq, 2u);
    EXPECT_EQ(c.pending[0].op.body, "k:2");
    EXPECT_EQ(c.pending[1].seq, 3u);
    EXPECT_EQ(c.next_seq, 4u);
    EXPECT_EQ(std::filesystem::file_size(path), good_size);
  }
  {
    // A whole line with a bad checksum at the end is torn too.
    std::ofstream out{path, std::ios::app};
    out << "00000000 {\"t\":\"done\",\"seq\":2,\"failed\":false}\n";
  }
  {
    spool::contents c;
    spool::open(path, c);
    EXPECT_EQ(c.pending.size(), 2u);
  }
  {
    // Damage before the last record is corruption, not a torn tail.
    std::fstream f{path, std::ios::in | std::ios::out};
    f.seekp(12);
    f.put('#');
  }
  spool::contents c;
  EXPECT_THROW(spool::open(path, c), std::runtime_error);
}

TEST(Client, IngestOperationsCarryAStableDedupeIdentity) {
  std::string base = R"({"schema_version":"ingest.v1",)"
                     R"("source":{"channel":"api","provider":"internal",)"
                     R"("endpoint_identity":"e"},)"
                     R"("event":{"external_event_id":"ev-1",)"
                     R"("external_thread_id":"t-9",)"
                     R"("observed_at":"2026-01-01T00:00:00Z"},)"
                     R"("sender":{"identity":"s"},)"
                     R"("payload":{"raw":{},"normalized_text":"x"}})";
  std::string err;
  auto o = ingest_operation(base, "", &err);
  ASSERT_TRUE(o) << err;
  EXPECT_EQ(o->key, "t-9");
  EXPECT_EQ(o->path, "/v1/ingest");
  EXPECT_EQ(o->identity, "evt:ev-1");
  EXPECT_NE(o->body.find(R"("idempotency_key":"evt:ev-1")"), std::string::npos);
  auto again = ingest_operation(base, "", &err);
  EXPECT_EQ(again->body, o->body) << "the same envelope, the same identity";

  auto with_key = base;
  with_key.insert(with_key.size() - 1,
                  R"(,"control":{"idempotency_key":"mine"})");
  auto kept = ingest_operation(with_key, "custom", &err);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->identity, "mine");
  EXPECT_EQ(kept->key, "custom");
  EXPECT_EQ(kept->body, with_key);

  EXPECT_FALSE(ingest_operation("[1,2]", "", &err));
  EXPECT_FALSE(err.empty());

  auto turn_op = turn_operation(
    turn{"thread/1", "hello", "m-1", "queue", "", ""});
  EXPECT_EQ(turn_op.path, "/v1/threads/thread%2F1/turns");
  EXPECT_EQ(turn_op.key, "thread/1");
  EXPECT_EQ(turn_op.identity, "m-1");
  EXPECT_EQ(turn_op.body,
            R"({"message_id":"m-1","text":"hello","mode":"queue"})");
}

} // namespace
} // namespace butlers::client
