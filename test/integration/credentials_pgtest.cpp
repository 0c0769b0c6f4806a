// Scoped credentials of the HTTP API against a real node process, real
// PostgreSQL and real HTTP over loopback: every row of the node's route
// table (read from the table itself) answered for every role, 403 with the
// role needed for the rest; rotation on SIGHUP and through the operator
// API without a restart; the refusal's metric and log line without the
// token; a thread credential held to its thread or its sender's threads.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/http_server.hpp"
#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_process.hpp"
#include "test/support/poll.hpp"
#include "test/support/thread_node.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A status line, the headers and as much of the body as `Content-Length`
/// says; an event stream (no length) ends after its headers.
struct answer {
  int status = 0;
  std::string head;
  std::string body;
};

/// One request over a fresh loopback connection, bounded by 10 s per
/// socket operation.
answer call(uint16_t port, const std::string& method, const std::string& path,
            const std::string& token, const std::string& body = {}) {
  answer out;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  auto req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             + "Connection: close\r\nContent-Type: application/json\r\n"
             + "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!token.empty())
    req += "Authorization: Bearer " + token + "\r\n";
  req += "\r\n" + body;
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[4096];
  size_t need = std::string::npos;
  for (;;) {
    auto end = got.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      out.head = got.substr(0, end);
      auto lower = out.head;
      for (auto& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto cl = lower.find("content-length:");
      if (cl == std::string::npos)
        break; // a stream: its status is all we want
      need = end + 4 + std::stoul(lower.substr(cl + 15));
    }
    if (need != std::string::npos && got.size() >= need)
      break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (got.size() > 12 && got.compare(0, 5, "HTTP/") == 0)
    out.status = std::stoi(got.substr(9, 3));
  if (auto end = got.find("\r\n\r\n"); end != std::string::npos)
    out.body = got.substr(end + 4);
  return out;
}

/// The token of each credential the nodes below know (their digests go in
/// the config).
const std::map<std::string, std::string>& tokens() {
  static const std::map<std::string, std::string> xs{
    {"ingest", "tok-ingest-1f3a"},     {"worker", "tok-worker-77b2"},
    {"operator", "tok-operator-9c1d"}, {"read", "tok-read-4e5f"},
    {"thread", "tok-thread-a0b9"},     {"all", "tok-legacy-5d6e"},
  };
  return xs;
}

std::string credential(const std::string& name, const std::string& role,
                       const std::string& token,
                       const std::string& scope = {}) {
  return "[[http.credential]]\nname = \"" + name + "\"\nrole = \"" + role
         + "\"\ntoken_sha256 = \"" + sha256_hex(token) + "\"\n" + scope;
}

/// A concrete path for `pattern`: each parameter gets a value that passes
/// the scope of the credentials below (thread `t-own`, its run `run_id`,
/// butler `ext`).
std::string concrete(const std::string& pattern, const std::string& run_id) {
  static const std::map<std::string, std::string> values{
    {"{id}", "t-own"},
    {"{name}", "ext"},
    {"{action}", "replay"},
    {"{work_id}", "0190a000-0000-7000-8000-000000000001"},
    {"{work_id...}", "0190a000-0000-7000-8000-000000000001"},
    {"{verb}", "ack"},
    {"{sha256}", std::string(64, 'a')},
    {"{approval_id}", "0190a000-0000-7000-8000-000000000002"},
    {"{rest...}", "x"},
    {"{type}", "http"},
    {"{identity}", "x"},
    {"{file}", "app.js"},
  };
  std::string out;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] != '{') {
      out += pattern[i++];
      continue;
    }
    auto end = pattern.find('}', i);
    auto param = pattern.substr(i, end - i + 1);
    if (param == "{run_id}")
      out += run_id;
    else
      out += values.at(param);
    i = end + 1;
  }
  return out;
}

class Credentials : public thread_node {
 protected:
  /// A node whose `general` butler runs scripted turns, with one
  /// credential per role (the thread one scoped to `t-own`, the worker one
  /// to `ext`), the `[http] token`, and `extra`.
  void start_with_roles(const std::string& extra = {}) {
    use_database("creds");
    use_files("creds");
    auto& t = tokens();
    auto config = node_head("creds-test", 5,
                            "token = \"" + t.at("all")
                              + "\"\nrequest_timeout_ms = 10000\n")
                  + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = "
                    "2\n"
                  + "[butler.runtime]\nturn_ms = 10\nturns = 1\n"
                  + credential("ingester", "ingest", t.at("ingest"))
                  + credential("worker-ext", "worker", t.at("worker"),
                               "butler = \"ext\"\n")
                  + credential("ops", "operator", t.at("operator"))
                  + credential("dash", "read", t.at("read"))
                  + credential("own-thread", "thread", t.at("thread"),
                               "thread_id = \"t-own\"\n")
                  + extra
                  + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
                  + "/outbox.jsonl\"\n";
    ASSERT_TRUE(start_node(config));
  }

  /// Starts a run in thread `thread` as `sender` with `token`; its id.
  std::string start_run(const std::string& thread, const std::string& token,
                        const std::string& sender = {},
                        const std::string& message_id = "m1") {
    auto body = "{\"message_id\":\"" + message_id + "\",\"text\":\"hello\""
                + (sender.empty() ? "" : ",\"sender\":\"" + sender + "\"")
                + "}";
    auto a = call(port_, "POST", "/v1/threads/" + thread + "/turns", token,
                  body);
    EXPECT_EQ(a.status, 200) << a.body;
    rapidjson::Document doc;
    if (json::parse(a.body, doc) || !doc.IsObject())
      return {};
    return str(doc, "run_id");
  }

  /// The value of the metric line `name{labels}` (read with `token`); -1
  /// when absent.
  long metric(const std::string& line_prefix,
              const std::string& token = tokens().at("all")) {
    auto m = call(port_, "GET", "/metrics", token);
    auto pos = m.body.find("\n" + line_prefix + " ");
    if (pos == std::string::npos)
      return -1;
    return std::stol(m.body.substr(pos + line_prefix.size() + 2));
  }
};

TEST_F(Credentials, EveryRouteOfTheTableAnswersItsRolesAndRefusesTheRest) {
  start_with_roles();
  auto run_id = start_run("t-own", tokens().at("all"));
  ASSERT_FALSE(run_id.empty());
  auto rows = http_server::route_rows();
  ASSERT_GT(rows.size(), 40u);
  std::map<std::string, int> allowed_per_role;
  std::map<std::string, int> refused_per_role;
  for (auto& row : rows) {
    auto method = row.methods == "ANY" ? std::string{"PUT"} : row.methods;
    auto path = concrete(row.pattern, run_id);
    SCOPED_TRACE(row.methods + " " + row.pattern + " as " + method + " " + path
                 + " (roles: " + row.roles.describe() + ")");
    ASSERT_FALSE(row.roles.unset()) << "a route without a role";
    auto body = method == "POST" ? std::string{"{}"} : std::string{};
    auto anonymous = call(port_, method, path, "", body);
    if (row.roles.is_open()) {
      // Open: the credential changes nothing.
      for (auto& [role, token] : tokens())
        EXPECT_EQ(call(port_, method, path, token, body).status,
                  anonymous.status)
          << role;
      continue;
    }
    EXPECT_EQ(anonymous.status, 401) << anonymous.body;
    for (auto& [role, token] : tokens()) {
      SCOPED_TRACE("credential of role " + role);
      auto a = call(port_, method, path, token, body);
      ASSERT_NE(a.status, 0) << "no answer";
      auto parsed = parse_http_role(role);
      bool may = role == "all" || row.roles.has(*parsed);
      if (may) {
        EXPECT_NE(a.status, 401) << a.body;
        EXPECT_NE(a.status, 403) << a.body;
        ++allowed_per_role[role];
        continue;
      }
      EXPECT_EQ(a.status, 403) << a.body;
      ++refused_per_role[role];
      auto needed = to_string(row.roles.list().front());
      EXPECT_NE(a.body.find(std::string{"\"role_needed\":\""} + needed + "\""),
                std::string::npos)
        << a.body;
      EXPECT_EQ(a.body.find(token), std::string::npos) << "token echoed";
    }
  }
  // Every role reaches something and is refused something; the token
  // reaches everything.
  for (auto& [role, token] : tokens()) {
    EXPECT_GT(allowed_per_role[role], 0) << role;
    EXPECT_EQ(refused_per_role[role] > 0, role != "all") << role;
  }
}

TEST_F(Credentials, AReadCredentialIsRefusedIngestCountedAndLoggedWithoutIt) {
  start_with_roles();
  auto& token = tokens().at("read");
  auto before = metric("butlers_auth_refusals_total{role_needed=\"ingest\"}");
  EXPECT_EQ(before, 0);
  auto a = call(port_, "POST", "/v1/ingest", token, "{}");
  EXPECT_EQ(a.status, 403);
  EXPECT_NE(a.body.find("\"role_needed\":\"ingest\""), std::string::npos)
    << a.body;
  EXPECT_NE(a.body.find("credential 'dash'"), std::string::npos) << a.body;
  EXPECT_EQ(a.body.find(token), std::string::npos);
  EXPECT_EQ(metric("butlers_auth_refusals_total{role_needed=\"ingest\"}"), 1);
  ASSERT_TRUE(eventually(
    [&] {
      return node_->log().find("HTTP 403 POST /v1/ingest") != std::string::npos;
    },
    5s))
    << node_->log();
  auto log = node_->log();
  EXPECT_NE(log.find("credential 'dash' refused"), std::string::npos) << log;
  for (auto& [role, t] : tokens())
    EXPECT_EQ(log.find(t), std::string::npos) << "the log holds a token";
  // A token nobody has stays 401, and is counted as before.
  EXPECT_EQ(call(port_, "POST", "/v1/ingest", "nobody-has-this", "{}").status,
            401);
  EXPECT_GE(metric("butlers_http_unauthorized_total"), 1);
}

/// The config of a node whose only credential is `dash` (role read) with
/// `token`, and `ops` (operator) with `ops_token`.
std::string rotating_config(const std::string& head, const std::string& token,
                            const std::string& ops_token) {
  return head + credential("dash", "read", token)
         + credential("ops", "operator", ops_token);
}

TEST_F(Credentials, SighupRotatesTheTokenWithoutARestart) {
  use_database("creds");
  auto head = node_head("creds-rotate", 5);
  ASSERT_TRUE(start_node(rotating_config(head, "old-token-1", "ops-1")));
  auto pid = node_->pid();
  EXPECT_EQ(call(port_, "GET", "/metrics", "old-token-1").status, 200);
  EXPECT_EQ(call(port_, "GET", "/metrics", "new-token-2").status, 401);
  write_file(node_->config_path(),
             rotating_config(head, "new-token-2", "ops-1"));
  node_->signal(SIGHUP);
  ASSERT_TRUE(eventually(
    [&] {
      return call(port_, "GET", "/metrics", "new-token-2").status == 200;
    },
    10s));
  EXPECT_EQ(call(port_, "GET", "/metrics", "old-token-1").status, 401);
  EXPECT_EQ(node_->pid(), pid);
  EXPECT_FALSE(node_->wait_exit(0ms)) << "the node restarted or stopped";
  EXPECT_NE(node_->log().find("credentials reloaded"), std::string::npos);
  EXPECT_EQ(call(port_, "GET", "/readyz", "").status, 200);
}

TEST_F(Credentials, TheReloadApiTakesAValidFileAndKeepsTheOldSetOtherwise) {
  use_database("creds");
  auto head = node_head("creds-reload", 5);
  ASSERT_TRUE(start_node(rotating_config(head, "old-token-1", "ops-1")));
  write_file(node_->config_path(),
             rotating_config(head, "new-token-2", "ops-1"));
  // Only the operator role may reload.
  EXPECT_EQ(call(port_, "POST", "/v1/operator/credentials/reload",
                 "old-token-1")
              .status,
            403);
  auto ok = call(port_, "POST", "/v1/operator/credentials/reload", "ops-1");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.body.find("\"credentials\":2"), std::string::npos) << ok.body;
  EXPECT_EQ(call(port_, "GET", "/metrics", "new-token-2").status, 200);
  EXPECT_EQ(call(port_, "GET", "/metrics", "old-token-1").status, 401);
  // A file that does not validate: the set in force stays, and the answer
  // says why.
  write_file(node_->config_path(),
             head + "[[http.credential]]\nname = \"dash\"\nrole = \"read\"\n"
               + "token_sha256 = \"not-a-digest\"\n");
  auto bad = call(port_, "POST", "/v1/operator/credentials/reload", "ops-1");
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("http.credential[0].token_sha256"), std::string::npos)
    << bad.body;
  EXPECT_EQ(call(port_, "GET", "/metrics", "new-token-2").status, 200);
  EXPECT_EQ(metric("butlers_auth_reloads_total{outcome=\"failed\"}",
                   "new-token-2"),
            1);
  EXPECT_EQ(metric("butlers_auth_reloads_total{outcome=\"ok\"}", "new-token-2"),
            1);
}

TEST_F(Credentials, AThreadCredentialReachesItsOwnThreadOrItsSendersThreads) {
  start_with_roles(
    credential("alice", "thread", "tok-alice", "sender = \"web:alice\"\n")
    + credential("bob", "thread", "tok-bob", "sender = \"web:bob\"\n"));
  // Alice starts a thread of her own; her turns must name her.
  auto run = start_run("t-alice", "tok-alice", "web:alice");
  ASSERT_FALSE(run.empty());
  auto unnamed = call(port_, "POST", "/v1/threads/t-alice/turns", "tok-alice",
                      "{\"message_id\":\"m2\",\"text\":\"hi\"}");
  EXPECT_EQ(unnamed.status, 403) << unnamed.body;
  auto as_bob = call(port_, "POST", "/v1/threads/t-alice/turns", "tok-alice",
                     "{\"message_id\":\"m3\",\"text\":\"hi\","
                     "\"sender\":\"web:bob\"}");
  EXPECT_EQ(as_bob.status, 403) << as_bob.body;
  EXPECT_EQ(call(port_, "GET", "/v1/threads/t-alice/transcript", "tok-alice")
              .status,
            200);
  // Bob reaches none of it: not the thread, its transcript, stream or run.
  for (auto path : {"/v1/threads/t-alice", "/v1/threads/t-alice/transcript",
                    "/v1/threads/t-alice/events"})
    EXPECT_EQ(call(port_, "GET", path, "tok-bob").status, 403) << path;
  EXPECT_EQ(call(port_, "POST", "/v1/runs/" + run + "/cancel", "tok-bob")
              .status,
            403);
  EXPECT_EQ(call(port_, "POST", "/v1/threads/t-alice/turns", "tok-bob",
                 "{\"message_id\":\"m4\",\"text\":\"hi\","
                 "\"sender\":\"web:bob\"}")
              .status,
            403);
  EXPECT_EQ(call(port_, "POST", "/v1/threads/t-alice/cancel", "tok-bob").status,
            403);
  // Alice may cancel her run (200, or 404 once it has finished).
  auto mine = call(port_, "POST", "/v1/runs/" + run + "/cancel", "tok-alice");
  EXPECT_TRUE(mine.status == 200 || mine.status == 404) << mine.body;
  // The credential scoped to thread t-own reaches neither Alice's thread
  // nor her run, nor the thread list.
  auto& own = tokens().at("thread");
  EXPECT_EQ(call(port_, "GET", "/v1/threads/t-alice", own).status, 403);
  EXPECT_EQ(call(port_, "POST", "/v1/runs/" + run + "/cancel", own).status,
            403);
  EXPECT_EQ(call(port_, "GET", "/v1/threads", own).status, 403);
  EXPECT_EQ(call(port_, "GET", "/v1/threads/t-own", own).status, 404)
    << "its own thread, not started yet";
  EXPECT_GE(metric("butlers_auth_refusals_total{role_needed=\"thread\"}"), 8);
}

TEST_F(Credentials, WithoutTokenOrCredentialLoopbackStaysOpen) {
  use_database("creds");
  ASSERT_TRUE(start_node(node_head("creds-open", 5)));
  EXPECT_EQ(call(port_, "GET", "/metrics", "").status, 200);
  EXPECT_EQ(call(port_, "GET", "/v1/butlers", "").status, 200);
  EXPECT_EQ(call(port_, "GET", "/metrics", "whatever").status, 200);
}

} // namespace
} // namespace butlers::test
