#include "runtime/config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>
#include <utility>

#include "runtime/config_fields.hpp"

// Reading node.toml table by table, printing it back, and comparing settings;
// the options of each table come from its field list (config_fields.cpp).

namespace butlers {

using namespace config_detail;

namespace {

constexpr const char* environment_file = "<environment>";

/// Reads a table that has nothing but fields.
template<class T>
void read_table(parser& p, const toml::table& t, std::string prefix,
                const fields<T>& list, T& c) {
  section s{p, t, std::move(prefix)};
  read_fields(s, list, c);
  s.finish();
}

/// Reads the array of tables `name` of `s` (`[[header]]`), entry `i` keyed
/// `PREFIX.name[i]`, with `read`; entries that are not tables were reported
/// by `tables` and are skipped.
template<class T, class Read>
void read_array(section& s, const char* name, std::string_view header,
                std::vector<T>& out, Read read) {
  auto items = s.tables(name, header);
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i])
      continue;
    auto prefix = s.key_of(name) + "[" + std::to_string(i) + "]";
    s.owner().settings.positions[prefix] = position_of(items[i]->source());
    out.emplace_back();
    read(s.owner(), *items[i], prefix, out.back());
  }
}

template<class T>
void read_plain_array(section& s, const char* name, std::string_view header,
                      const fields<T>& list, std::vector<T>& out) {
  read_array(s, name, header, out,
             [&list](parser& p, const toml::table& t, std::string prefix,
                     T& c) {
               read_table(p, t, std::move(prefix), list, c);
             });
}

void read_http(parser& p, const toml::table& t, http_config& c) {
  section s{p, t, "http"};
  read_fields(s, http_fields(), c);
  read_plain_array(s, "credential", "http.credential", credential_fields(),
                   c.credentials);
  s.finish();
}

void read_switchboard(parser& p, const toml::table& t, switchboard_config& c) {
  section s{p, t, "switchboard"};
  read_fields(s, switchboard_fields(), c);
  s.moved("router", "it is now [router] kind");
  s.finish();
}

void read_router(parser& p, const toml::table& t, router_config& c) {
  section s{p, t, "router"};
  read_fields(s, router_fields(), c);
  read_plain_array(s, "rule", "router.rule", rule_fields(), c.rules);
  s.finish();
}

void read_butler(parser& p, const toml::table& t, std::string prefix,
                 butler_config& c) {
  section s{p, t, prefix};
  read_fields(s, butler_fields(), c);
  if (auto rt = s.table("runtime", "; the runtime is the table "
                                   "[butler.runtime], its adapter is `kind`"))
    read_table(p, *rt, prefix + ".runtime", runtime_fields(), c.runtime);
  read_plain_array(s, "schedule", "butler.schedule", schedule_fields(),
                   c.schedules);
  s.moved("command", "it is now a key of [butler.runtime]");
  s.finish();
}

void read_adapter(parser& p, const toml::table& t, std::string prefix,
                  delivery_adapter_config& c) {
  section s{p, t, prefix};
  read_fields(s, adapter_fields(), c);
  bool slack = c.kind == adapter_kind::slack;
  if (slack)
    c.reactions = slack_reaction_defaults();
  if (auto r = s.table("reactions", "; write reactions = { progress = "
                                    "\"…\", ... }"))
    read_table(p, *r, prefix + ".reactions",
               slack ? slack_reaction_fields() : reaction_fields(),
               c.reactions);
  s.finish();
}

void read_messenger(parser& p, const toml::table& t, messenger_config& c) {
  section s{p, t, "messenger"};
  read_fields(s, messenger_fields(), c);
  read_array(s, "adapter", "messenger.adapter", c.adapters, read_adapter);
  s.finish();
}

void read_cluster(parser& p, const toml::table& t, cluster_config& c) {
  section s{p, t, "cluster"};
  read_fields(s, cluster_fields(), c);
  if (auto tls = s.table("tls"))
    read_table(p, *tls, "cluster.tls", cluster_tls_fields(), c);
  s.moved("enabled", "clustering is on when cluster.port or cluster.peers "
                     "is set");
  s.moved("tls_certificate", "it is now `cert` of [cluster.tls]");
  s.moved("tls_key", "it is now `key` of [cluster.tls]");
  s.moved("tls_cafile", "it is now `ca` of [cluster.tls]");
  s.finish();
}

void read_rate_limits(parser& p, const toml::table& t, rate_limits_config& c) {
  section s{p, t, "rate_limits"};
  read_fields(s, rate_limit_fields(), c);
  read_plain_array(s, "tier", "rate_limits.tier", rate_limit_tier_fields(),
                   c.tiers);
  s.finish();
}

/// `retention.attachment_days` and `attachments.retention_days` are one
/// setting: whichever is written sets both; both written must agree.
void merge_attachment_days(parser& p) {
  auto& out = p.settings;
  auto& pos = out.positions;
  auto r = pos.find("retention.attachment_days");
  auto a = pos.find("attachments.retention_days");
  if (r == pos.end()) {
    out.retention.attachment_days = out.attachments.retention_days;
    return;
  }
  if (a != pos.end()
      && out.retention.attachment_days != out.attachments.retention_days) {
    p.error(r->second, "retention.attachment_days",
            "must equal attachments.retention_days (one setting; "
              + std::to_string(out.retention.attachment_days)
              + " != " + std::to_string(out.attachments.retention_days)
              + "): set only one of them");
    return;
  }
  out.attachments.retention_days = out.retention.attachment_days;
}

void read_root(parser& p, const toml::table& root) {
  auto& out = p.settings;
  section s{p, root, ""};
  if (auto t = s.table("node"))
    read_table(p, *t, "node", node_fields(), out.node);
  if (auto t = s.table("database"))
    read_table(p, *t, "database", database_fields(), out.database);
  if (auto t = s.table("http"))
    read_http(p, *t, out.http);
  if (auto t = s.table("switchboard"))
    read_switchboard(p, *t, out.switchboard);
  if (auto t = s.table("router", "; the router is the table [router], its "
                                 "choice of router is `kind`"))
    read_router(p, *t, out.router);
  read_plain_array(s, "policy", "", policy_fields(), out.policies);
  read_plain_array(s, "budget", "", budget_fields(), out.budgets);
  read_array(s, "butler", "", out.butlers, read_butler);
  if (auto t = s.table("messenger"))
    read_messenger(p, *t, out.messenger);
  read_plain_array(s, "connector", "", connector_fields(), out.connectors);
  if (auto t = s.table("cluster"))
    read_cluster(p, *t, out.cluster);
  if (auto t = s.table("scheduler"))
    read_table(p, *t, "scheduler", scheduler_fields(), out.scheduler);
  if (auto t = s.table("threads"))
    read_table(p, *t, "threads", threads_fields(), out.threads);
  if (auto t = s.table("connectors"))
    read_table(p, *t, "connectors", connectors_fields(), out.connector_stats);
  if (auto t = s.table("telemetry"))
    read_table(p, *t, "telemetry", telemetry_fields(), out.telemetry);
  if (auto t = s.table("tools"))
    read_table(p, *t, "tools", tool_fields(), out.tools);
  if (auto t = s.table("attachments"))
    read_table(p, *t, "attachments", attachment_fields(), out.attachments);
  if (auto t = s.table("rate_limits"))
    read_rate_limits(p, *t, out.rate_limits);
  if (auto t = s.table("retention"))
    read_table(p, *t, "retention", retention_fields(), out.retention);
  s.finish();
  merge_attachment_days(p);
}

bool by_position(const config_error& x, const config_error& y) {
  return std::tie(x.line, x.column) < std::tie(y.line, y.column);
}

} // namespace

// -- equality -----------------------------------------------------------------

bool operator==(const node_config& x, const node_config& y) {
  return equal_fields(node_fields(), x, y);
}

bool operator==(const database_config& x, const database_config& y) {
  return equal_fields(database_fields(), x, y);
}

bool operator==(const http_credential_config& x,
                const http_credential_config& y) {
  return equal_fields(credential_fields(), x, y);
}

bool operator==(const http_config& x, const http_config& y) {
  return equal_fields(http_fields(), x, y) && x.credentials == y.credentials;
}

bool operator==(const switchboard_config& x, const switchboard_config& y) {
  return equal_fields(switchboard_fields(), x, y);
}

bool operator==(const routing_rule_config& x, const routing_rule_config& y) {
  return equal_fields(rule_fields(), x, y);
}

bool operator==(const router_config& x, const router_config& y) {
  return equal_fields(router_fields(), x, y) && x.rules == y.rules;
}

bool operator==(const policy_config& x, const policy_config& y) {
  return equal_fields(policy_fields(), x, y);
}

bool operator==(const budget_config& x, const budget_config& y) {
  return equal_fields(budget_fields(), x, y);
}

bool operator==(const runtime_config& x, const runtime_config& y) {
  return equal_fields(runtime_fields(), x, y);
}

bool operator==(const schedule_config& x, const schedule_config& y) {
  return equal_fields(schedule_fields(), x, y);
}

bool operator==(const butler_config& x, const butler_config& y) {
  return equal_fields(butler_fields(), x, y) && x.runtime == y.runtime
         && x.schedules == y.schedules;
}

bool operator==(const reaction_config& x, const reaction_config& y) {
  return equal_fields(reaction_fields(), x, y);
}

bool operator==(const delivery_adapter_config& x,
                const delivery_adapter_config& y) {
  return equal_fields(adapter_fields(), x, y) && x.reactions == y.reactions;
}

bool operator==(const messenger_config& x, const messenger_config& y) {
  return equal_fields(messenger_fields(), x, y) && x.adapters == y.adapters;
}

bool operator==(const connector_config& x, const connector_config& y) {
  return equal_fields(connector_fields(), x, y);
}

bool operator==(const cluster_config& x, const cluster_config& y) {
  return equal_fields(cluster_fields(), x, y)
         && equal_fields(cluster_tls_fields(), x, y);
}

bool operator==(const scheduler_config& x, const scheduler_config& y) {
  return equal_fields(scheduler_fields(), x, y);
}

bool operator==(const threads_config& x, const threads_config& y) {
  return equal_fields(threads_fields(), x, y);
}

bool operator==(const tool_settings& x, const tool_settings& y) {
  return equal_fields(tool_fields(), x, y);
}

bool operator==(const connectors_config& x, const connectors_config& y) {
  return equal_fields(connectors_fields(), x, y);
}

bool operator==(const telemetry_config& x, const telemetry_config& y) {
  return equal_fields(telemetry_fields(), x, y);
}

bool operator==(const attachment_limits& x, const attachment_limits& y) {
  return equal_fields(attachment_fields(), x, y);
}

bool operator==(const rate_limit_tier& x, const rate_limit_tier& y) {
  return equal_fields(rate_limit_tier_fields(), x, y);
}

bool operator==(const rate_limits_config& x, const rate_limits_config& y) {
  return equal_fields(rate_limit_fields(), x, y) && x.tiers == y.tiers;
}

bool operator==(const retention_config& x, const retention_config& y) {
  return equal_fields(retention_fields(), x, y);
}

bool operator==(const node_settings& x, const node_settings& y) {
  return std::tie(x.node, x.database, x.http, x.switchboard, x.router,
                  x.policies, x.budgets, x.butlers, x.messenger, x.connectors,
                  x.cluster, x.scheduler, x.threads, x.connector_stats,
                  x.telemetry, x.tools, x.attachments, x.rate_limits,
                  x.retention)
         == std::tie(y.node, y.database, y.http, y.switchboard, y.router,
                     y.policies, y.budgets, y.butlers, y.messenger,
                     y.connectors, y.cluster, y.scheduler, y.threads,
                     y.connector_stats, y.telemetry, y.tools, y.attachments,
                     y.rate_limits, y.retention);
}

bool cluster_config::hosts(const std::string& name) const {
  return std::find(butlers.begin(), butlers.end(), "*") != butlers.end()
         || std::find(butlers.begin(), butlers.end(), name) != butlers.end();
}

// -- config_error -------------------------------------------------------------

std::string config_error::to_string() const {
  std::string out = file;
  if (line > 0) {
    out += ':';
    out += std::to_string(line);
    if (column > 0) {
      out += ':';
      out += std::to_string(column);
    }
  }
  if (!key.empty()) {
    out += ": ";
    out += key;
  }
  out += ": ";
  out += message;
  return out;
}

// -- parsing ------------------------------------------------------------------

config_result parse_config(std::string_view text, std::string file) {
  config_result result;
  toml::table root;
  try {
    root = toml::parse(text, std::string_view{file});
  } catch (const toml::parse_error& e) {
    auto pos = position_of(e.source());
    result.errors.push_back(config_error{std::move(file), pos.line, pos.column,
                                         "", std::string{e.description()}});
    return result;
  }
  parser p;
  p.file = file;
  p.settings.path = file;
  read_root(p, root);
  std::stable_sort(p.errors.begin(), p.errors.end(), by_position);
  result.errors = std::move(p.errors);
  if (result.errors.empty())
    result.settings = std::move(p.settings);
  return result;
}

namespace {

/// Largest system prompt file read.
constexpr size_t max_prompt_file_bytes = 1 << 20;

/// Reads each butler's `system_prompt_file` (relative to the directory of
/// `config_path`) into `system_prompt_text`; what cannot be read is an
/// error naming the key.
void read_prompt_files(config_result& result, const std::string& config_path) {
  auto& s = *result.settings;
  auto slash = config_path.rfind('/');
  auto dir = slash == std::string::npos ? std::string{}
                                        : config_path.substr(0, slash + 1);
  for (size_t i = 0; i < s.butlers.size(); ++i) {
    auto& rt = s.butlers[i].runtime;
    if (rt.system_prompt_file.empty())
      continue;
    auto key = "butler[" + std::to_string(i) + "].runtime.system_prompt_file";
    auto file = rt.system_prompt_file[0] == '/' ? rt.system_prompt_file
                                                : dir + rt.system_prompt_file;
    auto pos = s.positions.count(key) ? s.positions.at(key) : source_position{};
    auto text = read_small_file(file, max_prompt_file_bytes);
    if (!text.error.empty())
      result.errors.push_back(
        config_error{config_path, pos.line, pos.column, key,
                     "cannot read '" + file + "': " + text.error});
    else
      rt.system_prompt_text = std::move(text.data);
  }
}

} // namespace

small_file read_small_file(const std::string& path, size_t max_bytes) {
  small_file out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    out.error = std::strerror(errno);
    return out;
  }
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    out.data.append(buf, n);
    if (out.data.size() > max_bytes) {
      std::fclose(f);
      out.data.clear();
      out.error = "larger than " + std::to_string(max_bytes) + " bytes";
      return out;
    }
  }
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) {
    out.data.clear();
    out.error = std::strerror(err);
  }
  return out;
}

config_result load_config(const std::string& path) {
  config_result result;
  auto fail = [&](int err) {
    result.errors.push_back(
      config_error{path, 0, 0, "",
                   std::string{"cannot read file: "} + std::strerror(err)});
    return result;
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    return fail(errno);
  std::string text;
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0)
    return fail(err);
  result = parse_config(text, path);
  if (result.settings) {
    read_prompt_files(result, path);
    if (!result.errors.empty())
      result.settings.reset();
  }
  return result;
}

// -- environment --------------------------------------------------------------

std::vector<config_error> apply_env_overrides(
  node_settings& s, const std::function<const char*(const char*)>& getenv_fn) {
  std::vector<config_error> errors;
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto value = getenv_fn(name);
    if (value == nullptr || *value == '\0')
      return std::nullopt;
    return std::string{value};
  };
  if (auto url = get("BUTLERS_DATABASE_URL")) {
    s.database.url = *url;
    s.positions.erase("database.url");
  }
  if (auto token = get("BUTLERS_HTTP_TOKEN")) {
    s.http.token = *token;
    s.positions.erase("http.token");
  }
  if (auto port = get("BUTLERS_HTTP_PORT")) {
    if (auto value = parse_port(*port)) {
      s.http.port = *value;
      s.positions.erase("http.port");
    } else {
      errors.push_back(
        config_error{environment_file, 0, 0, "env:BUTLERS_HTTP_PORT",
                     "expected an integer in 0..65535, got '" + *port + "'"});
    }
  }
  for (size_t i = 0; i < s.connectors.size(); ++i) {
    auto& cn = s.connectors[i];
    auto prefix = "connector[" + std::to_string(i) + "].";
    if (auto token = get(connector_env_name(cn.name, "TOKEN").c_str())) {
      cn.token = *token;
      s.positions.erase(prefix + "token");
    }
    auto secret_var = connector_env_name(cn.name, "SECRET_TOKEN");
    if (auto secret = get(secret_var.c_str())) {
      cn.secret_token = *secret;
      s.positions.erase(prefix + "secret_token");
    }
    auto signing_var = connector_env_name(cn.name, "SIGNING_SECRET");
    if (auto signing = get(signing_var.c_str())) {
      cn.signing_secret = *signing;
      s.positions.erase(prefix + "signing_secret");
    }
  }
  return errors;
}

std::string slack_api_base(const connector_config& cn) {
  if (cn.api_base == connector_config{}.api_base)
    return "https://slack.com/api";
  return cn.api_base;
}

reaction_config slack_reaction_defaults() {
  reaction_config r;
  r.progress = "eyes";
  r.parsed = "white_check_mark";
  r.errored = "space_invader";
  r.queued = "hourglass_flowing_sand";
  return r;
}

std::string connector_env_name(const std::string& connector,
                               const std::string& suffix) {
  std::string out = "BUTLERS_CONNECTOR_";
  for (char c : connector)
    out += c == '-'
             ? '_'
             : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out += '_';
  out += suffix;
  return out;
}

// -- output -------------------------------------------------------------------

std::string to_toml(const node_settings& s) {
  std::ostringstream out;
  out << "# Effective configuration of node " << quote(s.node.name);
  if (!s.path.empty())
    out << ", read from " << s.path;
  out << ".\n# Secrets are shown as \"***\".\n";
  out << "\n[node]\n" << print_fields(node_fields(), s.node);
  out << "\n[database]\n" << print_fields(database_fields(), s.database);
  out << "\n[http]\n" << print_fields(http_fields(), s.http);
  for (auto& cr : s.http.credentials)
    out << "[[http.credential]]\n" << print_fields(credential_fields(), cr);
  out << "\n[switchboard]\n"
      << print_fields(switchboard_fields(), s.switchboard);
  out << "\n[router]\n" << print_fields(router_fields(), s.router);
  for (auto& rule : s.router.rules)
    out << "[[router.rule]]\n" << print_fields(rule_fields(), rule);
  for (auto& pol : s.policies)
    out << "\n[[policy]]\n" << print_fields(policy_fields(), pol);
  for (auto& b : s.budgets)
    out << "\n[[budget]]\n" << print_fields(budget_fields(), b);
  out << "\n[cluster]\n" << print_fields(cluster_fields(), s.cluster);
  if (s.cluster.tls())
    out << "[cluster.tls]\n" << print_fields(cluster_tls_fields(), s.cluster);
  out << "\n[scheduler]\n" << print_fields(scheduler_fields(), s.scheduler);
  out << "\n[threads]\n" << print_fields(threads_fields(), s.threads);
  out << "\n[connectors]\n"
      << print_fields(connectors_fields(), s.connector_stats);

  out << "\n[telemetry]\n" << print_fields(telemetry_fields(), s.telemetry);
  out << "\n[tools]\n" << print_fields(tool_fields(), s.tools);
  out << "\n[attachments]\n"
      << print_fields(attachment_fields(), s.attachments);
  out << "\n[rate_limits]\n"
      << print_fields(rate_limit_fields(), s.rate_limits);
  for (auto& t : s.rate_limits.tiers)
    out << "[[rate_limits.tier]]\n"
        << print_fields(rate_limit_tier_fields(), t);
  out << "\n[retention]\n" << print_fields(retention_fields(), s.retention);
  for (auto& b : s.butlers) {
    out << "\n[[butler]]\n" << print_fields(butler_fields(), b);
    out << "[butler.runtime]\n" << print_fields(runtime_fields(), b.runtime);
    for (auto& sc : b.schedules)
      out << "[[butler.schedule]]\n" << print_fields(schedule_fields(), sc);
  }
  out << "\n[messenger]\n" << print_fields(messenger_fields(), s.messenger);
  for (auto& a : s.messenger.adapters) {
    out << "\n[[messenger.adapter]]\n" << print_fields(adapter_fields(), a);
    if (a.kind == adapter_kind::telegram || a.kind == adapter_kind::slack)
      out << "[messenger.adapter.reactions]\n"
          << print_fields(reaction_fields(), a.reactions);
  }
  for (auto& cn : s.connectors)
    out << "\n[[connector]]\n" << print_fields(connector_fields(), cn);
  return out.str();
}

} // namespace butlers
