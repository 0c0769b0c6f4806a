#include "test/support/node_fixture.hpp"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <utility>

#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {

using namespace std::chrono_literals;

std::string node_fixture::node_head(const std::string& name,
                                    int drain_deadline_s,
                                    const std::string& http_extra,
                                    uint16_t port) {
  return "[node]\nname = \"" + name
         + "\"\ndrain_deadline_s = " + std::to_string(drain_deadline_s)
         + "\n[http]\nport = " + std::to_string(port) + "\n" + http_extra
         + "[scheduler]\nthreads = 2\n";
}

void node_fixture::use_database(const std::string& prefix) {
  if (url_.empty())
    url_ = fresh_database(prefix);
}

void node_fixture::use_files(const std::string& prefix) {
  if (dir_.empty())
    dir_ = make_temp_dir(prefix);
}

::testing::AssertionResult node_fixture::launch_node(
  const std::string& config, std::map<std::string, std::string> env) {
  env.emplace("BUTLERS_DATABASE_URL", url_);
  node_ = std::make_unique<node_process>(config, std::move(env));
  auto port = node_->wait_listening();
  if (!port)
    return ::testing::AssertionFailure() << "the node never listened\n"
                                         << node_->log();
  port_ = *port;
  http_ = std::make_unique<http_client>("127.0.0.1", port_);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult node_fixture::start_node(
  const std::string& config, std::map<std::string, std::string> env) {
  if (auto launched = launch_node(config, std::move(env)); !launched)
    return launched;
  auto ready = eventually(
    [&] {
      return http_->get("/readyz").status == 200;
    },
    30s);
  if (!ready)
    return ::testing::AssertionFailure() << "the node never got ready\n"
                                         << node_->log();
  return ::testing::AssertionSuccess();
}

std::optional<process_result> node_fixture::kill_node() {
  node_->signal(SIGKILL);
  return node_->wait_exit(10s);
}

std::optional<process_result> node_fixture::stop_node() {
  node_->signal(SIGTERM);
  return node_->wait_exit(15s);
}

void node_fixture::TearDown() {
  if (node_ && !stop_node()) {
    // Its log's end says where it stopped; SIGKILL frees the port.
    auto log = node_->log();
    ADD_FAILURE() << "node did not exit after SIGTERM; the end of its log:\n"
                  << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
    kill_node();
  }
  if (!dir_.empty()) {
    std::error_code ignored; // a leftover temporary directory harms no one
    std::filesystem::remove_all(dir_, ignored);
  }
}

} // namespace butlers::test
