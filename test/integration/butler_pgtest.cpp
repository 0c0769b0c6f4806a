// Butlers against the real PostgreSQL: the route inbox's fencing, real CLI
// subprocesses under an in-process actor system (timeout and cancel kill
// the whole process group), and real node processes over HTTP (route.execute,
// crash recovery after SIGKILL mid-session, webhook and outbox delivery).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/spawn_options.hpp>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "actors/butler.hpp"
#include "actors/inbox_writer.hpp"
#include "actors/messenger.hpp"
#include "actors/registry.hpp"
#include "actors/switchboard.hpp"
#include "actors/type_ids.hpp"
#include "runtime/inbox_store.hpp"
#include "runtime/uuid.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string route_json(const std::string& butler, const std::string& prompt,
                       std::string request_id = {}) {
  route_envelope env;
  env.request_id = request_id.empty() ? make_uuid_v7().to_string()
                                      : std::move(request_id);
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = "api";
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  env.butler = butler;
  env.tool = "route.execute";
  env.prompt = prompt;
  return make_route_json(env);
}

std::string json_field(const std::string& body, const std::string& key) {
  auto pos = body.find("\"" + key + "\":\"");
  if (pos == std::string::npos)
    return {};
  pos += key.size() + 4;
  return body.substr(pos, body.find('"', pos) - pos);
}

// -- the route inbox's fencing, at the SQL level --------------------------

TEST(RouteInbox, AHolderWhoseLeaseWasTakenOverCannotWrite) {
  auto url = fresh_database("route_inbox");
  inbox_store a{url, "node-a", 30};
  inbox_store b{url, "node-b", 30};
  a.connect();
  a.migrate();
  b.connect();
  write_batch append;
  work_op op;
  op.kind = work_op_kind::append;
  op.item.work_id = make_uuid_v7().to_string();
  op.item.butler = "health";
  op.item.request_id = make_uuid_v7().to_string();
  op.item.trigger_source = "route";
  op.item.envelope = route_json("health", "x", op.item.request_id);
  op.lease_s = 30;
  append.work.push_back(op);
  auto stored = a.write(append).work.at(0);
  ASSERT_TRUE(stored.ok);
  EXPECT_FALSE(stored.duplicate);
  auto held = stored.items.at(0);
  EXPECT_EQ(held.lease_token, 1);
  // The same dispatch again is the same item.
  op.item.work_id = make_uuid_v7().to_string();
  append.work[0] = op;
  auto again = a.write(append).work.at(0);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.items.at(0).work_id, held.work_id);
  // node-a's lease expires (it stalled); node-b recovers the item.
  {
    pqxx::connection conn{url};
    pqxx::work tx{conn};
    tx.exec("UPDATE route_work SET lease_expires_at = now() - interval '1 s'");
    tx.commit();
  }
  write_batch lease;
  work_op take;
  take.kind = work_op_kind::lease;
  take.item.butler = "health";
  take.limit = 10;
  lease.work.push_back(take);
  auto taken = b.write(lease).work.at(0);
  ASSERT_EQ(taken.items.size(), 1u);
  EXPECT_EQ(taken.items[0].lease_token, 2);
  // The stale holder's result is refused; the new holder's is written.
  auto finish = [&](inbox_store& s, int64_t token) {
    write_batch w;
    work_op f;
    f.kind = work_op_kind::finish;
    f.item.work_id = held.work_id;
    f.item.lease_token = token;
    f.state = "ok";
    f.response = R"({"from":)" + std::to_string(token) + "}";
    w.work.push_back(f);
    return s.write(w).work.at(0).ok;
  };
  EXPECT_FALSE(finish(a, 1));
  EXPECT_TRUE(finish(b, 2));
  EXPECT_FALSE(finish(b, 2)) << "a terminal item takes no second result";
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec1("SELECT state, response::text, lease_owner "
                      "FROM route_work");
  EXPECT_EQ(row[0].as<std::string>(), "ok");
  EXPECT_EQ(row[1].as<std::string>(), R"({"from":2})");
  EXPECT_TRUE(row[2].is_null());
}

// -- CLI sessions in-process: real subprocesses, real writer --------------

struct cli_fixture : ::testing::Test {
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    register_types(cfg);
    return cfg;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  node_context_ptr ctx = std::make_shared<node_context>();
  std::string url = fresh_database("butler_cli");
  inbox_writer_actor writer;
  butler_actor b;
  std::string dir = make_temp_dir("butler_cli");

  switchboard_actor sb;
  registry_actor reg;
  butler_actor messenger;

  /// The butler under test beside the real switchboard, registry and
  /// messenger (delivering to an outbox file), as a node wires them.
  void start(butler_config bc) {
    // A fresh context per start: readiness below is this writer's.
    ctx = std::make_shared<node_context>();
    database_config db;
    db.url = url;
    writer = sys.spawn(inbox_writer, db, "cli-test", 30u, ctx);
    ASSERT_TRUE(eventually(
      [&] {
        return ctx->status.database_ready.load();
      },
      30s));
    sb = sys.spawn(switchboard, switchboard_config{}, routing_settings{},
                   writer, ctx);
    ctx->set_switchboard(sb);
    reg = sys.spawn(registry, std::string{"cli-test"});
    ctx->set_registry(reg);
    messenger_config mc;
    delivery_adapter_config outbox;
    outbox.kind = adapter_kind::outbox;
    outbox.path = dir + "/outbox.jsonl";
    butler_params mp;
    mp.cfg = messenger_butler(mc);
    mp.adapters = {outbox};
    mp.node = "cli-test";
    messenger = sys.spawn(butlers::messenger, std::move(mp), writer, ctx);
    registry_entry entry;
    entry.name = "messenger";
    caf::anon_send(reg, register_atom_v, entry, messenger);
    ctx->set_messenger(messenger);
    butler_params p;
    p.cfg = std::move(bc);
    p.node = "cli-test";
    b = sys.spawn(butler, std::move(p), writer, ctx);
  }

  void stop() {
    for (auto hdl :
         {caf::actor_cast<caf::actor>(b),
          caf::actor_cast<caf::actor>(messenger),
          caf::actor_cast<caf::actor>(reg), caf::actor_cast<caf::actor>(sb),
          caf::actor_cast<caf::actor>(writer)})
      if (hdl)
        caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
  }

  ~cli_fixture() override {
    stop();
  }

  route_response route(const std::string& env) {
    caf::scoped_actor self{sys};
    route_response out;
    self->request(b, 10s, route_atom_v, route_request{env, "route", {}, {}})
      .receive(
        [&](route_response& r) {
          out = std::move(r);
        },
        [&](caf::error& err) {
          ADD_FAILURE() << sys.render(err);
        });
    return out;
  }

  bool cancel(const std::string& work_id) {
    caf::scoped_actor self{sys};
    bool out = false;
    self->request(b, 10s, cancel_atom_v, work_id)
      .receive(
        [&](bool x) {
          out = x;
        },
        [&](caf::error& err) {
          ADD_FAILURE() << sys.render(err);
        });
    return out;
  }

  /// The work item's state and error class once it is terminal.
  std::pair<std::string, std::string> outcome(const std::string& work_id,
                                              std::chrono::seconds wait) {
    std::pair<std::string, std::string> out;
    eventually(
      [&] {
        pqxx::connection conn{url};
        pqxx::nontransaction tx{conn};
        auto r = tx.exec_params1("SELECT state, coalesce(error_class, '') "
                                 "FROM route_work WHERE work_id = $1::uuid",
                                 work_id);
        out = {r[0].as<std::string>(), r[1].as<std::string>()};
        return out.first != "queued" && out.first != "running";
      },
      wait);
    return out;
  }

  std::string response_of(const std::string& work_id) {
    pqxx::connection conn{url};
    pqxx::nontransaction tx{conn};
    return tx
      .exec_params1("SELECT response::text FROM route_work "
                    "WHERE work_id = $1::uuid",
                    work_id)[0]
      .as<std::string>();
  }

  /// A CLI butler running the fake of `family`; `env` (NAME=VALUE) sets the
  /// fake's behaviour through env(1), which execs it under the same pid.
  static butler_config cli_butler(const std::string& family,
                                  std::vector<std::string> env = {}) {
    butler_config c;
    c.name = "coder";
    c.runtime.kind = runtime_kind::cli;
    c.runtime.family = *parse_enum<cli_family>(family);
    c.runtime.command = {"env"};
    for (auto& e : env)
      c.runtime.command.push_back(e);
    // Claude and codex sessions speak stream-json and app-server: C++ fakes.
    std::string fake = BUTLERS_SOURCE_DIR "/test/fakes/fake-" + family;
    if (family == "claude")
      fake = BUTLERS_FAKE_CLAUDE;
    else if (family == "codex")
      fake = BUTLERS_FAKE_CODEX;
    c.runtime.command.push_back(fake);
    c.runtime.kill_grace_ms = 300;
    return c;
  }
};

using CliSession = cli_fixture;

TEST_F(CliSession, EachFamilysAnswerBecomesTheResult) {
  for (auto family : {"claude", "codex", "opencode"}) {
    SCOPED_TRACE(family);
    auto c = cli_butler(family);
    c.name = std::string{"coder-"} + family;
    start(c);
    auto r = route(route_json(c.name, "list my pills"));
    ASSERT_EQ(r.status, "accepted") << r.error_message;
    auto [state, cls] = outcome(r.work_id, 30s);
    EXPECT_EQ(state, "ok") << cls << ": " << response_of(r.work_id);
    EXPECT_NE(response_of(r.work_id).find("list my pills"), std::string::npos)
      << response_of(r.work_id);
    // The answer went out through the messenger.
    EXPECT_TRUE(eventually(
      [&] {
        return read_file(dir + "/outbox.jsonl").find(c.name)
               != std::string::npos;
      },
      10s));
    stop();
  }
}

TEST_F(CliSession, TimeoutKillsTheWholeProcessGroup) {
  auto pidfile = dir + "/pids";
  auto c = cli_butler("claude", {"FAKE_CLAUDE_TURN_DELAY_MS=1000000",
                                 "FAKE_CLAUDE_PIDFILE=" + pidfile});
  c.session_timeout_s = 1;
  start(c);
  auto r = route(route_json("coder", "never answers"));
  ASSERT_EQ(r.status, "accepted");
  ASSERT_TRUE(eventually(
    [&] {
      return read_pids(pidfile).size() >= 2;
    },
    10s));
  auto pids = read_pids(pidfile);
  auto [state, cls] = outcome(r.work_id, 30s);
  EXPECT_EQ(state, "error");
  EXPECT_EQ(cls, "timeout");
  for (auto pid : pids)
    EXPECT_TRUE(eventually(
      [&] {
        return gone(pid);
      },
      10s))
      << pid;
}

TEST_F(CliSession, CancelKillsTheWholeProcessGroup) {
  auto pidfile = dir + "/pids";
  start(cli_butler("codex",
                   {"FAKE_CODEX_TURN_MS=600000", "FAKE_CODEX_IGNORE_TERM=1",
                    "FAKE_CODEX_PIDFILE=" + pidfile}));
  auto r = route(route_json("coder", "hang on"));
  ASSERT_EQ(r.status, "accepted");
  ASSERT_TRUE(eventually(
    [&] {
      return read_pids(pidfile).size() >= 2;
    },
    10s));
  auto pids = read_pids(pidfile);
  EXPECT_TRUE(cancel(r.work_id));
  auto [state, cls] = outcome(r.work_id, 30s);
  EXPECT_EQ(state, "cancelled");
  // SIGTERM is ignored by the fake: the SIGKILL escalation takes it down.
  for (auto pid : pids)
    EXPECT_TRUE(eventually(
      [&] {
        return gone(pid);
      },
      10s))
      << pid;
}

// -- real node processes ---------------------------------------------------

/// A one-thread HTTP receiver on 127.0.0.1 that answers 200 to every POST
/// and keeps the bodies.
class webhook_receiver {
 public:
  webhook_receiver() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 16);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread{[this] {
      serve();
    }};
  }

  ~webhook_receiver() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }

  uint16_t port() const {
    return port_;
  }

  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> guard{mtx_};
    return bodies_;
  }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0)
        return;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      std::string data;
      char buf[4096];
      size_t need = std::string::npos;
      while (true) {
        auto n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0)
          break;
        data.append(buf, static_cast<size_t>(n));
        auto head = data.find("\r\n\r\n");
        if (head != std::string::npos && need == std::string::npos) {
          auto lower = data.substr(0, head);
          for (auto& ch : lower)
            ch = static_cast<char>(std::tolower(ch));
          auto cl = lower.find("content-length:");
          need = head + 4
                 + (cl == std::string::npos
                      ? 0
                      : std::stoul(lower.substr(cl + 15)));
        }
        if (need != std::string::npos && data.size() >= need)
          break;
      }
      auto head = data.find("\r\n\r\n");
      if (head != std::string::npos) {
        std::lock_guard<std::mutex> guard{mtx_};
        bodies_.push_back(data.substr(head + 4));
      }
      std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                       "Connection: close\r\n\r\nok";
      ::send(c, ok.data(), ok.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mtx_;
  std::vector<std::string> bodies_;
};

class ButlerNode : public node_fixture {
 protected:
  /// Starts a node with `extra` TOML; unless `extra` configures messenger
  /// adapters, replies go to an outbox file in a temporary directory.
  void start(const std::string& extra) {
    use_database("butler_node");
    use_files("butler_node");
    auto config = extra;
    if (config.find("[[messenger.adapter]]") == std::string::npos)
      config += "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
                + "/outbox.jsonl\"\n";
    ASSERT_TRUE(start_node(node_head("butler-test", 5) + config));
  }

  /// Rows of route_work for `butler` in `state`.
  int count(const std::string& butler, const std::string& state) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx
      .exec_params1("SELECT count(*) FROM route_work "
                    "WHERE butler = $1 AND state = $2",
                    butler, state)[0]
      .as<int>();
  }

  /// Starts a node with `config`, routes `text` to its `health` butler,
  /// SIGKILLs the node while the session runs, and starts it again.
  void kill_mid_session_and_restart(const std::string& config,
                                    const std::string& text,
                                    std::string& work_id) {
    start(config);
    auto r = http_->post("/v1/butlers/health/route",
                         route_json("health", text));
    ASSERT_EQ(r.status, 202) << r.body;
    work_id = json_field(r.body, "work_id");
    ASSERT_FALSE(work_id.empty()) << r.body;
    // Mid-session: the first of its turns is under way.
    ASSERT_TRUE(eventually(
      [&] {
        return count("health", "running") == 1;
      },
      10s));
    ASSERT_TRUE(kill_node());
    node_.reset();
    start(config);
  }
};

TEST_F(ButlerNode, RouteExecuteOverHttp) {
  start("[[butler]]\nname = \"health\"\nmax_concurrent_sessions = 1\n"
        "max_pending = 1\n[butler.runtime]\nturn_ms = 2000\n");
  auto list = http_->get("/v1/butlers");
  EXPECT_EQ(list.status, 200);
  for (auto name : {"health", "general", "messenger"})
    EXPECT_NE(list.body.find(std::string{"\""} + name + "\""),
              std::string::npos);
  auto first = http_->post("/v1/butlers/health/route",
                           route_json("health", "take my pill"));
  EXPECT_EQ(first.status, 202) << first.body;
  EXPECT_NE(first.body.find(R"("status":"accepted")"), std::string::npos);
  EXPECT_EQ(http_
              ->post("/v1/butlers/health/route", route_json("health", "second"))
              .status,
            202);
  // One running, one waiting: the third is over max_pending.
  auto full = http_->post("/v1/butlers/health/route",
                          route_json("health", "third"));
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.headers["retry-after"], "1");
  EXPECT_NE(full.body.find("overload_rejected"), std::string::npos);
  auto bad = http_->post("/v1/butlers/health/route", R"({"schema_version":1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("validation_error"), std::string::npos);
  EXPECT_EQ(http_->post("/v1/butlers/nobody/route", route_json("nobody", "x"))
              .status,
            404);
  // A specialist may not hand the messenger a delivery directly.
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = "api";
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  env.butler = "messenger";
  env.tool = "route.execute";
  env.prompt = "deliver";
  env.notify_request = make_notify_json(env, "health", "hello", "k1");
  auto direct = http_->post("/v1/butlers/messenger/route",
                            make_route_json(env));
  EXPECT_EQ(direct.status, 400) << direct.body;
  EXPECT_NE(direct.body.find("direct delivery rejected"), std::string::npos);
}

TEST_F(ButlerNode, RepliesReachTheWebhookAndTheOutboxThroughTheMessenger) {
  webhook_receiver hook;
  auto dir = make_temp_dir("butler_outbox");
  start("[[butler]]\nname = \"health\"\n[butler.runtime]\nturn_ms = 10\n"
        "reply = \"{butler} says: noted {prompt}\"\n"
        "[[messenger.adapter]]\nkind = \"webhook\"\nurl = "
        "\"http://127.0.0.1:"
        + std::to_string(hook.port())
        + "/notify\"\ntimeout_ms = 2000\n"
          "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
        + dir + "/outbox.jsonl\"\n");
  auto r = http_->post("/v1/butlers/health/route",
                       route_json("health", "aspirin at 8"));
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_TRUE(eventually(
    [&] {
      return !hook.bodies().empty();
    },
    20s))
    << node_->log();
  auto body = hook.bodies().front();
  EXPECT_NE(body.find(R"("schema_version":"notify.v1")"), std::string::npos);
  EXPECT_NE(body.find(R"("origin_butler":"health")"), std::string::npos);
  EXPECT_NE(body.find("health says: noted aspirin at 8"), std::string::npos)
    << body;
  ASSERT_TRUE(eventually(
    [&] {
      return count("messenger", "ok") == 1;
    },
    20s));
  ASSERT_TRUE(eventually(
    [&] {
      return count("health", "ok") == 1;
    },
    20s));
  auto outbox = read_file(dir + "/outbox.jsonl");
  EXPECT_NE(outbox.find("health says: noted aspirin at 8"), std::string::npos);
  EXPECT_EQ(std::count(outbox.begin(), outbox.end(), '\n'), 1);
  EXPECT_EQ(hook.bodies().size(), 1u);
}

TEST_F(ButlerNode, SigkillMidSessionThenRestartCompletesTheItemOnce) {
  auto config = std::string{"[[butler]]\nname = \"health\"\nlease_s = 3\n"
                            "[butler.runtime]\nturn_ms = 1500\nturns = 2\n"};
  std::string work_id;
  ASSERT_NO_FATAL_FAILURE(
    kill_mid_session_and_restart(config, "survive a crash", work_id));
  ASSERT_TRUE(eventually(
    [&] {
      return count("health", "ok") == 1;
    },
    30s))
    << node_->log();
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec_params1("SELECT attempts, lease_token, "
                             "(SELECT count(*) FROM route_work) "
                             "FROM route_work WHERE work_id = $1::uuid",
                             work_id);
  EXPECT_EQ(row[0].as<int>(), 2) << "one crashed session, one completed";
  EXPECT_GE(row[1].as<int>(), 2) << "leased again under a new token";
  // The work item and its reply's delivery (one messenger item). The
  // delivery's result is written apart from the item's (after its outbox
  // sync), so it may land just after.
  EXPECT_EQ(count("health", "ok"), 1);
  EXPECT_TRUE(eventually(
    [&] {
      return count("messenger", "ok") == 1;
    },
    10s));
  EXPECT_EQ(count("messenger", "ok"), 1);
}

TEST_F(ButlerNode, ARestartedNodeTakesBackItsOwnWorkWithoutWaitingATick) {
  // The default lease (60 s): renewals and recovery tick every 20 s. A
  // restarted node holds its own interrupted work under its own name, and
  // takes it back at start; that must not wait for the second tick when
  // the first ran before the writer had connected.
  auto config = std::string{"[[butler]]\nname = \"health\"\nlease_s = 60\n"
                            "[butler.runtime]\nturn_ms = 500\nturns = 2\n"};
  std::string work_id;
  ASSERT_NO_FATAL_FAILURE(
    kill_mid_session_and_restart(config, "come back quickly", work_id));
  // Well inside the 20 s tick: the session (1 s) ran again and finished.
  ASSERT_TRUE(eventually(
    [&] {
      return count("health", "ok") == 1;
    },
    10s))
    << node_->log();
  EXPECT_EQ(count("health", "running"), 0);
}

} // namespace
} // namespace butlers::test
