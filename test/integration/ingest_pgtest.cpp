// Durable ingest against the real node, the real PostgreSQL and real HTTP:
// dedupe, every error status, admission, batching, the hot and cold paths,
// partitions, the database going away, and a SIGKILL mid-ingest.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

/// An ingest.v1 body; `key` becomes the idempotency key (dedupe identity).
std::string envelope(const std::string& key, const std::string& text = "hi") {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{"k":")"
         + key + R"("},"normalized_text":")" + text
         + R"("},"control":{"idempotency_key":")" + key + R"("}})";
}

/// Reads one sample (`name` or `name{labels}`) from Prometheus text.
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return -1;
  return std::stod(text.substr(pos + series.size() + 2));
}

std::string request_id_of(const http_response& r) {
  auto pos = r.body.find(R"("request_id":")");
  if (pos == std::string::npos)
    return {};
  return r.body.substr(pos + 14, 36);
}

/// Starts `n` threads that each run `f(i)` at the same moment.
template<class F>
void run_concurrently(int n, F f) {
  std::mutex mtx;
  std::condition_variable cv;
  bool go = false;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> guard{mtx};
        cv.wait(guard, [&] {
          return go;
        });
      }
      f(i);
    });
  {
    std::lock_guard<std::mutex> guard{mtx};
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads)
    t.join();
}

/// Holds the writer's next transaction on a table lock, so that requests
/// stay in flight for exactly as long as a test needs them to.
class table_lock {
 public:
  explicit table_lock(const std::string& url) : conn_(url), tx_(conn_) {
    tx_.exec("LOCK TABLE inbox_dedupe IN EXCLUSIVE MODE");
  }
  void release() {
    tx_.commit();
  }

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

class Ingest : public node_fixture {
 protected:
  /// Starts a node on this test's database; `extra` adds TOML tables,
  /// `http_extra` adds keys to the [http] table, `database` is the
  /// [database] table's keys. These tests hold table locks as gates
  /// (`table_lock`) for as long as they need, so by default the writer
  /// waits for a lock without a deadline.
  void start(const std::string& extra = "",
             std::map<std::string, std::string> env = {},
             const std::string& http_extra = "",
             const std::string& database = "lock_timeout_ms = 0\n") {
    use_database("ingest");
    auto butlers = butlers_toml();
    ASSERT_TRUE(start_node(node_head("ingest-test", 10, http_extra)
                             + "[database]\n" + database + extra + butlers,
                           std::move(env)));
  }

  /// As the fixture's, and the node must exit cleanly (code 0).
  void TearDown() override {
    if (node_) {
      auto exit = stop_node();
      EXPECT_TRUE(exit) << "node did not exit after SIGTERM";
      if (exit) {
        EXPECT_EQ(exit->exit_code, 0) << exit->err;
      }
      node_.reset();
    }
    node_fixture::TearDown();
  }

  http_response ingest(const std::string& body) {
    return http_->post("/v1/ingest", body);
  }

  std::string metrics() {
    return http_->get("/metrics").body;
  }

  /// Sends `n` ingests (keys `<prefix>0..n-1`) at once while a table lock
  /// holds the writer, releases it once all `n` wait for their commit, and
  /// returns the replies: everything arrives in the writer's queue together.
  std::vector<http_response> ingest_all_at_once(int n,
                                                const std::string& prefix) {
    table_lock lock{url_};
    std::vector<http_response> replies(n);
    std::thread release{[&] {
      EXPECT_TRUE(eventually(
        [&] {
          return metric(http_client{"127.0.0.1", port_}.get("/metrics").body,
                        "butlers_switchboard_inflight_requests")
                 == n;
        },
        20s));
      lock.release();
    }};
    run_concurrently(n, [&](int i) {
      replies[i] = http_client{"127.0.0.1", port_}
                     .post("/v1/ingest", envelope(prefix + std::to_string(i)));
    });
    release.join();
    return replies;
  }

  /// "state: n, ..." over message_inbox, for failure messages.
  std::string states() {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}
      .exec1("SELECT coalesce(string_agg(s, ', '), '') FROM (SELECT "
             "lifecycle_state || ': ' || count(*) AS s FROM message_inbox "
             "GROUP BY lifecycle_state) x")[0]
      .as<std::string>();
  }

  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<int64_t>();
  }

  /// Waits until `n` inbox rows are `parsed`; false after `timeout`.
  bool all_parsed(int64_t n, std::chrono::seconds timeout) {
    return eventually(
      [&] {
        return count("SELECT count(*) FROM message_inbox WHERE "
                     "lifecycle_state = 'parsed'")
               == n;
      },
      timeout);
  }

  /// Starts a node whose hot queue holds 5 with one worker, and whose cold
  /// path sweeps 5 rows every `scanner_s` seconds after a grace of as many;
  /// sends `overflow_callers` ingests at once, which overflow that queue;
  /// returns how many were not answered 202.
  static constexpr int overflow_callers = 30;
  int overflow_the_hot_queue(int scanner_s, const std::string& prefix) {
    auto s = std::to_string(scanner_s);
    // Two requests in progress at most: the worker is free again as soon
    // as a plan goes out with its claim, so only this bound makes the
    // queue fill up, whatever the machine's speed.
    start("[switchboard]\nqueue_capacity = 5\nworkers = 1\n"
          "max_in_progress = 2\nscanner_interval_s = "
          + s + "\nscanner_grace_s = " + s + "\nscanner_batch_size = 5\n");
    int refused = 0;
    for (auto& r : ingest_all_at_once(overflow_callers, prefix))
      refused += r.status == 202 ? 0 : 1;
    return refused;
  }

  /// Transitions to `parsed`: one per message that completed once.
  int64_t parsed_transitions() {
    return count("SELECT count(*) FROM inbox_transitions WHERE to_state = "
                 "'parsed'");
  }

  /// Every message ends at `general` (nothing else is registered): a fast
  /// scripted general, and replies to an outbox in a temporary directory,
  /// so these tests measure the ingest path, not sessions.
  std::string butlers_toml() {
    use_files("ingest_outbox");
    return "[[butler]]\nname = \"general\"\nlease_s = 2\n"
           "max_concurrent_sessions = 16\nmax_pending = 20000\n"
           "[butler.runtime]\nturn_ms = 0\n"
           "[messenger]\nmax_concurrent_sessions = 16\n"
           "max_pending = 20000\n"
           "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
           + dir_ + "/outbox.jsonl\"\n";
  }
};

TEST_F(Ingest, AcceptedMeansStoredThenParsed) {
  start();
  auto r = ingest(envelope("a-1", "remind me to call mom"));
  ASSERT_EQ(r.status, 202) << r.body << r.error;
  EXPECT_NE(r.body.find(R"("status":"accepted","duplicate":false)"),
            std::string::npos)
    << r.body;
  auto id = request_id_of(r);
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '7') << "a UUIDv7";
  // Durable before the 202: the row is there now.
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox WHERE request_id = '" + id
                  + "' AND normalized_text = 'remind me to call mom'"),
            1);
  // The hot path claims and completes it.
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox WHERE lifecycle_state"
                   " = 'parsed' AND progress_at IS NOT NULL AND completed_at"
                   " IS NOT NULL")
             == 1;
    },
    10s));
  EXPECT_EQ(count("SELECT count(*) FROM inbox_transitions WHERE to_state IN "
                  "('progress', 'parsed')"),
            2);
  auto m = metrics();
  EXPECT_EQ(metric(m, "butlers_switchboard_message_received"), 1);
  EXPECT_EQ(metric(m, "butlers_buffer_enqueue_total{path=\"hot\"}"), 1);
  EXPECT_EQ(metric(m, "butlers_switchboard_ingress_accept_latency_ms_count"),
            1);
}

TEST_F(Ingest, TheRawPayloadIsTheBodyByteForByte) {
  start();
  // Whitespace, key order and escapes as a client might send them: stored
  // as sent (text, not re-encoded), and still readable as JSON.
  std::string body = envelope("raw-1", R"(caf\u00e9 \"at\" 9)");
  body.insert(1, "\n  ");
  body.insert(body.size() - 1, " \t");
  auto r = ingest(body);
  ASSERT_EQ(r.status, 202) << r.body << r.error;
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec_params1(
    "SELECT raw_payload, raw_payload::json #>> '{payload,normalized_text}',"
    " normalized_text FROM message_inbox WHERE request_id = $1",
    request_id_of(r));
  EXPECT_EQ(row[0].as<std::string>(), body);
  EXPECT_EQ(row[1].as<std::string>(), "caf\xc3\xa9 \"at\" 9");
  EXPECT_EQ(row[2].as<std::string>(), row[1].as<std::string>());
  // text since migration 0005: the node validated it, PostgreSQL need not.
  EXPECT_EQ(tx.exec1("SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                     " WHERE attrelid = 'message_inbox'::regclass AND attname"
                     " = 'raw_payload'")[0]
              .as<std::string>(),
            "text");
}

TEST_F(Ingest, SequentialDuplicateGetsTheOriginalRequestId) {
  start();
  auto first = ingest(envelope("dup-1", "one"));
  auto second = ingest(envelope("dup-1", "one, resent"));
  ASSERT_EQ(first.status, 202);
  ASSERT_EQ(second.status, 202);
  EXPECT_EQ(request_id_of(first), request_id_of(second));
  EXPECT_NE(second.body.find(R"("status":"deduped","duplicate":true)"),
            std::string::npos)
    << second.body;
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  EXPECT_EQ(metric(metrics(), "butlers_switchboard_message_deduplicated"), 1);
  EXPECT_NE(node_->log().find("deduped to request " + request_id_of(first)),
            std::string::npos)
    << "dedupe decisions are logged with key and action";
}

TEST_F(Ingest, FiftyConcurrentIdenticalSubmissionsMakeOneRow) {
  start();
  std::vector<http_response> replies(50);
  run_concurrently(50, [&](int i) {
    http_client c{"127.0.0.1", port_};
    replies[i] = c.post("/v1/ingest", envelope("same-key", "same text"));
  });
  std::set<std::string> ids;
  int fresh = 0;
  for (auto& r : replies) {
    ASSERT_EQ(r.status, 202) << r.body << r.error;
    ids.insert(request_id_of(r));
    if (r.body.find(R"("duplicate":false)") != std::string::npos)
      ++fresh;
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe"), 1);
}

TEST_F(Ingest, ErrorsNameWhatIsWrong) {
  start("", {}, "max_body_bytes = 4096\n");
  // Not JSON.
  auto bad_json = ingest("{\"schema_version\": ");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_NE(bad_json.body.find("not valid JSON"), std::string::npos);
  // Schema violations: every one, with pointer and keyword.
  auto bad = envelope("e-1");
  bad.replace(bad.find(R"("channel":"api")"), 15, R"("channel":"fax")");
  bad.replace(bad.find(R"("identity":"user-1")"), 19, R"("identity":7)");
  auto invalid = ingest(bad);
  EXPECT_EQ(invalid.status, 400);
  EXPECT_NE(invalid.body.find(R"("class":"validation_error")"),
            std::string::npos);
  EXPECT_NE(invalid.body.find(
              R"({"pointer":"/source/channel","keyword":"enum")"),
            std::string::npos)
    << invalid.body;
  EXPECT_NE(invalid.body.find(R"({"pointer":"/sender/identity","keyword":)"),
            std::string::npos)
    << invalid.body;
  // U+0000 in a key: text columns cannot hold it (this was a 500).
  auto nul = ingest(envelope(R"(e\u0000)"));
  EXPECT_EQ(nul.status, 400);
  EXPECT_NE(nul.body.find(
              R"({"pointer":"/control/idempotency_key","keyword":"nul")"),
            std::string::npos)
    << nul.body;
  // Too large.
  auto big = envelope("e-2", std::string(5000, 'x'));
  auto too_big = ingest(big);
  EXPECT_EQ(too_big.status, 413);
  EXPECT_NE(too_big.body.find("http.max_body_bytes"), std::string::npos);
  // Not JSON media type.
  auto text = http_->post("/v1/ingest", envelope("e-3"), "text/plain");
  EXPECT_EQ(text.status, 415);
  // Wrong method.
  EXPECT_EQ(http_->get("/v1/ingest").status, 404);
  // Deep nesting is a 400, not a crash.
  auto deep = ingest(std::string(2000, '[') + std::string(2000, ']'));
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(deep.body.find("depth"), std::string::npos) << deep.body;
  EXPECT_EQ(http_->get("/healthz").status, 200);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 0);
}

TEST_F(Ingest, BearerTokenRequired) {
  start("", {{"BUTLERS_HTTP_TOKEN", "t0ken"}});
  auto r = ingest(envelope("auth-1"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["www-authenticate"], "Bearer realm=\"butlers\"");
  http_->token("t0ken");
  EXPECT_EQ(ingest(envelope("auth-1")).status, 202);
}

TEST_F(Ingest, AdmissionFullAnswers429WithRetryAfter) {
  start("[switchboard]\nmax_in_flight = 2\n");
  table_lock lock{url_};
  std::vector<http_response> held(2);
  std::thread t1{[&] {
    held[0] = http_client{"127.0.0.1", port_}.post("/v1/ingest",
                                                   envelope("adm-1"));
  }};
  std::thread t2{[&] {
    held[1] = http_client{"127.0.0.1", port_}.post("/v1/ingest",
                                                   envelope("adm-2"));
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(), "butlers_switchboard_inflight_requests") == 2;
    },
    10s));
  auto rejected = ingest(envelope("adm-3"));
  EXPECT_EQ(rejected.status, 429);
  EXPECT_EQ(rejected.headers["retry-after"], "1");
  EXPECT_NE(rejected.body.find(R"("class":"overload_rejected")"),
            std::string::npos)
    << rejected.body;
  lock.release();
  t1.join();
  t2.join();
  EXPECT_EQ(held[0].status, 202) << held[0].body;
  EXPECT_EQ(held[1].status, 202) << held[1].body;
  EXPECT_EQ(metric(metrics(), "butlers_switchboard_message_overload_rejected"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 2);
}

TEST_F(Ingest, ConcurrentCallersShareGroupCommits) {
  start("[switchboard]\nmax_in_flight = 1000\n");
  // The first transaction waits on the lock while all callers queue up.
  constexpr int callers = 60;
  auto replies = ingest_all_at_once(callers, "batch-");
  for (auto& r : replies)
    ASSERT_EQ(r.status, 202) << r.body << r.error;
  EXPECT_EQ(metric(metrics(), "butlers_inbox_writer_rows_total{op=\"append\"}"),
            callers);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), callers);
  // From the database's own bookkeeping: inbox_dedupe rows are never
  // updated, so their xmin is the transaction that inserted them. One
  // blocked transaction plus (typically) one batch for everyone else.
  auto transactions = count("SELECT count(DISTINCT xmin::text) FROM "
                            "inbox_dedupe");
  EXPECT_LT(transactions, callers / 4) << transactions << " transactions";
}

TEST_F(Ingest, ARestartWithABacklogClaimsNothingBeforeTheWriterIsReady) {
  // At start the cold path pages through what a crash left behind. Swept
  // before the writer had connected, every claim of that first page was
  // refused as unavailable (and the page waited for the next sweep).
  // At most two in progress: most of the messages are still `accepted`
  // when the node is killed, however fast it is.
  auto cfg = std::string{"[switchboard]\nqueue_capacity = 5\nworkers = 1\n"
                         "max_in_progress = 2\nlease_s = 2\n"
                         "scanner_grace_s = 0\nscanner_interval_s = 1\n"};
  start(cfg);
  constexpr int callers = 60;
  for (auto& r : ingest_all_at_once(callers, "backlog-"))
    ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_TRUE(kill_node());
  node_.reset();
  ASSERT_GT(count("SELECT count(*) FROM message_inbox WHERE "
                  "lifecycle_state = 'accepted'"),
            0)
    << "a backlog for the restarted node";
  start(cfg);
  ASSERT_TRUE(all_parsed(callers, 60s)) << states() << "\n" << node_->log();
  auto m = metrics();
  EXPECT_GT(metric(m, "butlers_buffer_scanner_recovered_total"), 0);
  EXPECT_EQ(metric(m, "butlers_inbox_writer_unavailable_total"), 0)
    << "writes refused as unavailable after a clean start";
}

TEST_F(Ingest, FullQueueDefersToTheColdPath) {
  ASSERT_EQ(overflow_the_hot_queue(1, "cold-"), 0)
    << "stored means accepted, queue or not";
  EXPECT_GT(metric(metrics(), "butlers_buffer_backpressure_total"), 0);
  ASSERT_TRUE(all_parsed(overflow_callers, 30s)) << node_->log();
  auto m = metrics();
  EXPECT_GT(metric(m, "butlers_buffer_scanner_recovered_total"), 0);
  EXPECT_GT(metric(m, "butlers_buffer_enqueue_total{path=\"cold\"}"), 0);
  EXPECT_EQ(parsed_transitions(), overflow_callers)
    << "each message completed exactly once";
}

// What overflowed the hot queue is recovered as soon as the queue has
// drained, not at the cold path's next interval: with an interval and a
// grace period of an hour, only the switchboard's refill request can bring
// those messages back before the deadline below.
TEST_F(Ingest, AnOverflowIsRecoveredOnceTheQueueDrains) {
  ASSERT_EQ(overflow_the_hot_queue(3600, "refill-"), 0)
    << "stored means accepted, queue or not";
  auto overflowed = metric(metrics(), "butlers_buffer_backpressure_total");
  ASSERT_GT(overflowed, 0) << "the queue of 5 never overflowed";
  ASSERT_TRUE(all_parsed(overflow_callers, 30s)) << states() << "\n"
                                                 << node_->log();
  auto m = metrics();
  EXPECT_GT(metric(m, "butlers_buffer_scanner_refills_total"), 0);
  EXPECT_GE(metric(m, "butlers_buffer_enqueue_total{path=\"cold\"}"),
            overflowed)
    << "every overflowed message came back through the cold path";
  EXPECT_EQ(parsed_transitions(), overflow_callers)
    << "each message completed exactly once";
}

TEST_F(Ingest, NoCommitWithinTheDeadlineAnswers504) {
  start("", {}, "request_timeout_ms = 300\n");
  table_lock lock{url_};
  auto r = ingest(envelope("slow-1"));
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_NE(r.body.find(R"("class":"timeout")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("retry with the same key"), std::string::npos);
  lock.release();
  // The late commit went through; the retry finds it instead of a second
  // row.
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox") == 1;
    },
    10s));
  auto retry = ingest(envelope("slow-1"));
  EXPECT_EQ(retry.status, 202);
  EXPECT_NE(retry.body.find(R"("duplicate":true)"), std::string::npos)
    << retry.body;
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(Ingest, AHeldInboxLockTimesTheWriterOutAndItRecoversLosingNothing) {
  start("", {}, "", "lock_timeout_ms = 300\n");
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(ingest(envelope("before-" + std::to_string(i))).status, 202);
  ASSERT_TRUE(all_parsed(10, 30s)) << states();
  // An operator's transaction holds the inbox: every write to it waits.
  pqxx::connection holder{url_};
  pqxx::work held{holder};
  held.exec("LOCK TABLE message_inbox IN ACCESS EXCLUSIVE MODE");
  std::vector<http_response> refused(5);
  run_concurrently(5, [&](int i) {
    refused[i] = http_client{"127.0.0.1", port_}
                   .post("/v1/ingest", envelope("during-" + std::to_string(i)));
  });
  for (auto& r : refused) {
    EXPECT_EQ(r.status, 503) << r.body << r.error;
    EXPECT_FALSE(r.headers["retry-after"].empty());
    EXPECT_NE(r.body.find("lock_timeout (300 ms)"), std::string::npos)
      << r.body;
  }
  EXPECT_GE(metric(metrics(),
                   "butlers_db_deadline_exceeded_total{session=\"writer\"}"),
            1);
  EXPECT_NE(node_->log().find("hit the lock_timeout (300 ms)"),
            std::string::npos);
  held.commit();
  // The writer's connections stayed up; the refused requests were not
  // accepted, so their clients retry with the same keys and each is
  // stored and completed once, beside the ten from before.
  EXPECT_EQ(http_->get("/readyz").status, 200);
  for (int i = 0; i < 5; ++i) {
    auto r = ingest(envelope("during-" + std::to_string(i)));
    EXPECT_EQ(r.status, 202) << r.body;
    EXPECT_NE(r.body.find(R"("duplicate":false)"), std::string::npos);
  }
  ASSERT_TRUE(all_parsed(15, 30s)) << states();
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 15);
  EXPECT_EQ(parsed_transitions(), 15);
}

TEST_F(Ingest, DrainingAnswers503AndFinishesInFlightWork) {
  start();
  table_lock lock{url_};
  http_response held;
  std::thread t{[&] {
    held = http_client{"127.0.0.1", port_}.post("/v1/ingest",
                                                envelope("drain-1"));
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return metric(metrics(), "butlers_switchboard_inflight_requests") == 1;
    },
    10s));
  node_->signal(SIGTERM);
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/readyz").status == 503;
    },
    10s));
  auto refused = ingest(envelope("drain-2"));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers["retry-after"], "1");
  EXPECT_NE(refused.body.find(R"("code":"draining")"), std::string::npos);
  lock.release();
  t.join();
  EXPECT_EQ(held.status, 202) << "in-flight work finishes during the drain";
  auto exit = node_->wait_exit(15s);
  ASSERT_TRUE(exit);
  EXPECT_EQ(exit->exit_code, 0) << "signal " << exit->signal << "\n"
                                << exit->err;
  node_.reset();
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), 1);
}

TEST_F(Ingest, PartitionsAreCreatedAheadAndDroppedAfterRetention) {
  url_ = fresh_database("partitions");
  auto migrate_cfg = make_temp_dir("butlers-part") + "/node.toml";
  write_file(migrate_cfg, "[node]\nname = \"p\"\n");
  auto m = run_process({BUTLERS_NODE_BINARY, "migrate", "--config",
                        migrate_cfg},
                       {{"BUTLERS_DATABASE_URL", url_}});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  {
    pqxx::connection conn{url_};
    pqxx::work tx{conn};
    tx.exec("CREATE TABLE message_inbox_202001 PARTITION OF message_inbox "
            "FOR VALUES FROM ('2020-01-01 00:00+00') TO "
            "('2020-02-01 00:00+00')");
    tx.exec("INSERT INTO inbox_dedupe VALUES ('old-key', gen_random_uuid(), "
            "'2020-01-15 00:00+00')");
    tx.commit();
  }
  start("", {}, "",
        "lock_timeout_ms = 0\nretention_months = 1\npartitions_ahead = 2\n");
  EXPECT_EQ(count("SELECT count(*) FROM pg_class WHERE relname = "
                  "'message_inbox_202001'"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM inbox_dedupe WHERE dedupe_key = "
                  "'old-key'"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM pg_inherits WHERE inhparent = "
                  "'message_inbox'::regclass"),
            3)
    << "current month and two ahead";
  EXPECT_EQ(count("SELECT count(*) FROM pg_class WHERE relname = "
                  "'message_inbox_' || to_char(now() AT TIME ZONE 'UTC' + "
                  "interval '2 months', 'YYYYMM')"),
            1);
  EXPECT_NE(node_->log().find("dropped partition message_inbox_202001"),
            std::string::npos)
    << node_->log();
  // Creation is idempotent.
  EXPECT_EQ(count("SELECT butlers_ensure_inbox_partitions(2)"), 0);
}

TEST_F(Ingest, DatabaseDownAnswers503ThenRecoversWithoutRestart) {
  // Short leases: rows claimed just before the outage, whose completion
  // failed, come back through the cold path within the test.
  start("[switchboard]\nscanner_interval_s = 1\nscanner_grace_s = 1\n"
        "lease_s = 2\n");
  ASSERT_EQ(ingest(envelope("before")).status, 202);
  // Load from a second thread for the whole outage: every 202 it gets must
  // be stored.
  std::atomic<bool> stop{false};
  std::vector<std::string> acked;
  std::map<int, int> statuses;
  std::thread load{[&] {
    http_client c{"127.0.0.1", port_, 5s};
    for (int i = 0; !stop; ++i) {
      auto r = c.post("/v1/ingest", envelope("load-" + std::to_string(i)));
      ++statuses[r.status];
      if (r.status == 202)
        acked.push_back(request_id_of(r));
    }
  }};
  // Stops and joins the load however the test ends.
  struct joined {
    std::atomic<bool>& stop;
    std::thread& t;
    ~joined() {
      stop = true;
      if (t.joinable())
        t.join();
    }
  } join_load{stop, load};
  pg_outage outage;
  ASSERT_TRUE(outage.stopped());
  // While it is down: a typed 503 with Retry-After, promptly.
  http_client quick{"127.0.0.1", port_, 1500ms};
  auto down = quick.post("/v1/ingest", envelope("during-1"));
  auto down2 = quick.post("/v1/ingest", envelope("during-2"));
  for (auto* r : {&down, &down2}) {
    EXPECT_EQ(r->status, 503) << r->body << r->error;
    EXPECT_EQ(r->headers["retry-after"], "1");
    EXPECT_NE(r->body.find(R"("class":"target_unavailable")"),
              std::string::npos)
      << r->body;
  }
  EXPECT_TRUE(eventually(
    [&] {
      return http_->get("/readyz").status == 503;
    },
    10s));
  ASSERT_TRUE(outage.restart());
  EXPECT_TRUE(eventually(
    [&] {
      return http_->get("/readyz").status == 200;
    },
    30s))
    << node_->log();
  EXPECT_TRUE(eventually(
    [&] {
      return ingest(envelope("after")).status == 202;
    },
    10s));
  stop = true;
  load.join();
  EXPECT_GT(statuses[503], 0) << "the load saw the outage";
  EXPECT_GT(statuses[202], 0);
  for (auto& [status, n] : statuses)
    EXPECT_TRUE(status == 202 || status == 503)
      << n << " answers with status " << status;
  // Every acknowledged request is stored, and reaches a terminal state.
  pqxx::connection conn{url_};
  for (auto& id : acked)
    EXPECT_EQ(pqxx::nontransaction{conn}
                .exec_params1("SELECT count(*) FROM message_inbox WHERE "
                              "request_id = $1",
                              id)[0]
                .as<int>(),
              1)
      << id;
  // Terminal: 'parsed', or 'errored' with its dead letter kept for replay
  // (a request in routing when the database went away can trip its
  // butler's circuit, which then fails it fast until it closes).
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox WHERE "
                   "lifecycle_state NOT IN ('parsed', 'errored')")
             == 0;
    },
    30s))
    << states() << "\n"
    << node_->log();
  // The dead letter is a write of its own beside the completion: wait for
  // it rather than read the instant the last request turned terminal.
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox i WHERE "
                   "lifecycle_state = 'errored' AND NOT EXISTS (SELECT 1 FROM "
                   "dead_letters d WHERE d.request_id = i.request_id)")
             == 0;
    },
    30s))
    << "every errored request keeps a dead letter\n"
    << states();
}

TEST_F(Ingest, SigkillDuringIngestLosesNothingAndProcessesOnce) {
  // Sixteen classification workers: each holds its slot through three
  // commits (claim, plan, the butler's accept), so the default three would
  // make this a test of the disk's fsync rate rather than of recovery.
  const std::string cfg = "[switchboard]\nlease_s = 2\nworkers = 16\n"
                          "scanner_interval_s = 1\nscanner_grace_s = 1\n"
                          "scanner_batch_size = 500\n";
  start(cfg);
  constexpr int total = 5000;
  constexpr int clients = 8;
  std::atomic<int> next{0};
  std::atomic<int> acks{0};
  std::atomic<uint16_t> port{port_};
  std::mutex mtx;
  std::map<std::string, std::string> acked; // key -> request id
  std::atomic<bool> give_up{false};
  std::vector<std::thread> threads;
  // Whatever happens below, the clients stop and are joined before the
  // test's locals go away (a failed ASSERT returns early).
  auto join_clients = [&] {
    for (auto& t : threads)
      if (t.joinable())
        t.join();
  };
  struct on_exit {
    std::function<void()> f;
    ~on_exit() {
      f();
    }
  } guard{[&] {
    give_up = true;
    join_clients();
  }};
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      for (int i; !give_up && (i = next++) < total;) {
        auto key = "crash-" + std::to_string(i);
        // Retry until acknowledged: across the kill and the restart.
        while (!give_up) {
          http_client client{"127.0.0.1", port.load(), 5s};
          auto r = client.post("/v1/ingest", envelope(key));
          if (r.status == 202) {
            std::lock_guard<std::mutex> guard{mtx};
            auto [it, fresh] = acked.emplace(key, request_id_of(r));
            if (!fresh) {
              EXPECT_EQ(it->second, request_id_of(r));
            }
            ++acks;
            break;
          }
          std::this_thread::sleep_for(10ms);
        }
      }
    });
  // Kill once a good part is acknowledged (under sanitizers the node is
  // much slower, hence the low bar and the long wait).
  ASSERT_TRUE(eventually(
    [&] {
      return acks >= 500;
    },
    120s));
  auto killed = kill_node();
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->signal, SIGKILL);
  auto acked_before_kill = acks.load();
  // Restart on the same port and database; the clients keep going.
  ASSERT_TRUE(launch_node(node_head("ingest-test-2", 10, "", port_) + cfg
                          + butlers_toml()));
  join_clients();
  EXPECT_LT(acked_before_kill, total) << "the kill happened mid-ingest";
  ASSERT_EQ(acked.size(), size_t{total});
  // Every acknowledged message reaches a terminal state exactly once.
  ASSERT_TRUE(all_parsed(total, 60s)) << count(
    "SELECT count(*) FROM message_inbox WHERE lifecycle_state <> "
    "'parsed'") << " not parsed\n" << node_->log();
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox"), total);
  EXPECT_EQ(count("SELECT count(DISTINCT request_id) FROM inbox_transitions "
                  "WHERE to_state = 'parsed'"),
            total);
  EXPECT_EQ(parsed_transitions(), total) << "no message completed twice";
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  std::set<std::string> stored;
  for (auto row : tx.exec("SELECT request_id::text FROM message_inbox"))
    stored.insert(row[0].as<std::string>());
  for (auto& [key, id] : acked)
    EXPECT_EQ(stored.count(id), 1u) << key << " acknowledged as " << id;
}

} // namespace
} // namespace butlers::test
