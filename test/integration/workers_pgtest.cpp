// External butlers against real node processes, PostgreSQL and real
// workers: the Python worker of test/fixtures/workers (plain HTTP, standard
// library), `butlers-client worker --exec`, and raw HTTP calls playing a
// worker that dies or never answers.

#include <signal.h>

#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/attachments.hpp"
#include "runtime/route.hpp"
#include "runtime/subprocess.hpp"
#include "runtime/uuid.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string route_json(const std::string& butler, const std::string& prompt,
                       const std::string& request_id,
                       const std::string& attachments = "") {
  route_envelope env;
  env.request_id = request_id;
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = "api";
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = prompt;
  env.attachments = attachments;
  return make_route_json(env);
}

/// The string value of the first `key` in JSON `body` (with or without
/// blanks after the colon, as Python's json module writes).
std::string field(const std::string& body, const std::string& key) {
  auto pos = body.find("\"" + key + "\":");
  if (pos == std::string::npos)
    return {};
  pos = body.find('"', pos + key.size() + 3);
  if (pos == std::string::npos)
    return {};
  ++pos;
  return body.substr(pos, body.find('"', pos) - pos);
}

/// A child process running beside the test (a worker), killed at the end.
class background {
 public:
  background(std::vector<std::string> argv,
             std::vector<std::pair<std::string, std::string>> env,
             std::string working_dir = {}) {
    subprocess_options o;
    o.argv = std::move(argv);
    o.env = std::move(env);
    o.timeout = 300s;
    o.kill_grace = 0ms;
    o.working_dir = std::move(working_dir);
    child_ = std::make_unique<subprocess>(std::move(o));
    thread_ = std::thread{[this] {
      result_ = child_->wait();
    }};
  }

  ~background() {
    finish();
  }

  void kill_now() {
    ::kill(child_->pid(), SIGKILL);
  }

  pid_t pid() const {
    return child_->pid();
  }

  /// Ends the process (if it still runs); its output, for diagnostics.
  std::string finish() {
    child_->cancel();
    if (thread_.joinable())
      thread_.join();
    return result_.out + result_.err;
  }

 private:
  std::unique_ptr<subprocess> child_;
  std::thread thread_;
  subprocess_result result_;
};

class Workers : public node_fixture {
 protected:
  /// A node with the external butler `py` (`extra` in its runtime table)
  /// whose replies go to an outbox file.
  void start(const std::string& extra = "", const std::string& butler = "") {
    use_database("workers");
    use_files("workers");
    auto config = node_head("workers-test", 5)
                  + "[[butler]]\nname = \"py\"\nmax_concurrent_sessions = 8\n"
                    "session_timeout_s = 120\n"
                  + butler + "[butler.runtime]\nkind = \"external\"\n" + extra
                  + "[[butler]]\nname = \"plain\"\n"
                    "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
                  + dir_ + "/outbox.jsonl\"\n";
    ASSERT_TRUE(start_node(config));
    slow_ = std::make_unique<http_client>("127.0.0.1", port_, 30s);
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_);
  }

  /// Routes `prompt` to `py`; returns the request id.
  std::string route(const std::string& prompt) {
    auto id = make_uuid_v7().to_string();
    auto r = http_->post("/v1/butlers/py/route", route_json("py", prompt, id));
    EXPECT_EQ(r.status, 202) << r.body;
    return id;
  }

  bool outbox_has(const std::string& text) {
    return read_file(dir_ + "/outbox.jsonl").find(text) != std::string::npos;
  }

  std::unique_ptr<background> python(const std::string& mode = "reply",
                                     const std::string& hold_file = "") {
    return std::make_unique<
      background>(std::vector<std::string>{"/usr/bin/python3",
                                           BUTLERS_SOURCE_DIR
                                           "/test/fixtures/workers/worker.py",
                                           "py"},
                  std::vector<
                    std::pair<std::string, std::string>>{{"BUTLERS_URL", url()},
                                                         {"WORKER_MODE", mode},
                                                         {"WORKER_HOLD_FILE",
                                                          hold_file}});
  }

  int count(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int>();
  }

  std::unique_ptr<http_client> slow_;
};

TEST_F(Workers, ThePythonWorkerAnswersThroughRecvAndAck) {
  start();
  auto py = python();
  for (auto prompt : {"hello one", "hello two", "hello three"})
    route(prompt);
  EXPECT_TRUE(eventually(
    [&] {
      return outbox_has("py: HELLO ONE") && outbox_has("py: HELLO TWO")
             && outbox_has("py: HELLO THREE");
    },
    30s))
    << read_file(dir_ + "/outbox.jsonl") << py->finish();
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM route_work WHERE butler = 'py' "
                   "AND state = 'ok'")
             == 3;
    },
    10s));
  auto metrics = http_->get("/metrics").body;
  EXPECT_NE(metrics.find("butlers_worker_acked_total{butler=\"py\"} 3"),
            std::string::npos)
    << metrics;
}

TEST_F(Workers, AKilledWorkersItemComesBackUnderANewToken) {
  start("visibility_ms = 1000\n");
  auto hold = dir_ + "/held.json";
  auto py = python("hold", hold);
  route("keep this");
  ASSERT_TRUE(eventually(
    [&] {
      return !read_file(hold).empty();
    },
    20s))
    << py->finish();
  auto held = read_file(hold);
  auto work_id = field(held, "work_id");
  auto old_token = field(held, "lease_token");
  py->kill_now();
  ASSERT_TRUE(eventually(
    [&] {
      return gone(py->pid());
    },
    5s));
  // Back after its visibility, under a new token.
  auto r = slow_->post("/v1/butlers/py/work/recv", R"({"wait_ms":5000})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(field(r.body, "work_id"), work_id) << r.body;
  auto token = field(r.body, "lease_token");
  EXPECT_NE(token, old_token);
  EXPECT_NE(r.body.find(R"("attempt":2)"), std::string::npos) << r.body;
  auto stale = http_->post("/v1/butlers/py/work/" + work_id + "/ack",
                           R"({"lease_token":")" + old_token
                             + R"(","reply":"too late"})");
  EXPECT_EQ(stale.status, 409) << stale.body;
  auto ok = http_->post("/v1/butlers/py/work/" + work_id + "/ack",
                        R"({"lease_token":")" + token
                          + R"(","reply":"second worker"})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.body.find(R"("state":"ok")"), std::string::npos) << ok.body;
  EXPECT_TRUE(eventually(
    [&] {
      return outbox_has("second worker");
    },
    10s));
  EXPECT_FALSE(outbox_has("too late"));
}

TEST_F(Workers, AnItemThatKeepsFailingEndsDeadLettered) {
  start("max_deliveries = 3\n");
  auto py = python("fail");
  auto id = route("never works");
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM dead_letters WHERE request_id = '" + id
                   + "'")
             == 1;
    },
    20s))
    << py->finish();
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec_params1("SELECT butler, error_class, attempts FROM "
                             "dead_letters WHERE request_id = $1::uuid",
                             id);
  EXPECT_EQ(row[0].as<std::string>(), "py");
  EXPECT_EQ(row[1].as<std::string>(), "internal_error");
  EXPECT_EQ(row[2].as<int>(), 3);
  EXPECT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM route_work WHERE request_id = '" + id
                   + "' AND state = 'error'")
             == 1;
    },
    10s));
}

TEST_F(Workers, AnItemNeverAckedEndsDeadLetteredAsATimeout) {
  start("max_deliveries = 2\nvisibility_ms = 250\n");
  auto id = route("nobody answers");
  int deliveries = 0;
  for (int i = 0; i < 4; ++i) {
    auto r = slow_->post("/v1/butlers/py/work/recv",
                         R"({"wait_ms":2000,"visibility_ms":250})");
    ASSERT_EQ(r.status, 200) << r.body;
    if (r.body.find("work_id") != std::string::npos)
      ++deliveries;
  }
  EXPECT_EQ(deliveries, 2);
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM dead_letters WHERE request_id = '" + id
                   + "' AND error_class = 'timeout' AND attempts = 2")
             == 1;
    },
    10s));
}

TEST_F(Workers, TheClientWorkerRunsACommandPerItem) {
  start();
  background cli{{BUTLERS_CLIENT_BINARY, "--url", url(), "worker", "--butler",
                  "py", "--visibility-ms", "1000", "--exec",
                  "cat > envelope.json; grep -q 'from the cli' envelope.json "
                  "&& echo \"cli says hi $BUTLERS_ATTEMPT\""},
                 {},
                 dir_};
  route("from the cli");
  EXPECT_TRUE(eventually(
    [&] {
      return outbox_has("cli says hi 1");
    },
    30s))
    << read_file(dir_ + "/outbox.jsonl") << cli.finish();
}

TEST_F(Workers, ALongPollReturnsAsSoonAsAnItemArrives) {
  start();
  http_response got;
  std::chrono::steady_clock::duration took{};
  std::thread poll{[&] {
    auto t0 = std::chrono::steady_clock::now();
    got = slow_->post("/v1/butlers/py/work/recv", R"({"wait_ms":20000})");
    took = std::chrono::steady_clock::now() - t0;
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/metrics")
               .body.find("butlers_worker_waiting_receivers{butler=\"py\"} 1")
             != std::string::npos;
    },
    5s));
  route("wake up");
  poll.join();
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_NE(got.body.find("wake up"), std::string::npos) << got.body;
  EXPECT_LT(took, 5s);
}

TEST_F(Workers, AWorkerFetchesTheFilesItsRunningItemNames) {
  start();
  // A file stored as a connector stores one, and an item that names it.
  std::string bytes = "%PDF-1.7 a small scan";
  for (int i = 0; i < 200; ++i)
    bytes += static_cast<char>(i);
  auto sha = attachment_hash(bytes);
  {
    pqxx::connection conn{url_};
    pqxx::work tx{conn};
    tx.exec_params("INSERT INTO attachments (sha256, media_type, size_bytes, "
                   "data) VALUES ($1, 'application/pdf', $2, $3)",
                   sha, static_cast<int64_t>(bytes.size()),
                   pqxx::binarystring{bytes});
    tx.commit();
  }
  auto other = std::string(64, 'e');
  auto routed = http_->post("/v1/butlers/py/route",
                            route_json("py", "read the scan",
                                       make_uuid_v7().to_string(),
                                       attachments_json(
                                         {{sha, "application/pdf", bytes.size(),
                                           "scan.pdf"}})));
  ASSERT_EQ(routed.status, 202) << routed.body;
  auto r = slow_->post("/v1/butlers/py/work/recv", R"({"wait_ms":10000})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto work_id = field(r.body, "work_id");
  ASSERT_FALSE(work_id.empty()) << r.body;
  EXPECT_NE(r.body.find(sha), std::string::npos) << "the item names it";
  auto base = "/v1/butlers/py/work/" + work_id + "/files/";
  auto got = http_->get(base + sha);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, bytes);
  EXPECT_EQ(got.headers["content-type"], "application/pdf");
  // Only what the item names, only while it runs, and only well-formed.
  EXPECT_EQ(http_->get(base + other).status, 404);
  EXPECT_EQ(http_->get(base + "ABC").status, 400);
  EXPECT_EQ(http_->get("/v1/butlers/py/work/not-a-uuid/files/" + sha).status,
            400);
  EXPECT_EQ(http_->get("/v1/butlers/plain/work/" + work_id + "/files/" + sha)
              .status,
            404)
    << "another butler's path does not reach the item";
  auto ok = http_->post("/v1/butlers/py/work/" + work_id + "/ack",
                        R"({"lease_token":")" + field(r.body, "lease_token")
                          + R"(","reply":"read it"})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(http_->get(base + sha).status, 404) << "the item has ended";
}

TEST_F(Workers, RefusalsNameTheirReason) {
  start("max_waiting_receivers = 1\n");
  auto none = http_->post("/v1/butlers/nobody/work/recv", "{}");
  EXPECT_EQ(none.status, 404) << none.body;
  auto plain = http_->post("/v1/butlers/plain/work/recv", "{}");
  EXPECT_EQ(plain.status, 409) << plain.body;
  EXPECT_NE(plain.body.find("is not external"), std::string::npos);
  auto bad = http_->post("/v1/butlers/py/work/recv", R"({"max":0})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("'max'"), std::string::npos);
  auto no_token = http_->post("/v1/butlers/py/work/abc/ack",
                              R"({"reply":"x"})");
  EXPECT_EQ(no_token.status, 400) << no_token.body;
  EXPECT_NE(no_token.body.find("'lease_token'"), std::string::npos);
  auto unknown = http_->post("/v1/butlers/py/work/abc/nack",
                             R"({"lease_token":"t"})");
  EXPECT_EQ(unknown.status, 409) << unknown.body;
  std::thread parked{[&] {
    slow_->post("/v1/butlers/py/work/recv", R"({"wait_ms":3000})");
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return http_->get("/metrics")
               .body.find("butlers_worker_waiting_receivers{butler=\"py\"} 1")
             != std::string::npos;
    },
    5s));
  auto busy = http_->post("/v1/butlers/py/work/recv", R"({"wait_ms":3000})");
  EXPECT_EQ(busy.status, 429) << busy.body;
  EXPECT_EQ(busy.headers["retry-after"], "1");
  parked.join();
}

} // namespace
} // namespace butlers::test
