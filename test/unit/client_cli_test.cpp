// The butlers-client command line as a user types it: the common options
// (--url, --wait-s, ...) stand before or after the subcommand, against a
// scripted HTTP server on loopback that plays the node.

#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/subprocess.hpp"
#include "test/support/scripted_http_server.hpp"
#include "test/support/temp_dir.hpp"

using namespace butlers;
using namespace butlers::test;
using namespace std::chrono_literals;

namespace {

/// A node that takes every ingest and knows every request, recording the
/// request lines it saw.
class fake_node {
 public:
  fake_node()
    : server_([this](const seen_request& r) {
        std::lock_guard<std::mutex> guard{mtx_};
        seen_.push_back(r.method + " " + r.target);
        if (r.method == "POST")
          return http_reply(202,
                            R"({"request_id":"r-1","status":"accepted",)"
                            R"("duplicate":false})",
                            "Content-Type: application/json\r\n");
        return http_reply(200, R"({"request_id":"r-1"})",
                          "Content-Type: application/json\r\n");
      }) {}

  std::string url() const {
    auto u = server_.url("/");
    return u.substr(0, u.size() - 1);
  }

  std::vector<std::string> seen() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_;
  }

 private:
  mutable std::mutex mtx_;
  std::vector<std::string> seen_;
  scripted_http_server server_;
};

/// Runs butlers-client with `args`; returns the finished process.
subprocess_result client(std::vector<std::string> args) {
  subprocess_options o;
  o.argv = {BUTLERS_CLIENT_BINARY};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = {{"BUTLERS_URL", "http://127.0.0.1:1"}, {"BUTLERS_HTTP_TOKEN", ""}};
  o.timeout = 30s;
  subprocess p{std::move(o)};
  return p.wait();
}

TEST(ClientCli, TakesTheCommonOptionsAfterTheSubcommand) {
  fake_node node;
  auto r = client(
    {"inspect", "r-1", "--url", node.url(), "--timeout-ms", "5000"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(node.seen(), std::vector<std::string>{"GET /v1/requests/r-1"});
}

TEST(ClientCli, TakesTheCommonOptionsBeforeTheSubcommand) {
  fake_node node;
  auto r = client({"--url", node.url(), "inspect", "r-1"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(node.seen(), std::vector<std::string>{"GET /v1/requests/r-1"});
}

TEST(ClientCli, ReplaysAFileWithTheUrlAfterTheSubcommand) {
  fake_node node;
  temp_dir dir;
  auto file = dir.file("events.jsonl");
  std::ofstream{file}
    << R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
       R"("provider":"internal","endpoint_identity":"shop"},"event":{)"
       R"("external_event_id":"e-1","external_thread_id":"t-1",)"
       R"("observed_at":"2026-11-23T12:00:00Z"},"sender":{"identity":"me"},)"
       R"("payload":{"raw":{},"normalized_text":"hello"}})"
       "\n";
  auto r = client(
    {"replay", file, "--url", node.url(), "--wait-s", "10", "--verbose"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(node.seen(), std::vector<std::string>{"POST /v1/ingest"});
}

TEST(ClientCli, SendsWithOptionsOnBothSides) {
  fake_node node;
  auto r = client(
    {"--wait-s", "10", "send", "hello", "--sender", "me", "--url", node.url()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(node.seen(), std::vector<std::string>{"POST /v1/ingest"});
}

TEST(ClientCli, StillRefusesAnOptionNobodyKnows) {
  fake_node node;
  auto r = client({"inspect", "r-1", "--url", node.url(), "--frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(node.seen().empty());
}

TEST(ClientCli, KeepsASubcommandsOwnOptionsToIt) {
  // --spool belongs to replay and await, not to the app: before the
  // subcommand it is still a usage error, and nothing is sent.
  fake_node node;
  temp_dir dir;
  auto file = dir.file("empty.jsonl");
  std::ofstream{file} << "";
  auto r = client(
    {"--url", node.url(), "--spool", dir.file("s.spool"), "replay", file});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(node.seen().empty());
}

} // namespace
