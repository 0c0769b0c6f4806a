// butlers-node: the command-line entry point.
//
//   butlers-node run --config FILE       run a node until SIGINT/SIGTERM
//   butlers-node check-config FILE       validate, print the effective config
//   butlers-node migrate --config FILE   apply the embedded migrations
//   butlers-node replay --config FILE --request ID --who W --why TEXT
//   butlers-node forget --config FILE --sender CHANNEL:IDENTITY --who W
//                       --why TEXT [--batch N]
//   butlers-node hash-token < TOKEN      SHA-256 of a token, for
//                                        [[http.credential]] token_sha256
//
// Exit codes: see actors/node.hpp (and actors/README.md).

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "runtime/config.hpp"
#include "runtime/http_auth.hpp"
#include "runtime/log.hpp"

namespace {

/// Loads, overrides from the environment and validates; prints every error.
std::optional<butlers::node_settings> load(const std::string& path) {
  auto result = butlers::load_settings(path);
  auto& errors = result.errors;
  if (!errors.empty() || !result.settings) {
    for (auto& e : errors)
      std::cerr << "config error: " << e.to_string() << "\n";
    std::cerr << path << ": " << errors.size()
              << " error(s), the node does not start\n";
    return std::nullopt;
  }
  return std::move(result.settings);
}

/// `hash-token`: the token comes on stdin, never on the command line, where
/// other users could read it.
int hash_token() {
  std::string token;
  if (!std::getline(std::cin, token) || token.empty()) {
    std::cerr << "hash-token: give the token on standard input\n";
    return butlers::exit_config;
  }
  if (!token.empty() && token.back() == '\r')
    token.pop_back();
  std::cout << butlers::sha256_hex(token) << "\n";
  return butlers::exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Butlers node: an actor runtime for LLM butler pipelines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "butlers-node 0.1.0");
  std::string config_path;
  auto run = app.add_subcommand("run", "run a node until SIGINT or SIGTERM");
  run->add_option("-c,--config", config_path, "node configuration (TOML)")
    ->required();
  auto check = app.add_subcommand("check-config",
                                  "validate a configuration file and print "
                                  "the effective configuration");
  check->add_option("file", config_path, "node configuration (TOML)")
    ->required();
  auto migrate = app.add_subcommand("migrate",
                                    "apply the embedded SQL migrations");
  migrate->add_option("-c,--config", config_path, "node configuration (TOML)")
    ->required();
  std::string request_id, who, why;
  auto replay = app.add_subcommand("replay",
                                   "replay an errored request (same "
                                   "request_id; audited); the "
                                   "running node's cold path picks it up");
  replay->add_option("-c,--config", config_path, "node configuration (TOML)")
    ->required();
  replay->add_option("--request", request_id, "request id (UUID)")->required();
  replay->add_option("--who", who, "operator name, for the audit")->required();
  replay->add_option("--why", why, "reason, for the audit")->required();
  std::string sender;
  int batch = 500;
  auto forget = app.add_subcommand("forget",
                                   "erase everything one sender wrote, in "
                                   "every table (audited; safe while nodes "
                                   "run; idempotent)");
  forget->add_option("-c,--config", config_path, "node configuration (TOML)")
    ->required();
  forget
    ->add_option("--sender", sender, "CHANNEL:IDENTITY, e.g. telegram:123456")
    ->required();
  forget->add_option("--who", who, "operator name, for the audit")->required();
  forget->add_option("--why", why, "reason, for the audit")->required();
  forget->add_option("--batch", batch, "most ids per transaction (1..10000)");
  auto hash = app.add_subcommand("hash-token",
                                 "print the SHA-256 of the token read from "
                                 "standard input (one line), for "
                                 "[[http.credential]] token_sha256");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto rc = app.exit(e);
    return rc == 0 ? butlers::exit_ok : butlers::exit_config;
  }
  if (hash->parsed())
    return hash_token();
  auto settings = load(config_path);
  if (!settings)
    return butlers::exit_config;
  if (check->parsed()) {
    std::cout << butlers::to_toml(*settings);
    for (auto& w : butlers::config_warnings(*settings))
      std::cerr << "config warning: " << w << "\n";
    std::cerr << config_path << ": OK\n";
    return butlers::exit_ok;
  }
  butlers::init_logging(to_string(settings->node.log_level),
                        settings->node.name);
  if (migrate->parsed())
    return butlers::migrate_database(*settings);
  if (replay->parsed())
    return butlers::replay_request(*settings, request_id, who, why);
  if (forget->parsed())
    return butlers::forget_sender(*settings, sender, who, why, batch);
  for (auto& w : butlers::config_warnings(*settings))
    spdlog::warn("config: {}", w);
  butlers::block_shutdown_signals();
  try {
    return butlers::run_node(*settings);
  } catch (const std::exception& e) {
    spdlog::error("fatal: {}", e.what());
    return butlers::exit_failure;
  }
}
