// The real butlers-node binary, driven the way an operator drives it:
// command line, HTTP over loopback, signals, a real PostgreSQL.

#include <signal.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/http_client.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A minimal node configuration on a free port.
std::string node_toml(const std::string& extra = "") {
  return "[node]\nname = \"lifecycle-test\"\ndrain_deadline_s = 5\n"
         "[http]\nport = 0\n"
         "[scheduler]\nthreads = 2\n"
         + extra;
}

/// Polls `fetch` until `pred` holds or `timeout` passes; returns the last
/// response. The node's readiness is a state it reaches asynchronously (the
/// database connection), so tests observe it through the real endpoint.
template<class Fetch, class Pred>
http_response poll_until(Fetch fetch, Pred pred,
                         std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto r = fetch();
    if (pred(r) || std::chrono::steady_clock::now() >= deadline)
      return r;
    std::this_thread::sleep_for(20ms);
  }
}

TEST(NodeLifecycle, HealthzThenSigtermExitsCleanlyWithinDeadline) {
  node_process node{node_toml(), {{"BUTLERS_DATABASE_URL", ""}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  auto r = http.get("/healthz");
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, R"({"status":"ok"})");
  auto started = std::chrono::steady_clock::now();
  node.signal(SIGTERM);
  auto exit = node.wait_exit(7s); // drain_deadline_s = 5, plus slack
  ASSERT_TRUE(exit) << "node still running 7 s after SIGTERM\n" << node.log();
  EXPECT_EQ(exit->exit_code, 0) << exit->err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_NE(exit->err.find("node stopped"), std::string::npos) << exit->err;
}

TEST(NodeLifecycle, SigintAlsoDrainsAndExitsZero) {
  node_process node{node_toml(), {{"BUTLERS_DATABASE_URL", ""}}};
  ASSERT_TRUE(node.wait_listening()) << node.log();
  node.signal(SIGINT);
  auto exit = node.wait_exit(7s);
  ASSERT_TRUE(exit) << node.log();
  EXPECT_EQ(exit->exit_code, 0) << exit->err;
}

TEST(NodeLifecycle, ReadyOnlyOnceDatabaseIsMigrated) {
  auto url = fresh_database("lifecycle");
  node_process node{node_toml(), {{"BUTLERS_DATABASE_URL", url}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  auto r = poll_until(
    [&] {
      return http.get("/readyz");
    },
    [](auto& r) {
      return r.status == 200;
    },
    30s);
  ASSERT_EQ(r.status, 200) << r.body << "\n" << node.log();
  EXPECT_NE(r.body.find(R"("database":"ready")"), std::string::npos) << r.body;
  // Readiness implies the schema is in place.
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  EXPECT_GE(tx.exec1("SELECT count(*) FROM schema_migrations")[0].as<int>(), 1);
  EXPECT_GE(tx.exec1("SELECT count(*) FROM pg_inherits WHERE inhparent = "
                     "'message_inbox'::regclass")[0]
              .as<int>(),
            3)
    << "current month + 2 ahead";
  node.signal(SIGTERM);
  auto exit = node.wait_exit(10s);
  ASSERT_TRUE(exit);
  EXPECT_EQ(exit->exit_code, 0) << exit->err;
}

TEST(NodeLifecycle, NotReadyWhileDatabaseUnreachable) {
  // Port 1 on loopback: nothing listens there.
  node_process node{node_toml(),
                    {{"BUTLERS_DATABASE_URL",
                      "host=127.0.0.1 port=1 dbname=x user=x "
                      "connect_timeout=1"}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  EXPECT_EQ(http.get("/healthz").status, 200) << "alive, just not ready";
  auto r = poll_until(
    [&] {
      return http.get("/readyz");
    },
    [](auto& r) {
      return r.body.find("database_error") != std::string::npos;
    },
    10s);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find(R"("database":"unavailable")"), std::string::npos)
    << r.body;
  EXPECT_NE(r.body.find("database_error"), std::string::npos) << r.body;
  node.signal(SIGTERM);
  auto exit = node.wait_exit(10s);
  ASSERT_TRUE(exit) << node.log();
  EXPECT_EQ(exit->exit_code, 0) << exit->err;
}

TEST(NodeLifecycle, MetricsAndUnknownPaths) {
  node_process node{node_toml(), {{"BUTLERS_DATABASE_URL", ""}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  auto m = http.get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("# TYPE butlers_http_requests_total counter"),
            std::string::npos)
    << m.body;
  auto nf = http.get("/nope");
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find(R"("message":"no route for GET /nope")"),
            std::string::npos)
    << nf.body;
}

TEST(NodeLifecycle, BearerTokenGuardsEverythingButProbes) {
  node_process node{node_toml(),
                    {{"BUTLERS_DATABASE_URL", ""},
                     {"BUTLERS_HTTP_TOKEN", "s3cret"}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  EXPECT_EQ(http.get("/healthz").status, 200);
  auto denied = http.get("/metrics");
  EXPECT_EQ(denied.status, 401);
  EXPECT_NE(denied.body.find(R"("class":"validation_error")"),
            std::string::npos)
    << denied.body;
  http.token("wrong");
  EXPECT_EQ(http.get("/metrics").status, 401);
  http.token("s3cret");
  EXPECT_EQ(http.get("/metrics").status, 200);
}

/// Starts a second node (default configuration) on `port`, which another
/// node listens on, and expects it to exit 1 saying it cannot listen.
void expect_port_refused(uint16_t port) {
  node_process second{node_toml(),
                      {{"BUTLERS_DATABASE_URL", ""},
                       {"BUTLERS_HTTP_PORT", std::to_string(port)}}};
  auto exit = second.wait_exit(10s);
  ASSERT_TRUE(exit) << second.log();
  EXPECT_EQ(exit->exit_code, 1);
  EXPECT_NE(exit->err.find("cannot listen on 127.0.0.1:"
                           + std::to_string(port)),
            std::string::npos)
    << exit->err;
}

TEST(NodeLifecycle, PortInUseFailsWithExitCode1) {
  node_process first{node_toml(), {{"BUTLERS_DATABASE_URL", ""}}};
  auto port = first.wait_listening();
  ASSERT_TRUE(port);
  expect_port_refused(*port);
}

TEST(NodeLifecycle, EveryHttpThreadListensOnTheOnePort) {
  // Each HTTP thread has its own listening socket of the same port; the
  // kernel spreads connections over them. 64 connections (the test client
  // opens one per request) landing on one of four threads only would take
  // odds of 4^-63.
  node_process node{"[node]\nname = \"lifecycle-test\"\n"
                    "drain_deadline_s = 5\n"
                    "[http]\nport = 0\nthreads = 4\n"
                    "[scheduler]\nthreads = 2\n",
                    {{"BUTLERS_DATABASE_URL", ""}}};
  auto port = node.wait_listening();
  ASSERT_TRUE(port) << node.log();
  http_client http{"127.0.0.1", *port};
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(http.get("/healthz").status, 200) << i;
  auto metrics = http.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  uint64_t total = 0;
  int threads_used = 0;
  for (int t = 0; t < 4; ++t) {
    auto key = "butlers_http_thread_requests_total{thread=\""
               + std::to_string(t) + "\"} ";
    auto at = metrics.body.find(key);
    ASSERT_NE(at, std::string::npos) << key << "\n" << metrics.body;
    auto n = std::stoull(metrics.body.substr(at + key.size()));
    total += n;
    threads_used += n > 0 ? 1 : 0;
  }
  EXPECT_GE(total, 64u);
  EXPECT_GE(threads_used, 2);
  // A second node on that port is refused, although the first one's
  // sockets allow port sharing among themselves.
  expect_port_refused(*port);
  EXPECT_EQ(http.get("/healthz").status, 200);
}

// -- command line
// --------------------------------------------------------------

TEST(NodeCli, CheckConfigAcceptsTheShippedConfig) {
  auto r = run_process({BUTLERS_NODE_BINARY, "check-config",
                        BUTLERS_SOURCE_DIR "/config/node.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[http]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("port = 8470"), std::string::npos) << r.out;
}

TEST(NodeCli, CheckConfigNamesFileLineAndKeyOfAMisspelling) {
  auto dir = make_temp_dir("butlers-cli");
  auto path = dir + "/bad.toml";
  write_file(path, "[node]\nname = \"x\"\n\n[http]\nbind = \"127.0.0.1\"\n"
                   "prot = 9000\n");
  auto r = run_process({BUTLERS_NODE_BINARY, "check-config", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":6"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("http.prot"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("port"), std::string::npos) << "did-you-mean hint";
  // `run` refuses to start on the same file.
  auto run = run_process({BUTLERS_NODE_BINARY, "run", "--config", path});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("http.prot"), std::string::npos) << run.err;
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(NodeCli, UsageErrorsExitWithCode2) {
  EXPECT_EQ(run_process({BUTLERS_NODE_BINARY}).exit_code, 2);
  EXPECT_EQ(run_process({BUTLERS_NODE_BINARY, "frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_process({BUTLERS_NODE_BINARY, "run"}).exit_code, 2)
    << "--config is required";
  EXPECT_EQ(run_process(
              {BUTLERS_NODE_BINARY, "check-config", "/nonexistent/node.toml"})
              .exit_code,
            2);
}

TEST(NodeCli, MigrateIsIdempotentAndSafeWhenRacing) {
  auto url = fresh_database("migrate");
  auto dir = make_temp_dir("butlers-cli");
  auto path = dir + "/node.toml";
  write_file(path, node_toml());
  std::map<std::string, std::string> env{{"BUTLERS_DATABASE_URL", url}};
  // Two nodes migrating the same empty database at once.
  process_result a, b;
  std::thread ta{[&] {
    a = run_process({BUTLERS_NODE_BINARY, "migrate", "--config", path}, env);
  }};
  b = run_process({BUTLERS_NODE_BINARY, "migrate", "--config", path}, env);
  ta.join();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  auto again = run_process({BUTLERS_NODE_BINARY, "migrate", "--config", path},
                           env);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 migration(s) applied"), std::string::npos)
    << again.err;
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  auto rows = tx.exec1("SELECT count(*), count(DISTINCT version) FROM "
                       "schema_migrations");
  EXPECT_EQ(rows[0].as<int>(), rows[1].as<int>());
  EXPECT_GE(rows[0].as<int>(), 1);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

} // namespace
} // namespace butlers::test
