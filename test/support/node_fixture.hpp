#pragma once

// A GoogleTest fixture for tests against one real `butlers-node` process on
// a database of its own: it writes the node's configuration, starts the
// node and waits until it listens and is ready, kills or restarts it when a
// test asks, and at teardown stops a node still running (expecting it to
// exit on SIGTERM) and removes the test's temporary files.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "test/support/http_client.hpp"
#include "test/support/node_process.hpp"

namespace butlers::test {

class node_fixture : public ::testing::Test {
 protected:
  /// The TOML every test node starts with: `[node]` named `name` with a
  /// drain deadline of `drain_deadline_s`, `[http]` on `port` (0: any free
  /// one) with the keys in `http_extra`, and two scheduler threads.
  static std::string node_head(const std::string& name, int drain_deadline_s,
                               const std::string& http_extra = "",
                               uint16_t port = 0);

  /// Creates this test's database (`<prefix>_<random>`) unless `url_`
  /// names one already.
  void use_database(const std::string& prefix);

  /// Creates this test's temporary directory unless `dir_` names one
  /// already; it is removed at teardown.
  void use_files(const std::string& prefix);

  /// Starts the node on `config`, with `env` and `BUTLERS_DATABASE_URL` =
  /// `url_` unless `env` sets it; succeeds once the node listens (then
  /// `port_` and `http_` reach it), fails with its log if it exits or 30 s
  /// pass first.
  ::testing::AssertionResult launch_node(
    const std::string& config, std::map<std::string, std::string> env = {});

  /// `launch_node`, then waits up to 30 s for /readyz to answer 200.
  ::testing::AssertionResult start_node(
    const std::string& config, std::map<std::string, std::string> env = {});

  /// SIGKILLs the node and waits up to 10 s for it to go; nullopt if it
  /// did not.
  std::optional<process_result> kill_node();

  /// SIGTERMs the node and waits up to 15 s for its exit; nullopt if it did
  /// not exit.
  std::optional<process_result> stop_node();

  /// Stops a node that still runs, expecting it to exit, and removes `dir_`.
  void TearDown() override;

  /// This test's database; empty until `use_database` (or the test) sets it.
  std::string url_;
  /// This test's temporary directory; empty until `use_files`.
  std::string dir_;
  /// The HTTP port of the node last launched.
  uint16_t port_ = 0;
  std::unique_ptr<node_process> node_;
  /// A client of the node last launched.
  std::unique_ptr<http_client> http_;
};

} // namespace butlers::test
