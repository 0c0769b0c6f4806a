#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/config.hpp"

using namespace butlers;

namespace {

/// The repository root (test/CMakeLists.txt defines it for the unit tests).
std::string source_dir() {
  return BUTLERS_SOURCE_DIR;
}

std::string dump(const std::vector<config_error>& errors) {
  std::string out;
  for (auto& e : errors)
    out += e.to_string() + "\n";
  return out;
}

/// The error with `key`, or nullptr.
const config_error* find(const std::vector<config_error>& errors,
                         const std::string& key) {
  for (auto& e : errors)
    if (e.key == key)
      return &e;
  return nullptr;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A getenv over a fixed map.
std::function<const char*(const char*)> fake_env(
  const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto i = vars.find(name);
    return i == vars.end() ? nullptr : i->second.c_str();
  };
}

/// Every key set to something other than its default.
constexpr const char* full_file = R"(
[node]
name = "node-7"
drain_deadline_s = 42
log_level = "debug"

[database]
url = "postgresql://bob@db.example:5432/butlers?sslmode=require"
pool_size = 8
writer_connections = 2
max_batch = 512
group_commit_delay_us = 2500
connect_timeout_s = 9
retention_months = 6
partitions_ahead = 3

[http]
enabled = false
bind = "0.0.0.0"
port = 9000
token = "t0ken"
max_body_bytes = 2048
threads = 4
max_connections = 99
request_timeout_ms = 1234

[switchboard]
enabled = false
max_in_flight = 10
queue_capacity = 11
workers = 12
scanner_interval_s = 13
scanner_grace_s = 14
scanner_batch_size = 15
lease_s = 16
dedupe_window_s = 17
route_timeout_s = 18
retry_base_ms = 19
retry_cap_ms = 20
circuit_failure_threshold = 21
circuit_open_s = 22
fanout_mode = "ordered"
max_in_progress = 23

[[butler]]
name = "general"
description = "the \"fallback\"\tone"
keywords = []

[[butler]]
name = "coder"
description = "writes code"
triggers = ["the user asks for code", "a build broke"]
keywords = ["code", "bug"]
capabilities = ["route.execute", "code.review"]
max_concurrent_sessions = 3
max_pending = 0
session_timeout_s = 77
lease_s = 5
node = "node-8"
[butler.runtime]
kind = "cli"
turn_ms = 0
turns = 7
fail_rate = 0.1
fail_class = "overload_rejected"
reply = "{butler} did {turns} turns for {request_id}"
seed = 42
family = "codex"
command = ["codex", "exec", "--json"]
prompt_via = "argument"
max_output_bytes = 4096
kill_grace_ms = 0
[[butler.schedule]]
name = "nightly"
cron = "0 3 * * *"
prompt = "review yesterday's commits"
[[butler.schedule]]
name = "poll"
every_s = 60
prompt = "anything new?"

[messenger]
max_concurrent_sessions = 4
max_pending = 0

[[messenger.adapter]]
kind = "webhook"
channels = ["telegram", "slack"]
url = "http://127.0.0.1:9999/notify"
token = "hook-t0ken"
timeout_ms = 250
retries = 0

[[messenger.adapter]]
kind = "outbox"
path = "/var/lib/butlers/outbox.jsonl"

[[connector]]
name = "mail"
type = "maildir"
endpoint_identity = "me@example.org"
path = "/var/mail/me"
max_in_flight = 3
enabled = false

[cluster]
bind = "10.0.0.1"
port = 9001
peers = ["10.0.0.2:9001", "[fd00::3]:9001"]
switchboard = false
butlers = ["*"]
heartbeat_interval_ms = 250
connection_timeout_ms = 2500
quarantine_after_ms = 4000
reconnect_cap_ms = 900
[cluster.tls]
cert = "/etc/node.pem"
key = "/etc/node.key"
ca = "/etc/ca.pem"

[scheduler]
threads = 2
policy = "sharing"
max_throughput = 100

[router]
kind = "cli"
confidence_threshold = 0.75
family = "opencode"
command = ["opencode", "run", "--model", "small"]
timeout_s = 30
max_output_bytes = 65536
[[router.rule]]
channels = ["telegram", "slack"]
allow = ["general", "health"]
[[router.rule]]
deny = ["coder"]

[[policy]]
tier = "default"
wall_clock_s = 7200
max_invocations = 8
retry_max_attempts = 2
[[policy]]
tier = "high_priority"
)";

/// The example operators copy (config/README.md).
constexpr const char* health_example = R"([[butler]]
name = "health"
description = "Medication, symptoms, appointments"
triggers = ["the user talks about their health or medication"]
keywords = ["pill", "medication", "doctor"]
max_concurrent_sessions = 1
max_pending = 100
session_timeout_s = 1800
[butler.runtime]
kind = "scripted"      # or "cli"
turn_ms = 200
turns = 1
fail_rate = 0.0        # fraction of sessions that fail...
fail_class = "timeout" # ...with this error class
)";

} // namespace

// -- defaults and round trips -------------------------------------------------

TEST(config, empty_text_gives_defaults) {
  auto res = parse_config("", "empty.toml");
  ASSERT_TRUE(res.errors.empty()) << dump(res.errors);
  ASSERT_TRUE(res.settings);
  auto& s = *res.settings;
  EXPECT_EQ(s, node_settings{});
  EXPECT_EQ(s.path, "empty.toml");
  EXPECT_EQ(s.node.name, "butlers-1");
  EXPECT_EQ(s.node.drain_deadline_s, 10u);
  EXPECT_EQ(s.node.log_level, severity::info);
  EXPECT_EQ(s.database.url, "");
  EXPECT_EQ(s.database.pool_size, 4u);
  EXPECT_EQ(s.database.max_batch, 256u);
  EXPECT_EQ(s.database.group_commit_delay_us, 1000u);
  EXPECT_EQ(s.http.bind, "127.0.0.1");
  EXPECT_EQ(s.http.port, 8470);
  EXPECT_EQ(s.http.max_body_bytes, 1048576u);
  EXPECT_EQ(s.switchboard.max_in_flight, 2048u);
  EXPECT_EQ(s.switchboard.dedupe_window_s, 300u);
  EXPECT_EQ(s.switchboard.workers, 3u);
  EXPECT_EQ(s.switchboard.route_timeout_s, 1800u);
  EXPECT_EQ(s.switchboard.retry_base_ms, 500u);
  EXPECT_EQ(s.switchboard.retry_cap_ms, 30000u);
  EXPECT_EQ(s.switchboard.circuit_failure_threshold, 5u);
  EXPECT_EQ(s.switchboard.circuit_open_s, 30u);
  EXPECT_EQ(s.switchboard.fanout_mode, fanout_kind::parallel);
  EXPECT_EQ(s.switchboard.max_in_progress, 10000u);
  EXPECT_EQ(s.router.kind, router_kind::rules);
  EXPECT_EQ(s.router.confidence_threshold, 0.5);
  EXPECT_EQ(s.router.family, cli_family::claude);
  EXPECT_TRUE(s.router.command.empty());
  EXPECT_EQ(s.router.timeout_s, 60u);
  EXPECT_EQ(s.router.max_output_bytes, 262144u);
  EXPECT_TRUE(s.router.rules.empty());
  EXPECT_TRUE(s.policies.empty());
  EXPECT_TRUE(s.butlers.empty());
  EXPECT_EQ(s.messenger.max_concurrent_sessions, 64u);
  EXPECT_EQ(s.messenger.max_pending, 1000u);
  EXPECT_TRUE(s.messenger.adapters.empty()) << "the runtime adds the outbox";
  EXPECT_TRUE(s.connectors.empty());
  EXPECT_FALSE(s.cluster.active());
  EXPECT_EQ(s.cluster.port, 0);
  EXPECT_TRUE(s.cluster.switchboard);
  EXPECT_EQ(s.cluster.butlers, std::vector<std::string>{"*"});
  EXPECT_EQ(s.cluster.quarantine_after_ms, 30000u);
  EXPECT_EQ(s.scheduler.policy, scheduler_policy::stealing);
  EXPECT_TRUE(validate_settings(s).empty());
}

TEST(config, full_file_reads_every_key) {
  auto res = parse_config(full_file, "full.toml");
  ASSERT_TRUE(res.errors.empty()) << dump(res.errors);
  auto& s = *res.settings;
  EXPECT_EQ(s.node.name, "node-7");
  EXPECT_EQ(s.node.drain_deadline_s, 42u);
  EXPECT_EQ(s.node.log_level, severity::debug);
  EXPECT_EQ(s.database.pool_size, 8u);
  EXPECT_EQ(s.database.writer_connections, 2u);
  EXPECT_EQ(s.database.max_batch, 512u);
  EXPECT_EQ(s.database.group_commit_delay_us, 2500u);
  EXPECT_EQ(s.database.connect_timeout_s, 9u);
  EXPECT_EQ(s.database.retention_months, 6u);
  EXPECT_EQ(s.database.partitions_ahead, 3u);
  EXPECT_FALSE(s.http.enabled);
  EXPECT_EQ(s.http.bind, "0.0.0.0");
  EXPECT_EQ(s.http.port, 9000);
  EXPECT_EQ(s.http.token, "t0ken");
  EXPECT_EQ(s.http.max_body_bytes, 2048u);
  EXPECT_EQ(s.http.threads, 4u);
  EXPECT_EQ(s.http.max_connections, 99u);
  EXPECT_EQ(s.http.request_timeout_ms, 1234u);
  EXPECT_FALSE(s.switchboard.enabled);
  EXPECT_EQ(s.switchboard.max_in_flight, 10u);
  EXPECT_EQ(s.switchboard.queue_capacity, 11u);
  EXPECT_EQ(s.switchboard.workers, 12u);
  EXPECT_EQ(s.switchboard.scanner_interval_s, 13u);
  EXPECT_EQ(s.switchboard.scanner_grace_s, 14u);
  EXPECT_EQ(s.switchboard.scanner_batch_size, 15u);
  EXPECT_EQ(s.switchboard.lease_s, 16u);
  EXPECT_EQ(s.switchboard.dedupe_window_s, 17u);
  EXPECT_EQ(s.switchboard.route_timeout_s, 18u);
  EXPECT_EQ(s.switchboard.retry_base_ms, 19u);
  EXPECT_EQ(s.switchboard.retry_cap_ms, 20u);
  EXPECT_EQ(s.switchboard.circuit_failure_threshold, 21u);
  EXPECT_EQ(s.switchboard.circuit_open_s, 22u);
  EXPECT_EQ(s.switchboard.fanout_mode, fanout_kind::ordered);
  EXPECT_EQ(s.switchboard.max_in_progress, 23u);
  ASSERT_EQ(s.butlers.size(), 2u);
  EXPECT_EQ(s.butlers[0].name, "general");
  EXPECT_EQ(s.butlers[0].description, "the \"fallback\"\tone");
  EXPECT_EQ(s.butlers[0].runtime, runtime_config{});
  EXPECT_TRUE(s.butlers[0].schedules.empty());
  auto& b = s.butlers[1];
  EXPECT_EQ(b.name, "coder");
  EXPECT_EQ(b.triggers, (std::vector<std::string>{"the user asks for code",
                                                  "a build broke"}));
  EXPECT_EQ(b.keywords, (std::vector<std::string>{"code", "bug"}));
  EXPECT_EQ(b.capabilities,
            (std::vector<std::string>{"route.execute", "code.review"}));
  EXPECT_EQ(b.max_concurrent_sessions, 3u);
  EXPECT_EQ(b.max_pending, 0u);
  EXPECT_EQ(b.session_timeout_s, 77u);
  EXPECT_EQ(b.lease_s, 5u);
  EXPECT_EQ(b.node, "node-8");
  EXPECT_EQ(b.runtime.kind, runtime_kind::cli);
  EXPECT_EQ(b.runtime.turn_ms, 0u);
  EXPECT_EQ(b.runtime.turns, 7u);
  EXPECT_EQ(b.runtime.fail_rate, 0.1);
  EXPECT_EQ(b.runtime.fail_class, butlers_errc::overload_rejected);
  EXPECT_EQ(b.runtime.reply, "{butler} did {turns} turns for {request_id}");
  EXPECT_EQ(b.runtime.seed, 42u);
  EXPECT_EQ(b.runtime.family, cli_family::codex);
  EXPECT_EQ(b.runtime.command,
            (std::vector<std::string>{"codex", "exec", "--json"}));
  EXPECT_EQ(b.runtime.prompt_via, prompt_passing::as_argument);
  EXPECT_EQ(b.runtime.max_output_bytes, 4096u);
  EXPECT_EQ(b.runtime.kill_grace_ms, 0u);
  ASSERT_EQ(b.schedules.size(), 2u);
  EXPECT_EQ(b.schedules[0].name, "nightly");
  EXPECT_EQ(b.schedules[0].every_s, 0u);
  EXPECT_EQ(b.schedules[0].cron, "0 3 * * *");
  EXPECT_EQ(b.schedules[0].prompt, "review yesterday's commits");
  EXPECT_EQ(b.schedules[1].name, "poll");
  EXPECT_EQ(b.schedules[1].every_s, 60u);
  EXPECT_EQ(b.schedules[1].cron, "");
  EXPECT_EQ(s.messenger.max_concurrent_sessions, 4u);
  EXPECT_EQ(s.messenger.max_pending, 0u);
  ASSERT_EQ(s.messenger.adapters.size(), 2u);
  auto& hook = s.messenger.adapters[0];
  EXPECT_EQ(hook.kind, adapter_kind::webhook);
  EXPECT_EQ(hook.channels, (std::vector<std::string>{"telegram", "slack"}));
  EXPECT_EQ(hook.url, "http://127.0.0.1:9999/notify");
  EXPECT_EQ(hook.token, "hook-t0ken");
  EXPECT_EQ(hook.timeout_ms, 250u);
  EXPECT_EQ(hook.retries, 0u);
  auto& box = s.messenger.adapters[1];
  EXPECT_EQ(box.kind, adapter_kind::outbox);
  EXPECT_EQ(box.channels, (std::vector<std::string>{"*"}));
  EXPECT_EQ(box.path, "/var/lib/butlers/outbox.jsonl");
  ASSERT_EQ(s.connectors.size(), 1u);
  EXPECT_EQ(s.connectors[0].name, "mail");
  EXPECT_EQ(s.connectors[0].type, connector_type::maildir);
  EXPECT_EQ(s.connectors[0].endpoint_identity, "me@example.org");
  EXPECT_EQ(s.connectors[0].path, "/var/mail/me");
  EXPECT_EQ(s.connectors[0].max_in_flight, 3u);
  EXPECT_FALSE(s.connectors[0].enabled);
  EXPECT_TRUE(s.cluster.active());
  EXPECT_FALSE(s.cluster.switchboard);
  EXPECT_EQ(s.cluster.quarantine_after_ms, 4000u);
  EXPECT_EQ(s.cluster.reconnect_cap_ms, 900u);
  EXPECT_EQ(s.cluster.bind, "10.0.0.1");
  EXPECT_EQ(s.cluster.port, 9001);
  EXPECT_EQ(s.cluster.peers.size(), 2u);
  EXPECT_EQ(s.cluster.heartbeat_interval_ms, 250u);
  EXPECT_EQ(s.cluster.connection_timeout_ms, 2500u);
  EXPECT_EQ(s.cluster.tls_certificate, "/etc/node.pem");
  EXPECT_EQ(s.cluster.tls_key, "/etc/node.key");
  EXPECT_EQ(s.cluster.tls_cafile, "/etc/ca.pem");
  EXPECT_EQ(s.scheduler.threads, 2u);
  EXPECT_EQ(s.scheduler.policy, scheduler_policy::sharing);
  EXPECT_EQ(s.scheduler.max_throughput, 100u);
  auto& r = s.router;
  EXPECT_EQ(r.kind, router_kind::cli);
  EXPECT_EQ(r.confidence_threshold, 0.75);
  EXPECT_EQ(r.family, cli_family::opencode);
  EXPECT_EQ(r.command,
            (std::vector<std::string>{"opencode", "run", "--model", "small"}));
  EXPECT_EQ(r.timeout_s, 30u);
  EXPECT_EQ(r.max_output_bytes, 65536u);
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[0].channels,
            (std::vector<std::string>{"telegram", "slack"}));
  EXPECT_EQ(r.rules[0].allow, (std::vector<std::string>{"general", "health"}));
  EXPECT_TRUE(r.rules[0].deny.empty());
  EXPECT_EQ(r.rules[1].channels, (std::vector<std::string>{"*"}));
  EXPECT_TRUE(r.rules[1].allow.empty());
  EXPECT_EQ(r.rules[1].deny, (std::vector<std::string>{"coder"}));
  ASSERT_EQ(s.policies.size(), 2u);
  EXPECT_EQ(s.policies[0].tier, "default");
  EXPECT_EQ(s.policies[0].wall_clock_s, 7200u);
  EXPECT_EQ(s.policies[0].max_invocations, 8u);
  EXPECT_EQ(s.policies[0].retry_max_attempts, 2u);
  EXPECT_EQ(s.policies[1].tier, "high_priority");
  EXPECT_EQ(s.policies[1].wall_clock_s, 3600u);
  EXPECT_EQ(s.policies[1].max_invocations, 16u);
  EXPECT_EQ(s.policies[1].retry_max_attempts, 3u);
  EXPECT_TRUE(validate_settings(s).empty()) << dump(validate_settings(s));
  // Positions are recorded by dotted key.
  EXPECT_EQ(s.positions.at("node.name").line, 3);
  EXPECT_EQ(s.positions.at("switchboard.max_in_progress").line, 43);
  EXPECT_EQ(s.positions.at("butler[1].name").line, 51);
  EXPECT_EQ(s.positions.at("butler[1].runtime.fail_rate").line, 65);
  EXPECT_EQ(s.positions.at("butler[1].schedule[1]").line, 78);
  EXPECT_EQ(s.positions.at("butler[1].schedule[1].every_s").line, 80);
  EXPECT_EQ(s.positions.at("messenger.adapter[1].path").line, 97);
  EXPECT_EQ(s.positions.at("router.kind").line, 128);
  EXPECT_EQ(s.positions.at("router.rule[1]").line, 137);
  EXPECT_EQ(s.positions.at("router.rule[1].deny").line, 138);
  EXPECT_EQ(s.positions.at("policy[1]").line, 145);
  EXPECT_EQ(s.positions.at("policy[1].tier").line, 146);
  EXPECT_EQ(s.positions.at("cluster.tls.ca").line, 120);
}

TEST(config, to_toml_parses_back_to_equal_settings) {
  auto res = parse_config(full_file, "full.toml");
  ASSERT_TRUE(res.settings) << dump(res.errors);
  auto s = *res.settings;
  s.http.token.clear(); // the secrets of full_file
  s.messenger.adapters[0].token.clear();
  auto text = to_toml(s);
  auto back = parse_config(text, "out.toml");
  ASSERT_TRUE(back.settings) << dump(back.errors) << text;
  EXPECT_EQ(*back.settings, s) << text;
  // And the defaults, too.
  auto defaults = parse_config(to_toml(node_settings{}), "defaults.toml");
  ASSERT_TRUE(defaults.settings) << dump(defaults.errors);
  EXPECT_EQ(*defaults.settings, node_settings{});
}

TEST(config, to_toml_redacts_secrets) {
  node_settings s;
  s.http.token = "sup3rsecret";
  s.messenger.adapters.emplace_back();
  s.messenger.adapters[0].kind = adapter_kind::webhook;
  s.messenger.adapters[0].url = "http://hooks.local/n";
  s.messenger.adapters[0].token = "hunter4";
  s.database.url = "postgresql://bob:hunter2@db:5432/butlers?password=hunter3"
                   "&sslmode=require";
  auto text = to_toml(s);
  EXPECT_FALSE(contains(text, "sup3rsecret")) << text;
  EXPECT_FALSE(contains(text, "hunter2")) << text;
  EXPECT_FALSE(contains(text, "hunter3")) << text;
  EXPECT_FALSE(contains(text, "hunter4")) << text;
  auto back = parse_config(text, "out.toml");
  ASSERT_TRUE(back.settings) << dump(back.errors) << text;
  EXPECT_EQ(back.settings->http.token, "***");
  EXPECT_EQ(back.settings->database.url,
            "postgresql://bob:***@db:5432/butlers?password=***"
            "&sslmode=require");
  // Everything but the redacted fields is equal.
  auto expected = s;
  expected.http.token = "***";
  expected.messenger.adapters[0].token = "***";
  expected.database.url = back.settings->database.url;
  EXPECT_EQ(*back.settings, expected);
}

TEST(config, redacts_key_value_database_urls) {
  EXPECT_EQ(redact_database_url("host=db password=hunter2 dbname=b"),
            "host=db password=*** dbname=b");
  EXPECT_EQ(redact_database_url("host=db password = 'a \\' b' dbname=b"),
            "host=db password=*** dbname=b");
  EXPECT_EQ(redact_database_url("postgresql://bob@db/butlers"),
            "postgresql://bob@db/butlers");
  EXPECT_EQ(redact_database_url("postgres://u:p@h"), "postgres://u:***@h");
  EXPECT_EQ(redact_database_url("postgresql:///butlers?host=/tmp/pg"),
            "postgresql:///butlers?host=/tmp/pg");
  EXPECT_EQ(redact_database_url(""), "");
}

// -- errors: one table of cases -----------------------------------------------

namespace {

/// What one reported error must look like; unset parts are not checked.
struct want {
  /// Dotted key of the error (how unordered cases find it).
  std::string key;
  /// The exact message.
  std::string message;
  /// Parts the message must contain.
  std::vector<std::string> parts;
  /// A part the message must not contain.
  std::string missing_part;
  /// Line and column, when not 0.
  int64_t line = 0;
  int64_t column = 0;
  /// The exact rendering, "FILE:LINE:COL: KEY: MESSAGE".
  std::string text;

  want is(std::string m) const {
    auto w = *this;
    w.message = std::move(m);
    return w;
  }
  want has(std::string part) const {
    auto w = *this;
    w.parts.push_back(std::move(part));
    return w;
  }
  want lacks(std::string part) const {
    auto w = *this;
    w.missing_part = std::move(part);
    return w;
  }
  want at(int64_t l, int64_t c = 0) const {
    auto w = *this;
    w.line = l;
    w.column = c;
    return w;
  }
  want reads(std::string t) const {
    auto w = *this;
    w.text = std::move(t);
    return w;
  }
};

want err(std::string key) {
  want w;
  w.key = std::move(key);
  return w;
}

/// A configuration and the errors it must give: from parse_config alone, or
/// (`validating`) from validate_settings after a clean parse.
struct error_case {
  /// Test name; reads as a sentence.
  std::string name;
  bool validating = false;
  std::string toml;
  /// Exactly this many errors.
  size_t count = 0;
  /// Errors to check: by position in the sorted list when `in_order`, else
  /// by key.
  std::vector<want> errors;
  bool in_order = false;
  /// Keys that must not be reported.
  std::vector<std::string> not_reported;
};

error_case parsing(std::string name, std::string toml, size_t count,
                   std::vector<want> errors = {}) {
  return {std::move(name), false, std::move(toml), count, std::move(errors),
          false,           {}};
}

error_case validating(std::string name, std::string toml, size_t count,
                      std::vector<want> errors = {}) {
  return {std::move(name), true, std::move(toml), count, std::move(errors),
          false,           {}};
}

error_case in_order(error_case c) {
  c.in_order = true;
  return c;
}

error_case without(error_case c, std::vector<std::string> keys) {
  c.not_reported = std::move(keys);
  return c;
}

void check(const config_error& e, const want& w) {
  EXPECT_EQ(e.file, "node.toml");
  EXPECT_EQ(e.key, w.key) << e.to_string();
  if (!w.message.empty()) {
    EXPECT_EQ(e.message, w.message);
  }
  for (auto& part : w.parts) {
    EXPECT_TRUE(contains(e.message, part)) << e.message;
  }
  if (!w.missing_part.empty()) {
    EXPECT_FALSE(contains(e.message, w.missing_part)) << e.message;
  }
  if (w.line > 0) {
    EXPECT_EQ(e.line, w.line) << e.to_string();
  }
  if (w.column > 0) {
    EXPECT_EQ(e.column, w.column) << e.to_string();
  }
  if (!w.text.empty()) {
    EXPECT_EQ(e.to_string(), w.text);
  }
}

class config_errors : public testing::TestWithParam<error_case> {};

TEST_P(config_errors, are_reported_with_key_position_and_message) {
  auto& c = GetParam();
  auto res = parse_config(c.toml, "node.toml");
  EXPECT_EQ(res.settings.has_value(), res.errors.empty());
  auto errors = res.errors;
  if (c.validating) {
    ASSERT_TRUE(res.settings) << dump(res.errors);
    errors = validate_settings(*res.settings);
  }
  ASSERT_EQ(errors.size(), c.count) << dump(errors);
  for (size_t i = 0; i < c.errors.size(); ++i) {
    auto& w = c.errors[i];
    SCOPED_TRACE(w.key);
    if (c.in_order) {
      check(errors[i], w);
    } else {
      auto e = find(errors, w.key);
      ASSERT_TRUE(e) << dump(errors);
      check(*e, w);
    }
  }
  for (auto& key : c.not_reported)
    EXPECT_FALSE(find(errors, key)) << dump(errors);
}

const error_case error_cases[] = {
  // -- unknown keys and tables
  parsing("unknown_key_names_line_key_and_hint", "[http]\nport = 1\nprot = 1\n",
          1,
          {err("http.prot")
             .at(3, 1)
             .has("unknown key")
             .has("did you mean 'port'?")
             .reads("node.toml:3:1: http.prot: unknown key; did you mean "
                    "'port'?")}),
  parsing("unknown_key_far_from_everything_has_no_hint", "[http]\nzzzzzz = 1\n",
          1, {err("http.zzzzzz").lacks("did you mean")}),
  parsing("unknown_table", "[node]\nname = \"a\"\n\n[htp]\nport = 1\n", 1,
          {err("htp").at(4).has("unknown table").has("did you mean 'http'?")}),
  parsing("unknown_array_of_tables", "[[butlers]]\nname = \"a\"\n", 1,
          {err("butlers").at(1).is("unknown table; did you mean 'butler'?")}),
  parsing("unknown_nested_table", "[http]\n[http.tls]\ncert = 1\n", 1,
          {err("http.tls").at(2)}),
  in_order(parsing("unknown_keys_inside_a_butler_are_numbered", R"([[butler]]
name = "general"

[[butler]]
name = "health"
xyz = 1
max_concurent_sessions = 2
)",
                   2,
                   {err("butler[1].xyz").at(6),
                    err("butler[1].max_concurent_sessions")
                      .at(7)
                      .has("did you mean 'max_concurrent_sessions'?")})),
  parsing("unknown_key_inside_butler_runtime", R"([[butler]]
name = "a"
[butler.runtime]
kind = "scripted"
turn_m = 5
)",
          1,
          {err("butler[0].runtime.turn_m")
             .reads("node.toml:5:1: butler[0].runtime.turn_m: unknown key; "
                    "did you mean 'turn_ms'?")}),
  // -- types
  parsing("wrong_type_names_expected_type", "[http]\n\nport = \"8470\"\n", 1,
          {err("http.port")
             .at(3)
             .is("expected integer, got string")
             .has("expected integer, got string")}),
  parsing("wrong_types_of_other_kinds", R"(http = 5
[switchboard]
enabled = "yes"
[[butler]]
name = "a"
keywords = "x"
[[butler]]
name = "b"
keywords = ["x", 2]
)",
          4,
          {err("http").is("expected table, got integer"),
           err("switchboard.enabled").is("expected boolean, got string"),
           err("butler[0].keywords")
             .is("expected array of strings, got "
                 "string"),
           err("butler[1].keywords[1]").at(9)}),
  parsing("butler_must_be_an_array_of_tables", "[butler]\nname = \"a\"\n", 1,
          {err("butler").has("[[butler]]")}),
  in_order(parsing("schedules_and_adapters_must_be_arrays_of_tables",
                   R"([[butler]]
name = "a"
[butler.schedule]
name = "s"
[messenger]
adapter = 1
)",
                   2,
                   {err("butler[0].schedule")
                      .is("expected array of tables ([[butler.schedule]]), "
                          "got table"),
                    err("messenger.adapter")
                      .is("expected array of tables ([[messenger.adapter]]), "
                          "got integer")})),
  parsing("router_must_be_a_table", "router = \"cli\"\n", 1,
          {err("router").is("expected table, got string; the router is the "
                            "table [router], its choice of router is "
                            "`kind`")}),
  in_order(parsing("router_rules_and_policies_must_be_arrays_of_tables",
                   "[router.rule]\ndeny = [\"a\"]\n[policy]\ntier = "
                   "\"default\"\n",
                   2,
                   {err("router.rule")
                      .is("expected array of tables "
                          "([[router.rule]]), got table"),
                    err("policy").is("expected array of tables ([[policy]]), "
                                     "got table")})),
  // -- values
  in_order(
    parsing("out_of_range_names_the_range",
            "[http]\nport = 70000\n[database]\npool_size = 0\n", 2,
            {err("http.port").at(2).is("must be in 0..65535, got 70000"),
             err("database.pool_size").at(4).is("must be in 1..64, got 0")})),
  parsing("database_lanes_below_range", "[database]\nlanes = 0\n", 1,
          {err("database.lanes")}),
  parsing("database_lanes_above_range", "[database]\nlanes = 17\n", 1,
          {err("database.lanes")}),
  parsing("bad_enumeration_lists_choices", "[node]\nlog_level = \"wran\"\n", 1,
          {err("node.log_level")
             .has("trace, debug, info, warn, error")
             .has("did you mean 'warn'?")}),
  in_order(parsing("butler_name_is_required_and_checked", R"([[butler]]
description = "nameless"
[[butler]]
name = "Health Butler"
[[connector]]
name = "api"
)",
                   3,
                   {err("butler[0].name").at(1).is("missing required key"),
                    err("butler[1].name").at(4),
                    err("connector[0].type").is("missing required key")})),
  in_order(parsing("bad_peer_address",
                   "[cluster]\npeers = [\"a:1\", \"nohost\", \"b:0\"]\n", 2,
                   {err("cluster.peers[1]"), err("cluster.peers[2]")})),
  in_order(
    parsing("several_errors_at_once_are_sorted_by_position", R"([node]
log_level = 3

[http]
prot = 1
threads = 0

[[butler]]
name = "a"
[butler.runtime]
kind = "ssh"

[bogus]
)",
            5,
            {err("node.log_level").at(2), err("http.prot").at(5),
             err("http.threads").at(6), err("butler[0].runtime.kind").at(11),
             err("bogus").at(13)})),
  parsing("runtime_value_errors", R"([[butler]]
name = "a"
[butler.runtime]
fail_rate = 1.5
fail_class = "timout"
family = "gemini"
prompt_via = "file"
turns = 0
max_output_bytes = 100
seed = -1
[[butler]]
name = "b"
[butler.runtime]
fail_rate = nan
fail_class = "draining"
)",
          9,
          {err("butler[0].runtime.fail_rate")
             .reads("node.toml:4:13: butler[0].runtime.fail_rate: must be in "
                    "0.0..1.0, got 1.5"),
           err("butler[0].runtime.fail_class")
             .at(5)
             .is("must be one of classification_error, validation_error, "
                 "routing_error, target_unavailable, timeout, "
                 "overload_rejected, internal_error, got 'timout'; did you "
                 "mean 'timeout'?"),
           err("butler[0].runtime.family").has("claude, codex, opencode"),
           err("butler[0].runtime.prompt_via"), err("butler[0].runtime.turns"),
           err("butler[0].runtime.max_output_bytes"),
           err("butler[0].runtime.seed"),
           // nan is out of every range; internal codes are not taxonomy
           // classes.
           err("butler[1].runtime.fail_rate"),
           err("butler[1].runtime.fail_class")}),
  parsing("a_messenger_runtime_kind_is_not_accepted_from_a_file", R"([[butler]]
name = "a"
[butler.runtime]
kind = "delivery"
)",
          1,
          {err("butler[0].runtime.kind")
             .is("must be one of scripted, cli, openai, anthropic, external, "
                 "got 'delivery'")}),
  validating("an_external_visibility_must_be_below_the_session_timeout",
             R"([[butler]]
name = "a"
session_timeout_s = 10
[butler.runtime]
kind = "external"
visibility_ms = 10000
max_deliveries = 3
)",
             1,
             {err("butler[0].runtime.visibility_ms")
                .is("must be below session_timeout_s (10 s): an item that "
                    "waits and runs on workers longer ends with a timeout")}),
  without(parsing("butler_list_values_are_checked", R"([[butler]]
name = "a"
triggers = [""]
capabilities = ["route.execute", "Route.Execute", "route..x", "route.x-y"]
lease_s = 1
)",
                  5,
                  {err("butler[0].triggers[0]"),
                   err("butler[0].capabilities[1]")
                     .has("^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$"),
                   err("butler[0].capabilities[2]"),
                   err("butler[0].capabilities[3]"),
                   err("butler[0].lease_s").is("must be in 2..86400, got 1")}),
          {"butler[0].capabilities[0]"}),
  parsing("schedule_values_are_checked", R"([[butler]]
name = "a"
[[butler.schedule]]
every_s = 0
prompt = ""
[[butler.schedule]]
name = "b"
cron = "0 3 * *"
prompt = "x"
evry_s = 5
)",
          5,
          {err("butler[0].schedule[0].name").is("missing required key").at(3),
           err("butler[0].schedule[0].every_s")
             .is("must be in 1..31536000, got 0"),
           err("butler[0].schedule[0].prompt"),
           err("butler[0].schedule[1].cron")
             .reads("node.toml:8:8: butler[0].schedule[1].cron: expected five "
                    "fields (minute hour day-of-month month day-of-week), got "
                    "4 in '0 3 * *'"),
           err("butler[0].schedule[1].evry_s").has("did you mean 'every_s'?")}),
  parsing("messenger_value_errors", R"([messenger]
max_concurrent_sessions = 0
max_pendng = 5
[[messenger.adapter]]
kind = "pigeon"
[[messenger.adapter]]
kind = "webhook"
url = "ftp://hooks.example/notify"
channels = ["telegram", "sms"]
[[messenger.adapter]]
kind = "webhook"
url = "hooks.example/notify"
retries = 101
)",
          7,
          {err("messenger.max_concurrent_sessions"),
           err("messenger.max_pendng").has("did you mean 'max_pending'?"),
           err("messenger.adapter[0].kind")
             .is("must be one of webhook, outbox, telegram, smtp, slack, "
                 "got 'pigeon'"),
           err("messenger.adapter[1].url")
             .reads("node.toml:8:7: messenger.adapter[1].url: unsupported "
                    "scheme 'ftp' (only http:// and https:// are)"),
           err("messenger.adapter[1].channels[1]")
             .is("must be one of *, telegram, slack, email, api, mcp, got "
                 "'sms'"),
           err("messenger.adapter[2].url")
             .is("URL 'hooks.example/notify' has no scheme (expected http:// "
                 "or https://)"),
           err("messenger.adapter[2].retries")}),
  parsing("smtp_adapter_value_errors", R"([[messenger.adapter]]
kind = "smtp"
url = "smtp://"
from = "not an address"
username_env = "1BAD"
[[messenger.adapter]]
kind = "smtp"
url = "smtps://relay.example:0"
from = "Butlers <butlers@example.org>"
password_env = "MY-PASS"
)",
          5,
          {err("messenger.adapter[0].url")
             .is("expected smtp://HOST[:PORT] or smtps://HOST[:PORT] "
                 "(credentials come from the environment), got 'smtp://'"),
           err("messenger.adapter[0].from")
             .is("expected a mail address such as butlers@example.org or "
                 "\"Butlers <butlers@example.org>\", got 'not an address'"),
           err("messenger.adapter[0].username_env")
             .is("must be an environment variable name "
                 "([A-Za-z_][A-Za-z0-9_]*), got '1BAD'"),
           err("messenger.adapter[1].url")
             .is("port of 'smtps://relay.example:0' must be in 1..65535"),
           err("messenger.adapter[1].password_env")}),
  parsing("adapter_kind_is_required", "[[messenger.adapter]]\npath = \"x\"\n",
          1, {err("messenger.adapter[0].kind").is("missing required key")}),
  parsing("switchboard_routing_value_errors", R"([switchboard]
route_timeout_s = 0
retry_base_ms = 600001
retry_cap_ms = 0
circuit_failure_threshold = 1001
circuit_open_s = 3601
fanout_mode = "paralel"
max_in_progress = 0
retry_capms = 5
)",
          8,
          {err("switchboard.route_timeout_s")
             .reads("node.toml:2:19: switchboard.route_timeout_s: must be in "
                    "1..86400, got 0"),
           err("switchboard.retry_base_ms")
             .is("must be in 1..600000, got "
                 "600001"),
           err("switchboard.retry_cap_ms").is("must be in 1..600000, got 0"),
           err("switchboard.circuit_failure_threshold")
             .is("must be in 1..1000, got 1001"),
           err("switchboard.circuit_open_s").is("must be in 1..3600, got 3601"),
           err("switchboard.fanout_mode")
             .is("must be one of parallel, ordered, conditional, got "
                 "'paralel'; did you mean 'parallel'?"),
           err("switchboard.max_in_progress")
             .is("must be in 1..1000000, got 0"),
           err("switchboard.retry_capms")
             .is("unknown key; did you mean 'retry_cap_ms'?")}),
  parsing("router_value_errors", R"([router]
kind = "rule"
confidence_threshold = 1.5
family = "gemini"
command = "claude -p"
timeout_s = 0
max_output_bytes = 100
kinds = "cli"
[[router.rule]]
channels = ["telegram", "sms"]
allow = ["general", "Health"]
deny = ["a b"]
alow = ["x"]
)",
          11,
          {err("router.kind")
             .is("must be one of rules, cli, got 'rule'; did "
                 "you mean 'rules'?"),
           err("router.confidence_threshold")
             .reads("node.toml:3:24: router.confidence_threshold: must be in "
                    "0.0..1.0, got 1.5"),
           err("router.family")
             .is("must be one of claude, codex, opencode, got 'gemini'"),
           err("router.command").is("expected array of strings, got string"),
           err("router.timeout_s").is("must be in 1..3600, got 0"),
           err("router.max_output_bytes")
             .is("must be in 1024..67108864, got "
                 "100"),
           err("router.kinds").is("unknown key; did you mean 'kind'?"),
           err("router.rule[0].channels[1]")
             .reads("node.toml:10:25: router.rule[0].channels[1]: must be one "
                    "of *, telegram, slack, email, api, mcp, got 'sms'"),
           err("router.rule[0].allow[1]")
             .is("must match ^[a-z][a-z0-9_-]{0,63}$, got 'Health'"),
           err("router.rule[0].deny[0]"),
           err("router.rule[0].alow")
             .is("unknown key; did you mean "
                 "'allow'?")}),
  parsing("router_family_is_checked_for_a_cli_router",
          "[router]\nkind = \"cli\"\nfamily = \"claud\"\n", 1,
          {err("router.family")
             .reads("node.toml:3:10: router.family: must be one of claude, "
                    "codex, opencode, got 'claud'; did you mean 'claude'?")}),
  parsing("router_family_is_checked_for_a_rules_router_too",
          "[router]\nkind = \"rules\"\nfamily = \"claud\"\n", 1,
          {err("router.family")
             .reads("node.toml:3:10: router.family: must be one of claude, "
                    "codex, opencode, got 'claud'; did you mean 'claude'?")}),
  parsing("policy_value_errors", R"([[policy]]
wall_clock_s = 0
[[policy]]
tier = "low"
max_invocations = 10001
retry_max_attempts = 0
[[policy]]
tier = "interactive"
wall_clock_s = 604801
retry_max_attempt = 2
)",
          7,
          {err("policy[0].tier").at(1).is("missing required key"),
           err("policy[0].wall_clock_s").is("must be in 1..604800, got 0"),
           err("policy[1].tier")
             .reads("node.toml:4:8: policy[1].tier: must be one of default, "
                    "interactive, high_priority, got 'low'"),
           err("policy[1].max_invocations")
             .is("must be in 1..10000, got "
                 "10001"),
           err("policy[1].retry_max_attempts").is("must be in 1..100, got 0"),
           err("policy[2].wall_clock_s"),
           err("policy[2].retry_max_attempt")
             .is("unknown key; did you mean 'retry_max_attempts'?")}),
  // -- keys that moved say where they went
  in_order(parsing("old_butler_runtime_and_command_keys_say_where_they_went",
                   R"([[butler]]
name = "a"
runtime = "cli"
command = ["claude", "-p"]
)",
                   2,
                   {err("butler[0].runtime")
                      .at(3)
                      .is("expected table, got string; the runtime is the "
                          "table [butler.runtime], its adapter is `kind`"),
                    err("butler[0].command")
                      .at(4)
                      .is("unknown key; it is now a key of "
                          "[butler.runtime]")})),
  parsing("old_switchboard_router_key_says_where_it_went",
          "[switchboard]\nworkers = 2\nrouter = \"cli\"\n", 1,
          {err("switchboard.router")
             .reads("node.toml:3:1: switchboard.router: unknown key; it is "
                    "now [router] kind")}),
  in_order(parsing("old_cluster_keys_say_where_they_went",
                   "[cluster]\nenabled = true\ntls_cafile = \"x\"\n", 2,
                   {err("cluster.enabled")
                      .is("unknown key; clustering is on when cluster.port or "
                          "cluster.peers is set"),
                    err("cluster.tls_cafile")
                      .is("unknown key; it is now `ca` of [cluster.tls]")})),
  // -- checks across keys
  validating("duplicate_butler_name", R"([[butler]]
name = "general"

[[butler]]
name = "health"

[[butler]]
name = "general"
)",
             1,
             {err("butler[2].name")
                .at(8)
                .has("duplicate butler name 'general'")
                .has("butler[0], line 2")}),
  validating("non_loopback_bind_requires_token",
             "[http]\nport = 1\nbind = \"0.0.0.0\"\n", 1,
             {err("http.bind")
                .at(3)
                .is("binding a non-loopback address "
                    "requires http.token or an [[http.credential]]")}),
  validating("credentials_keep_to_the_keys_of_their_role",
             "[http]\nbind = \"0.0.0.0\"\n"
             "[[http.credential]]\nname = \"w\"\nrole = \"worker\"\n"
             "token_sha256 = \""
               + std::string(64, 'a')
               + "\"\n"
                 "sender = \"x\"\n"
                 "[[http.credential]]\nname = \"w\"\nrole = \"thread\"\n"
                 "token_sha256 = \""
               + std::string(64, 'b')
               + "\"\n"
                 "thread_id = \"t\"\nsender = \"x\"\n",
             4,
             {err("http.credential[0].butler")
                .at(3)
                .is("a worker credential names its butler"),
              err("http.credential[0].sender")
                .at(7)
                .is("only a credential of role thread takes sender"),
              err("http.credential[1].name")
                .at(9)
                .is("duplicate credential name 'w' (first in "
                    "http.credential[0], line 4)"),
              err("http.credential[1].sender")
                .at(13)
                .is("a thread credential takes thread_id or sender, not "
                    "both")}),
  validating("other_cross_field_checks", R"([[butler]]
name = "coder"
[butler.runtime]
kind = "cli"
command = ["", "-p"]
[[butler]]
name = "far"
node = "elsewhere"
[[connector]]
name = "box"
type = "maildir"
[[connector]]
name = "box"
type = "jsonl"
path = "/tmp/x.jsonl"
[cluster.tls]
key = "/k"
)",
             7,
             {err("butler[0].runtime.command").at(5), err("butler[1].node"),
              err("connector[0].path"),
              err("connector[0].endpoint_identity")
                .is("a 'maildir' connector requires an endpoint_identity"),
              err("connector[1].name"), err("cluster.tls.cert"),
              err("cluster.tls.ca")
                .is("missing: [cluster.tls] needs cert, "
                    "key and ca (mutual authentication)")}),
  validating("cluster_without_tls_binds_loopback_only",
             "[cluster]\nport = 4710\nbind = \"0.0.0.0\"\n", 1,
             {err("cluster.bind")
                .at(3)
                .is("binding a non-loopback address ('0.0.0.0') requires "
                    "[cluster.tls] with cert, key and ca")}),
  validating("cluster_with_tls_may_bind_anywhere",
             "[cluster]\nport = 4710\nbind = \"0.0.0.0\"\n"
             "[cluster.tls]\ncert = \"c\"\nkey = \"k\"\nca = \"a\"\n",
             0),
  validating("butler_only_node_needs_the_cluster",
             "[cluster]\nswitchboard = false\n", 1,
             {err("cluster.switchboard")}),
  validating("hosted_butlers_must_exist",
             "[cluster]\nport = 4710\nbutlers = [\"general\", \"nope\"]\n", 1,
             {err("cluster.butlers[1]").is("no [[butler]] named 'nope'")}),
  validating("schedule_with_both_every_s_and_cron", R"([[butler]]
name = "a"
[[butler.schedule]]
name = "s"
every_s = 60
cron = "*/5 * * * *"
prompt = "x"
)",
             1,
             {err("butler[0].schedule[0].cron")
                .reads("node.toml:6:1: butler[0].schedule[0].cron: set "
                       "together with every_s; a schedule has exactly one of "
                       "every_s and cron")}),
  validating("schedule_with_neither_every_s_nor_cron", R"([[butler]]
name = "a"

[[butler.schedule]]
name = "s"
prompt = "x"
)",
             1,
             {err("butler[0].schedule[0]")
                .at(4)
                .is("has neither every_s nor cron; a schedule has exactly "
                    "one")}),
  validating("duplicate_schedule_name_within_a_butler", R"([[butler]]
name = "a"
[[butler.schedule]]
name = "daily"
every_s = 86400
prompt = "x"
[[butler.schedule]]
name = "daily"
cron = "0 0 * * *"
prompt = "y"
[[butler]]
name = "b"
[[butler.schedule]]
name = "daily"
every_s = 86400
prompt = "x"
)",
             1,
             {err("butler[0].schedule[1].name")
                .at(8)
                .is("duplicate schedule name 'daily' (first in "
                    "butler[0].schedule[0], line 4)")}),
  validating("butler_named_messenger_is_an_error_general_is_not",
             R"([[butler]]
name = "general"
[[butler]]
name = "messenger"
)",
             1,
             {err("butler[1].name")
                .reads("node.toml:4:1: butler[1].name: messenger is "
                       "configured under [messenger], not as a [[butler]]")}),
  in_order(validating("adapter_required_fields", R"([messenger]
[[messenger.adapter]]
kind = "webhook"
[[messenger.adapter]]
kind = "outbox"
[[messenger.adapter]]
kind = "outbox"
path = "out.jsonl"
channels = []
)",
                      3,
                      {err("messenger.adapter[0].url")
                         .reads("node.toml:3:1: messenger.adapter[0].url: a "
                                "'webhook' adapter requires a url"),
                       err("messenger.adapter[1].path")
                         .reads("node.toml:5:1: messenger.adapter[1].path: an "
                                "'outbox' adapter requires a path"),
                       err("messenger.adapter[2].channels")})),
  in_order(validating("smtp_adapter_required_fields", R"([messenger]
[[messenger.adapter]]
kind = "smtp"
[[messenger.adapter]]
kind = "smtp"
url = "https://hooks.example/n"
from = "b@example.org"
[[messenger.adapter]]
kind = "webhook"
url = "smtp://relay.example"
)",
                      4,
                      {err("messenger.adapter[0].url")
                         .reads("node.toml:3:1: messenger.adapter[0].url: an "
                                "'smtp' adapter requires a url"),
                       err("messenger.adapter[0].from")
                         .reads("node.toml:3:1: messenger.adapter[0].from: an "
                                "'smtp' adapter requires from"),
                       err("messenger.adapter[1].url")
                         .reads("node.toml:6:1: messenger.adapter[1].url: an "
                                "'smtp' adapter needs an smtp:// or smtps:// "
                                "url"),
                       err("messenger.adapter[2].url")
                         .reads("node.toml:10:1: messenger.adapter[2].url: a "
                                "'webhook' adapter needs an http:// or "
                                "https:// url")})),
  in_order(validating("telegram_connectors_need_their_secrets", R"([[connector]]
name = "hook"
type = "telegram"
endpoint_identity = "bot"
[[connector]]
name = "poller"
type = "telegram"
mode = "poll"
endpoint_identity = "bot"
[[connector]]
name = "bad-secret"
type = "telegram"
endpoint_identity = "bot"
secret_token = "has spaces"
[[connector]]
name = "nobody"
type = "telegram"
secret_token = "ok"
[[connector]]
name = "off"
type = "telegram"
enabled = false
endpoint_identity = "bot"
)",
                      4,
                      {err("connector[0].secret_token")
                         .reads("node.toml:3:1: connector[0].secret_token: a "
                                "telegram webhook connector requires a "
                                "secret_token (or "
                                "BUTLERS_CONNECTOR_HOOK_SECRET_TOKEN); pass "
                                "the same value to setWebhook"),
                       err("connector[1].token")
                         .at(8)
                         .has("BUTLERS_CONNECTOR_POLLER_TOKEN"),
                       err("connector[2].secret_token")
                         .at(14)
                         .has("A-Z, a-z, 0-9, _ and -"),
                       err("connector[3].endpoint_identity")
                         .has("requires an endpoint_identity")})),
  validating("telegram_webhook_needs_the_http_server", R"([http]
enabled = false
[[connector]]
name = "hook"
type = "telegram"
endpoint_identity = "bot"
secret_token = "abc"
)",
             1, {err("connector[0].mode").has("requires http.enabled = true")}),
  parsing("connector_api_base_is_an_http_url", R"([[connector]]
name = "t"
type = "telegram"
mode = "poll"
token = "1:x"
endpoint_identity = "bot"
api_base = "ftp://x/"
)",
          1, {err("connector[0].api_base").has("expected http://")}),
  validating("router_command_needs_a_program", R"([router]
kind = "cli"
command = ["", "-p"]
)",
             1,
             {err("router.command")
                .reads("node.toml:3:1: router.command: the program (the first "
                       "element) must not be empty")}),
  validating("retry_base_must_not_exceed_retry_cap", R"([switchboard]
retry_base_ms = 5000
retry_cap_ms = 4000
)",
             1,
             {err("switchboard.retry_base_ms")
                .reads("node.toml:2:1: switchboard.retry_base_ms: must not "
                       "exceed switchboard.retry_cap_ms (5000 > 4000)")}),
  validating("retry_base_may_equal_retry_cap",
             "[switchboard]\nretry_base_ms = 700\nretry_cap_ms = 700\n", 0),
  // The cap's line, since the base was not written.
  validating("retry_cap_below_the_default_base",
             "[switchboard]\nretry_cap_ms = 100\n", 1,
             {err("switchboard.retry_base_ms").at(2)}),
  validating("collect_max_must_be_at_least_collect", R"([threads]
collect_ms = 3000
collect_max_ms = 2500
)",
             1,
             {err("threads.collect_max_ms")
                .reads("node.toml:3:1: threads.collect_max_ms: must be at "
                       "least threads.collect_ms (2500 < 3000)")}),
  // The default collect_max_ms (2000) is below collect_ms: named at the
  // line of collect_ms.
  validating("collect_above_the_default_collect_max",
             "[threads]\ncollect_ms = 2500\n", 1,
             {err("threads.collect_max_ms").at(2)}),
  validating("collect_may_equal_collect_max",
             "[threads]\ncollect_ms = 500\ncollect_max_ms = 500\n", 0),
  validating("duplicate_policy_tier", R"([[policy]]
tier = "interactive"
[[policy]]
tier = "default"
[[policy]]
tier = "interactive"
max_invocations = 4
)",
             1,
             {err("policy[2].tier")
                .reads("node.toml:6:1: policy[2].tier: duplicate policy tier "
                       "'interactive' (first in policy[0], line 2)")}),
  in_order(validating("rule_allowing_and_denying_a_butler", R"([router]
[[router.rule]]
allow = ["general", "health"]
[[router.rule]]
channels = ["email"]
allow = ["general", "health", "coder"]
deny = ["coder", "general", "coder", "finance"]
[[router.rule]]
channels = []
deny = ["finance"]
)",
                      3,
                      {err("router.rule[1].deny")
                         .reads("node.toml:7:1: router.rule[1].deny: 'coder' "
                                "is both allowed and denied by this rule"),
                       err("router.rule[1].deny")
                         .reads("node.toml:7:1: router.rule[1].deny: "
                                "'general' is both allowed and denied by this "
                                "rule"),
                       err("router.rule[2].channels")
                         .reads("node.toml:9:1: router.rule[2].channels: "
                                "applies to no channel; [\"*\"] means every "
                                "channel")})),
};

INSTANTIATE_TEST_SUITE_P(config, config_errors, testing::ValuesIn(error_cases),
                         [](const testing::TestParamInfo<error_case>& info) {
                           return info.param.name;
                         });

} // namespace

// -- errors that need more than the table
// --------------------------------------

TEST(config, syntax_error_names_line) {
  auto res = parse_config("[http]\nport = 1\nbind = \n", "node.toml");
  EXPECT_FALSE(res.settings);
  ASSERT_EQ(res.errors.size(), 1u) << dump(res.errors);
  EXPECT_EQ(res.errors[0].file, "node.toml");
  EXPECT_EQ(res.errors[0].line, 3);
  EXPECT_GT(res.errors[0].column, 0);
  EXPECT_EQ(res.errors[0].key, "");
  EXPECT_TRUE(contains(res.errors[0].to_string(), "node.toml:3:"));
}

TEST(config, token_from_the_environment_satisfies_the_bind_check) {
  auto res = parse_config("[http]\nport = 1\nbind = \"0.0.0.0\"\n",
                          "node.toml");
  ASSERT_TRUE(res.settings) << dump(res.errors);
  // Without it: config_errors.non_loopback_bind_requires_token.
  ASSERT_EQ(validate_settings(*res.settings).size(), 1u);
  auto s = *res.settings;
  EXPECT_TRUE(
    apply_env_overrides(s, fake_env({{"BUTLERS_HTTP_TOKEN", "x"}})).empty());
  EXPECT_TRUE(validate_settings(s).empty());
}

TEST(config, loopback_addresses) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.1.2.3"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_TRUE(is_loopback("[::1]"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("128.0.0.1"));
  EXPECT_FALSE(is_loopback("127.0.0"));
  EXPECT_FALSE(is_loopback("127.0.0.1.5"));
  EXPECT_FALSE(is_loopback("127.0.0.256"));
  EXPECT_FALSE(is_loopback("::"));
  EXPECT_FALSE(is_loopback("example.org"));
  EXPECT_FALSE(is_loopback(""));
}

// -- [[butler]] runtime and schedules, [messenger] ---------------------------

TEST(config, health_example_parses) {
  auto res = parse_config(health_example, "node.toml");
  ASSERT_TRUE(res.settings) << dump(res.errors);
  EXPECT_TRUE(validate_settings(*res.settings).empty());
  butler_config expected;
  expected.name = "health";
  expected.description = "Medication, symptoms, appointments";
  expected.triggers = {"the user talks about their health or medication"};
  expected.keywords = {"pill", "medication", "doctor"};
  expected.max_concurrent_sessions = 1;
  expected.max_pending = 100;
  expected.session_timeout_s = 1800;
  expected.runtime.kind = runtime_kind::scripted;
  expected.runtime.turn_ms = 200;
  expected.runtime.turns = 1;
  expected.runtime.fail_rate = 0.0;
  expected.runtime.fail_class = butlers_errc::timeout;
  ASSERT_EQ(res.settings->butlers.size(), 1u);
  EXPECT_EQ(res.settings->butlers[0], expected);
  EXPECT_EQ(res.settings->positions.at("butler[0].runtime").line, 9);
  EXPECT_EQ(res.settings->positions.at("butler[0].runtime.fail_class").line,
            14);
}

TEST(config, butler_defaults) {
  auto res = parse_config("[[butler]]\nname = \"x\"\n[messenger]\n"
                          "[[messenger.adapter]]\nkind = \"outbox\"\n"
                          "path = \"o.jsonl\"\n",
                          "node.toml");
  ASSERT_TRUE(res.settings) << dump(res.errors);
  ASSERT_EQ(res.settings->butlers.size(), 1u);
  auto& b = res.settings->butlers[0];
  EXPECT_TRUE(b.triggers.empty());
  EXPECT_EQ(b.capabilities, (std::vector<std::string>{"route.execute"}));
  EXPECT_EQ(b.max_concurrent_sessions, 1u);
  EXPECT_EQ(b.max_pending, 100u);
  EXPECT_EQ(b.session_timeout_s, 600u);
  EXPECT_EQ(b.lease_s, 30u);
  EXPECT_TRUE(b.schedules.empty());
  auto& rt = b.runtime;
  EXPECT_EQ(rt.kind, runtime_kind::scripted);
  EXPECT_EQ(rt.turn_ms, 200u);
  EXPECT_EQ(rt.turns, 1u);
  EXPECT_EQ(rt.fail_rate, 0.0);
  EXPECT_EQ(rt.fail_class, butlers_errc::timeout);
  EXPECT_EQ(rt.reply, "{butler}: {prompt}");
  EXPECT_EQ(rt.seed, 0u);
  EXPECT_EQ(rt.family, cli_family::claude);
  EXPECT_TRUE(rt.command.empty());
  EXPECT_EQ(rt.prompt_via, prompt_passing::on_stdin);
  EXPECT_EQ(rt.max_output_bytes, 1048576u);
  EXPECT_EQ(rt.kill_grace_ms, 500u);
  auto& m = res.settings->messenger;
  EXPECT_EQ(m.max_concurrent_sessions, 64u);
  EXPECT_EQ(m.max_pending, 1000u);
  ASSERT_EQ(m.adapters.size(), 1u);
  EXPECT_EQ(m.adapters[0].channels, (std::vector<std::string>{"*"}));
  EXPECT_EQ(m.adapters[0].url, "");
  EXPECT_EQ(m.adapters[0].token, "");
  EXPECT_EQ(m.adapters[0].timeout_ms, 5000u);
  EXPECT_EQ(m.adapters[0].retries, 3u);
  EXPECT_TRUE(validate_settings(*res.settings).empty());
}

TEST(config, fail_rate_takes_integers_and_floats_in_range) {
  using case_t = std::pair<const char*, double>;
  for (auto [text, rate] : {case_t{"0", 0.0}, case_t{"1", 1.0},
                            case_t{"0.5", 0.5}, case_t{"1e-3", 0.001}}) {
    auto res = parse_config(std::string{"[[butler]]\nname = \"x\"\n"
                                        "[butler.runtime]\nfail_rate = "}
                              + text + "\n",
                            "node.toml");
    ASSERT_TRUE(res.settings) << text << "\n" << dump(res.errors);
    EXPECT_EQ(res.settings->butlers[0].runtime.fail_rate, rate) << text;
  }
}

TEST(config, to_toml_round_trips_runtime_schedules_and_adapters) {
  node_settings s;
  s.butlers.emplace_back();
  auto& b = s.butlers.back();
  b.name = "b";
  b.triggers = {"when \"quoted\"\nand two lines"};
  b.capabilities = {};
  b.lease_s = 2;
  b.runtime.kind = runtime_kind::cli;
  b.runtime.fail_rate = 1.0 / 3.0; // needs all 17 digits
  b.runtime.seed = 9223372036854775807u;
  b.runtime.reply = "{prompt}\t{turns}";
  b.runtime.command = {"opencode", "run", ""};
  b.schedules.push_back({"hourly", 3600, "", "tick", "telegram:42", "once"});
  b.schedules.push_back(
    {"cron-job", 0, "0 * * * 1-5", "weekday tick", "", "skip"});
  s.butlers.emplace_back();
  s.butlers.back().name = "c";
  s.butlers.back().runtime.fail_rate = 1e-9;
  s.messenger.max_pending = 0;
  delivery_adapter_config hook;
  hook.kind = adapter_kind::webhook;
  hook.channels = {"api", "mcp"};
  hook.url = "http://h:1/x";
  hook.timeout_ms = 1;
  hook.retries = 100;
  s.messenger.adapters.push_back(hook);
  delivery_adapter_config box;
  box.path = "o.jsonl";
  s.messenger.adapters.push_back(box);
  delivery_adapter_config mail;
  mail.kind = adapter_kind::smtp;
  mail.channels = {"email"};
  mail.url = "smtps://relay.example:465";
  mail.timeout_ms = 20000;
  mail.retries = 2;
  mail.from = "Butlers <b@example.org>";
  mail.username_env = "RELAY_USER";
  mail.password_env = "";
  s.messenger.adapters.push_back(mail);
  auto text = to_toml(s);
  auto back = parse_config(text, "out.toml");
  ASSERT_TRUE(back.settings) << dump(back.errors) << text;
  EXPECT_EQ(*back.settings, s) << text;
  EXPECT_TRUE(validate_settings(*back.settings).empty())
    << dump(validate_settings(*back.settings));
  EXPECT_TRUE(contains(text, "\n[butler.runtime]\nkind = \"cli\"\n")) << text;
  EXPECT_TRUE(contains(text, "[[butler.schedule]]\nname = \"hourly\"\n"
                             "every_s = 3600\nprompt = \"tick\"\n"))
    << text;
  EXPECT_TRUE(contains(text, "fail_rate = 1e-09\n")) << text;
}

TEST(config, to_toml_round_trips_router_rules_and_policies) {
  node_settings s;
  s.switchboard.route_timeout_s = 86400;
  s.switchboard.retry_base_ms = 1;
  s.switchboard.retry_cap_ms = 600000;
  s.switchboard.circuit_failure_threshold = 1000;
  s.switchboard.circuit_open_s = 1;
  s.switchboard.fanout_mode = fanout_kind::conditional;
  s.switchboard.max_in_progress = 1000000;
  s.router.kind = router_kind::cli;
  s.router.confidence_threshold = 0.0;
  s.router.family = cli_family::codex;
  s.router.command = {"codex", "exec", "--json", "a \"quoted\" arg"};
  s.router.timeout_s = 3600;
  s.router.max_output_bytes = 67108864;
  s.router.rules.push_back({{"api", "mcp"}, {"general"}, {}});
  s.router.rules.push_back({{"*"}, {}, {"coder", "finance"}});
  s.router.rules.push_back({});
  s.policies.push_back({"high_priority", 60, 1, 1});
  s.policies.push_back({"default", 604800, 10000, 100});
  auto text = to_toml(s);
  auto back = parse_config(text, "out.toml");
  ASSERT_TRUE(back.settings) << dump(back.errors) << text;
  EXPECT_EQ(*back.settings, s) << text;
  EXPECT_TRUE(validate_settings(*back.settings).empty())
    << dump(validate_settings(*back.settings));
  EXPECT_TRUE(contains(text, "confidence_threshold = 0.0\n")) << text;
  EXPECT_TRUE(contains(text, "[[router.rule]]\nchannels = [\"*\"]\n"
                             "allow = []\ndeny = [\"coder\", \"finance\"]\n"))
    << text;
  EXPECT_TRUE(contains(text, "\n[[policy]]\ntier = \"high_priority\"\n"
                             "wall_clock_s = 60\n"))
    << text;
  EXPECT_FALSE(contains(text, "router = ")) << text;
  // Equality sees every new field.
  auto other = s;
  other.router.rules[1].deny.pop_back();
  EXPECT_NE(other, s);
  other = s;
  other.policies[0].retry_max_attempts = 2;
  EXPECT_NE(other, s);
  other = s;
  other.switchboard.max_in_progress = 1;
  EXPECT_NE(other, s);
  other = s;
  other.router.confidence_threshold = 0.25;
  EXPECT_NE(other, s);
}

// -- environment -------------------------------------------------------------

TEST(config, env_overrides_apply) {
  node_settings s;
  s.positions["http.port"] = {3, 1};
  auto errors = apply_env_overrides(s,
                                    fake_env({{"BUTLERS_DATABASE_URL",
                                               "postgresql:///b?host=/tmp"},
                                              {"BUTLERS_HTTP_TOKEN", "tok"},
                                              {"BUTLERS_HTTP_PORT", "9123"}}));
  EXPECT_TRUE(errors.empty()) << dump(errors);
  EXPECT_EQ(s.database.url, "postgresql:///b?host=/tmp");
  EXPECT_EQ(s.http.token, "tok");
  EXPECT_EQ(s.http.port, 9123);
  EXPECT_EQ(s.positions.count("http.port"), 0u);
}

TEST(config, env_overrides_give_connectors_their_secrets) {
  auto res = parse_config("[[connector]]\nname = \"tg-main\"\ntype = "
                          "\"telegram\"\nendpoint_identity = \"bot\"\n"
                          "token = \"in-file\"\n",
                          "node.toml");
  ASSERT_TRUE(res.settings) << dump(res.errors);
  auto s = *res.settings;
  EXPECT_EQ(connector_env_name("tg-main", "TOKEN"),
            "BUTLERS_CONNECTOR_TG_MAIN_TOKEN");
  auto errors = apply_env_overrides(
    s, fake_env({{"BUTLERS_CONNECTOR_TG_MAIN_TOKEN", "123:abc"},
                 {"BUTLERS_CONNECTOR_TG_MAIN_SECRET_TOKEN", "zq-secret-9"}}));
  EXPECT_TRUE(errors.empty()) << dump(errors);
  EXPECT_EQ(s.connectors[0].token, "123:abc");
  EXPECT_EQ(s.connectors[0].secret_token, "zq-secret-9");
  EXPECT_TRUE(validate_settings(s).empty()) << dump(validate_settings(s));
  auto printed = to_toml(s);
  EXPECT_FALSE(contains(printed, "123:abc")) << printed;
  EXPECT_FALSE(contains(printed, "zq-secret-9")) << printed;
}

TEST(config, env_overrides_absent_or_empty_change_nothing) {
  node_settings s;
  auto errors = apply_env_overrides(s, fake_env({{"BUTLERS_HTTP_TOKEN", ""}}));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(s, node_settings{});
}

TEST(config, env_override_invalid_port) {
  for (auto bad : {"abc", "70000", "-1", "80x", "123456"}) {
    node_settings s;
    auto errors = apply_env_overrides(s,
                                      fake_env({{"BUTLERS_HTTP_PORT", bad}}));
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0].key, "env:BUTLERS_HTTP_PORT");
    EXPECT_TRUE(contains(errors[0].message, "0..65535")) << errors[0].message;
    EXPECT_TRUE(contains(errors[0].message, bad)) << errors[0].message;
    EXPECT_EQ(s.http.port, 8470) << bad;
  }
}

// -- files -------------------------------------------------------------------

TEST(config, missing_file_is_one_error) {
  auto res = load_config("/nonexistent/dir/node.toml");
  EXPECT_FALSE(res.settings);
  ASSERT_EQ(res.errors.size(), 1u);
  EXPECT_EQ(res.errors[0].file, "/nonexistent/dir/node.toml");
  EXPECT_TRUE(contains(res.errors[0].to_string(),
                       "/nonexistent/dir/node.toml: cannot read file"))
    << res.errors[0].to_string();
}

TEST(config, load_config_reads_a_file) {
  auto path = testing::TempDir() + "butlers_config_test.toml";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("[http]\nport = 0\n[htpp]\n", f);
    std::fclose(f);
  }
  auto res = load_config(path);
  std::remove(path.c_str());
  ASSERT_EQ(res.errors.size(), 1u) << dump(res.errors);
  EXPECT_EQ(res.errors[0].file, path);
  EXPECT_EQ(res.errors[0].line, 3);
  EXPECT_EQ(res.errors[0].key, "htpp");
}

TEST(config, shipped_node_toml_is_valid) {
  auto path = source_dir() + "/config/node.toml";
  auto res = load_config(path);
  ASSERT_TRUE(res.errors.empty()) << dump(res.errors);
  ASSERT_TRUE(res.settings);
  auto& s = *res.settings;
  EXPECT_EQ(s.path, path);
  EXPECT_TRUE(validate_settings(s).empty()) << dump(validate_settings(s));
  EXPECT_EQ(s.http.bind, "127.0.0.1");
  EXPECT_EQ(s.http.port, 8470);
  EXPECT_EQ(s.database.url, "");
  ASSERT_EQ(s.butlers.size(), 2u);
  EXPECT_EQ(s.butlers[0].name, "general");
  EXPECT_TRUE(s.butlers[0].keywords.empty());
  EXPECT_EQ(s.butlers[0].runtime, runtime_config{});
  EXPECT_EQ(s.butlers[1].name, "health");
  EXPECT_FALSE(s.butlers[1].keywords.empty());
  EXPECT_FALSE(s.butlers[1].triggers.empty());
  EXPECT_EQ(s.butlers[1].runtime.kind, runtime_kind::scripted);
  ASSERT_EQ(s.connectors.size(), 1u);
  EXPECT_EQ(s.connectors[0].name, "api");
  EXPECT_EQ(s.connectors[0].type, connector_type::http);
  // The shipped file states the defaults (its adapters are commented out:
  // none means the runtime's default outbox).
  EXPECT_TRUE(s.messenger.adapters.empty());
  auto defaults = s;
  defaults.butlers.clear();
  defaults.connectors.clear();
  EXPECT_EQ(defaults, node_settings{});
}

TEST(config, database_lanes_default_and_value) {
  auto defaults = parse_config("", "t.toml");
  ASSERT_TRUE(defaults.settings);
  EXPECT_EQ(defaults.settings->database.lanes, 3u);
  EXPECT_EQ(defaults.settings->database.writer_connections, 4u);
  auto res = parse_config("[database]\nlanes = 4\n", "t.toml");
  ASSERT_TRUE(res.settings);
  EXPECT_EQ(res.settings->database.lanes, 4u);
  // Out of range: config_errors.database_lanes_below_range and _above_range.
}

// -- [threads] ----------------------------------------------------------------

TEST(config, threads_defaults_keys_and_checks) {
  auto defaults = parse_config("", "t.toml");
  ASSERT_TRUE(defaults.settings);
  auto& d = defaults.settings->threads;
  EXPECT_EQ(d.idle_timeout_s, 300u);
  EXPECT_EQ(d.max_queued_runs, 16u);
  EXPECT_EQ(d.max_pending_turns, 64u);
  EXPECT_EQ(d.max_subscribers, 1024u);
  EXPECT_EQ(d.subscriber_buffer, 256u);
  EXPECT_EQ(d.heartbeat_ms, 2000u);
  EXPECT_EQ(d.collect_ms, 0u);
  EXPECT_EQ(d.collect_max_ms, 2000u);
  EXPECT_EQ(d.collect_max_turns, 32u);
  auto res = parse_config("[threads]\nidle_timeout_s = 5\nmax_queued_runs = 2\n"
                          "max_pending_turns = 3\nmax_subscribers = 4\n"
                          "subscriber_buffer = 5\nheartbeat_ms = 600\n"
                          "collect_ms = 300\ncollect_max_ms = 900\n"
                          "collect_max_turns = 7\n",
                          "t.toml");
  ASSERT_TRUE(res.errors.empty()) << dump(res.errors);
  auto& t = res.settings->threads;
  EXPECT_EQ(t.idle_timeout_s, 5u);
  EXPECT_EQ(t.max_queued_runs, 2u);
  EXPECT_EQ(t.max_pending_turns, 3u);
  EXPECT_EQ(t.max_subscribers, 4u);
  EXPECT_EQ(t.subscriber_buffer, 5u);
  EXPECT_EQ(t.heartbeat_ms, 600u);
  EXPECT_EQ(t.collect_ms, 300u);
  EXPECT_EQ(t.collect_max_ms, 900u);
  EXPECT_EQ(t.collect_max_turns, 7u);
  auto round = parse_config(to_toml(*res.settings), "again.toml");
  ASSERT_TRUE(round.settings) << dump(round.errors);
  EXPECT_EQ(round.settings->threads, t);
  auto zero = parse_config("[threads]\nidle_timeout_s = 0\n", "t.toml");
  ASSERT_FALSE(zero.errors.empty());
  EXPECT_EQ(zero.errors[0].key, "threads.idle_timeout_s");
}

TEST(config, warns_about_the_default_node_name_only_with_the_cluster_on) {
  auto parsed = [](const std::string& text) {
    auto r = parse_config(text, "node.toml");
    EXPECT_TRUE(r.settings) << text;
    return r.settings ? *r.settings : node_settings{};
  };
  // The cluster on (a port, or only peers) with the shipped name: warned.
  for (auto cluster :
       {std::string{"[cluster]\nport = 4710\n"},
        std::string{"[cluster]\npeers = [\"127.0.0.1:4711\"]\n"}}) {
    auto warnings = config_warnings(
      parsed("[node]\nname = \"butlers-1\"\n" + cluster));
    ASSERT_EQ(warnings.size(), 1u) << cluster;
    EXPECT_NE(warnings[0].find("node.name"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("butlers-1"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("[cluster]"), std::string::npos) << warnings[0];
  }
  // The default name, taken without a [node] table at all: warned too.
  EXPECT_EQ(config_warnings(parsed("[cluster]\nport = 4710\n")).size(), 1u);
  // A name of its own, or no cluster: nothing to say.
  EXPECT_TRUE(config_warnings(
                parsed("[node]\nname = \"node-a\"\n[cluster]\nport = 4710\n"))
                .empty());
  EXPECT_TRUE(
    config_warnings(parsed("[node]\nname = \"butlers-1\"\n")).empty());
  EXPECT_TRUE(config_warnings(parsed("")).empty());
}
