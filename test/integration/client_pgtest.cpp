// The client library and butlers-client against real node processes, the
// real PostgreSQL and real HTTP: per-key order through 429s, 503s and a
// node restart; await_consistency against what PostgreSQL holds; a spooled
// replay SIGKILLed mid-stream and restarted.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/client/butlers_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
namespace bc = butlers::client;

/// An ingest.v1 envelope of conversation `key`, number `i` in it; its
/// dedupe identity is the idempotency key `<key>-<i>` unless `with_idem` is
/// false (then the client derives one from the event id).
std::string envelope(const std::string& key, int i, bool with_idem = true) {
  auto id = key + "-" + std::to_string(i);
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"client-tests"},)"
         R"("event":{"external_event_id":")"
         + id + R"(","external_thread_id":")" + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{"i":)"
         + std::to_string(i) + R"(},"normalized_text":"note )" + id + R"("})"
         + (with_idem ? R"(,"control":{"idempotency_key":")" + id + R"("}})"
                      : std::string{"}"});
}

/// Per conversation, the numbers of its stored requests in the order the
/// node received them (received_at, then request_id: UUIDv7).
std::map<std::string, std::vector<int>> stored_order(const std::string& url) {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  std::map<std::string, std::vector<int>> out;
  auto rows = tx.exec(
    "SELECT source_thread_identity, dedupe_key FROM message_inbox "
    "WHERE source_endpoint_identity = 'client-tests' "
    "ORDER BY received_at, request_id");
  for (const auto& row : rows) {
    auto key = row[0].as<std::string>();
    auto dk = row[1].as<std::string>();
    auto dash = dk.rfind('-');
    out[key].push_back(std::stoi(dk.substr(dash + 1)));
  }
  return out;
}

int64_t count_rows(const std::string& url, const std::string& where = "true") {
  pqxx::connection conn{url};
  return pqxx::nontransaction{conn}
    .exec1("SELECT count(*) FROM message_inbox WHERE " + where)[0]
    .as<int64_t>();
}

/// Holds the writer's next transaction on a table lock, so that requests
/// wait for their commit exactly as long as a test needs.
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

/// A butlers-client child process whose stdout the test reads as it comes.
class cli_process {
 public:
  cli_process(const std::vector<std::string>& args, const std::string& err) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2");
    int errfd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(errfd, STDERR_FILENO);
      std::vector<char*> argv;
      static std::string bin = BUTLERS_CLIENT_BINARY;
      argv.push_back(bin.data());
      for (auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    ::close(errfd);
    out_fd_ = fds[0];
  }
  ~cli_process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_fd_);
  }

  /// Reads stdout until `lines` complete lines arrived or `timeout`.
  bool read_lines(size_t lines, std::chrono::milliseconds timeout) {
    auto deadline = steady_clock::now() + timeout;
    while (line_count() < lines) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - steady_clock::now());
      if (left.count() <= 0)
        return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char buf[65536];
      auto n = ::read(out_fd_, buf, sizeof buf);
      if (n <= 0)
        return line_count() >= lines;
      out_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  void kill9() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

  const std::string& out() const {
    return out_;
  }

 private:
  size_t line_count() const {
    return static_cast<size_t>(std::count(out_.begin(), out_.end(), '\n'));
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  std::string out_;
};

class ClientNode : public node_fixture {
 protected:
  std::string config(uint16_t port, int max_in_flight) {
    // `table_lock` holds the writer as long as a test needs: no lock
    // deadline.
    return node_head("client-test", 10, "", port)
           + "[database]\nlock_timeout_ms = 0\n[switchboard]\n"
           + "max_in_flight = " + std::to_string(max_in_flight) + "\n"
           + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 16\n"
             "max_pending = 20000\n[butler.runtime]\nturn_ms = 0\n"
             "[messenger]\nmax_concurrent_sessions = 16\nmax_pending = 20000\n"
             "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
           + dir_ + "/outbox.jsonl\"\n";
  }

  void start(int max_in_flight = 2048, uint16_t port = 0) {
    use_database("client");
    use_files("client");
    ASSERT_TRUE(start_node(config(port, max_in_flight)));
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_);
  }

  std::shared_ptr<bc::transport> transport() {
    bc::http_options h;
    h.url = url();
    h.timeout = 10s;
    h.connect_timeout = 1s;
    return bc::make_http_transport(h);
  }
};

TEST_F(ClientNode, KeepsOrderPerKeyThrough429And503AndANodeRestart) {
  // A small max_in_flight: eight shards against four admission slots.
  start(4);
  constexpr int keys = 8;
  constexpr int per_key = 1000;
  std::mutex mtx;
  std::map<int, int> retries_by_status; // 0: transport error
  std::vector<bc::op_failure> failures;
  std::atomic<int> delivered{0};
  bc::options o;
  o.shards = 8;
  o.queue_size = keys * per_key;
  o.retry.base = 20ms;
  o.retry.cap = 1000ms;
  o.retry.max_attempts = 1000;
  o.on_delivered = [&](const bc::enqueue_ack&, int, const std::string&) {
    ++delivered;
  };
  o.on_failure = [&](const bc::op_failure& f) {
    std::lock_guard<std::mutex> guard{mtx};
    failures.push_back(f);
  };
  o.log = [&](const bc::log_record& r) {
    if (r.event == "retry") {
      std::lock_guard<std::mutex> guard{mtx};
      ++retries_by_status[r.status];
    }
  };
  bc::client c{transport(), o};
  for (int i = 0; i < per_key; ++i)
    for (int k = 0; k < keys; ++k) {
      auto key = "conv-" + std::to_string(k);
      auto r = c.submit_ingest(envelope(key, i));
      ASSERT_TRUE(r) << bc::to_string(r.error) << ": " << r.message;
      EXPECT_EQ(r.ack->key, key);
      EXPECT_EQ(r.ack->status, "enqueued");
    }
  // Restart the node (same port) once a third is through.
  ASSERT_TRUE(eventually(
    [&] {
      return delivered.load() >= keys * per_key / 3;
    },
    120s));
  auto port = port_;
  ASSERT_TRUE(stop_node());
  ASSERT_TRUE(start_node(config(port, 4)));
  ASSERT_EQ(port_, port);
  auto report = c.close(steady_clock::now() + 240s);
  EXPECT_TRUE(report.drained);
  EXPECT_TRUE(report.undelivered.empty());
  {
    std::lock_guard<std::mutex> guard{mtx};
    EXPECT_TRUE(failures.empty()) << failures.front().message;
    EXPECT_GT(retries_by_status[429], 0) << "the node never answered 429";
    EXPECT_GT(retries_by_status[503] + retries_by_status[0], 0)
      << "the restart was never seen (503 while draining, or refused)";
  }
  EXPECT_EQ(delivered.load(), keys * per_key);
  auto stored = stored_order(url_);
  ASSERT_EQ(stored.size(), size_t{keys});
  for (auto& [key, order] : stored) {
    ASSERT_EQ(order.size(), size_t{per_key}) << key << ": none twice or lost";
    for (int i = 0; i < per_key; ++i)
      ASSERT_EQ(order[static_cast<size_t>(i)], i)
        << key << ": stored out of submission order";
  }
}

TEST_F(ClientNode, AwaitConsistencyReturnsAfterTheCommitsAndNamesTheFailures) {
  start();
  bc::client c{transport()};
  const std::string key = "conv-await";
  uint64_t bad_seq = 0;
  table_lock lock{url_};
  for (int i = 0; i < 20; ++i) {
    auto body = envelope(key, i);
    if (i == 7) // not an ingest.v1: the node answers 400
      body.replace(body.find("ingest.v1"), 9, "ingest.v9");
    auto r = c.submit_ingest(body);
    ASSERT_TRUE(r);
    if (i == 7)
      bad_seq = r.ack->sequence;
  }
  // Nothing can commit while the lock holds: await must not claim it.
  auto early = c.await_consistency(key, steady_clock::now() + 300ms);
  EXPECT_FALSE(early.reached);
  EXPECT_EQ(count_rows(url_), 0);
  lock.release();
  auto got = c.await_consistency(key, steady_clock::now() + 60s);
  // Checked at once, before anything else could commit them.
  auto committed = count_rows(url_, "source_thread_identity = '" + key + "'");
  ASSERT_TRUE(got.reached);
  EXPECT_EQ(committed, 19) << "every valid operation is committed";
  ASSERT_EQ(got.failed.size(), 1u);
  EXPECT_EQ(got.failed[0].sequence, bad_seq);
  EXPECT_EQ(got.failed[0].status, 400);
  EXPECT_EQ(got.failed[0].reason, bc::failure_reason::rejected);
  EXPECT_NE(got.failed[0].message.find("validation_error"), std::string::npos)
    << got.failed[0].message;
  EXPECT_EQ(got.through, bad_seq + 12);
  // The direct read sees a stored request.
  pqxx::connection conn{url_};
  auto id = pqxx::nontransaction{conn}
              .exec1("SELECT request_id::text FROM message_inbox LIMIT 1")[0]
              .as<std::string>();
  auto inspected = c.inspect_request(id);
  EXPECT_EQ(inspected.status, 200) << inspected.body;
  EXPECT_NE(inspected.body.find(id), std::string::npos);
  EXPECT_EQ(c.butlers().status, 200);
}

TEST_F(ClientNode, SpooledReplayKilledMidStreamDeliversEverythingAckedOnce) {
  start();
  constexpr int lines = 1200;
  constexpr int convs = 6;
  std::string file = dir_ + "/in.jsonl";
  {
    std::string all;
    for (int n = 0; n < lines; ++n)
      all += envelope("spool-" + std::to_string(n % convs), n / convs, false)
             + "\n";
    write_file(file, all);
  }
  std::vector<std::string> args{"--url",   url(),           "--wait-s",
                                "120",     "replay",        file,
                                "--spool", dir_ + "/spool", "--acks"};
  {
    table_lock lock{url_};
    cli_process cli{args, dir_ + "/cli1.err"};
    ASSERT_TRUE(cli.read_lines(400, 60s))
      << cli.out() << read_file(dir_ + "/cli1.err");
    cli.kill9();
    // Acknowledged (spooled), not delivered: the commits are held.
    EXPECT_EQ(count_rows(url_), 0);
    lock.release();
  }
  auto second = run_process({BUTLERS_CLIENT_BINARY, "--url", url(), "--wait-s",
                             "120", "replay", file, "--spool", dir_ + "/spool"},
                            {}, 180s);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  // Every line exactly once, in order per conversation.
  auto stored = [&] {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    std::map<std::string, std::vector<int>> out;
    for (const auto& row :
         tx.exec("SELECT source_thread_identity, normalized_text FROM "
                 "message_inbox ORDER BY received_at, request_id")) {
      auto text = row[1].as<std::string>();
      out[row[0].as<std::string>()].push_back(
        std::stoi(text.substr(text.rfind('-') + 1)));
    }
    return out;
  }();
  ASSERT_EQ(stored.size(), size_t{convs});
  for (auto& [conv, order] : stored) {
    ASSERT_EQ(order.size(), size_t{lines / convs}) << conv;
    for (size_t i = 0; i < order.size(); ++i)
      ASSERT_EQ(order[i], static_cast<int>(i)) << conv;
  }
  // Nothing left in the spool: await has nothing to send.
  auto flush = run_process({BUTLERS_CLIENT_BINARY, "--url", url(), "await",
                            "--spool", dir_ + "/spool"},
                           {}, 60s);
  EXPECT_EQ(flush.exit_code, 0) << flush.err;
  EXPECT_NE(flush.out.find(R"("recovered":0)"), std::string::npos) << flush.out;
}

TEST_F(ClientNode, CliSendAndInspectAnswerWithTheDocumentedExitCodes) {
  start();
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BUTLERS_CLIENT_BINARY, "--url", url()});
    return run_process(args, {}, 60s);
  };
  auto sent = cli({"send", "remind me to call mom", "--thread", "chat-1",
                   "--event-id", "cli-1"});
  ASSERT_EQ(sent.exit_code, 0) << sent.out << sent.err;
  auto pos = sent.out.find(R"("request_id":")");
  ASSERT_NE(pos, std::string::npos) << sent.out;
  auto id = sent.out.substr(pos + 14, 36);
  // The same event again: deduplicated through the identity the client
  // derived from the event id.
  auto again = cli({"send", "remind me to call mom", "--thread", "chat-1",
                    "--event-id", "cli-1"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find(R"("duplicate":true)"), std::string::npos)
    << again.out;
  EXPECT_NE(again.out.find(id), std::string::npos);
  EXPECT_EQ(count_rows(url_, "source_thread_identity = 'chat-1'"), 1);

  auto found = cli({"inspect", id});
  EXPECT_EQ(found.exit_code, 0) << found.err;
  EXPECT_NE(found.out.find("remind me to call mom"), std::string::npos);
  auto missing = cli({"inspect", "0190f5a0-0000-7000-8000-000000000000"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out;

  write_file(dir_ + "/bad.json", R"({"schema_version":"ingest.v1"})");
  auto bad = cli({"send", "--envelope", dir_ + "/bad.json"});
  EXPECT_EQ(bad.exit_code, 3) << bad.out << bad.err;
  EXPECT_NE(bad.out.find(R"("reason":"rejected","status":400)"),
            std::string::npos)
    << bad.out;
  EXPECT_EQ(cli({"send"}).exit_code, 2);
  EXPECT_EQ(cli({"frobnicate"}).exit_code, 2);

  // Nobody listens: undelivered when --wait-s runs out.
  auto gone = run_process({BUTLERS_CLIENT_BINARY, "--url", "http://127.0.0.1:1",
                           "--wait-s", "1", "--max-attempts", "1000", "send",
                           "hello"},
                          {}, 60s);
  EXPECT_EQ(gone.exit_code, 4) << gone.out << gone.err;
}

} // namespace
} // namespace butlers::test
