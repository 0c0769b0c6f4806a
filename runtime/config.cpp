#include "runtime/config.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>

#include <toml++/toml.h>

#include "runtime/error.hpp"

namespace butlers {

namespace {

// -- small helpers ------------------------------------------------------------

constexpr const char* environment_file = "<environment>";

/// Optimal string alignment distance: Levenshtein plus adjacent
/// transpositions, so "prot" is one edit away from "port".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min(
        {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

/// The closest of `candidates` within two edits of `word`, or "".
std::string closest(std::string_view word,
                    const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;
  for (auto& c : candidates) {
    auto dist = edit_distance(word, c);
    if (dist < best_distance && dist < c.size()) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

std::string hint(std::string_view word,
                 const std::vector<std::string>& candidates) {
  auto best = closest(word, candidates);
  return best.empty() ? std::string{} : "; did you mean '" + best + "'?";
}

const char* type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

const char* type_name(const toml::node& n) {
  if (auto arr = n.as_array();
      arr && !arr->empty() && arr->is_array_of_tables())
    return "array of tables";
  return type_name(n.type());
}

source_position position_of(const toml::source_region& r) {
  return {static_cast<int64_t>(r.begin.line),
          static_cast<int64_t>(r.begin.column)};
}

/// Where an entry was written: the key if toml++ knows its place, else the
/// value.
source_position position_of(const toml::key& k, const toml::node& v) {
  auto pos = position_of(k.source());
  return pos.line > 0 ? pos : position_of(v.source());
}

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs) {
    if (!out.empty())
      out += ", ";
    out += x;
  }
  return out;
}

/// `^[a-z][a-z0-9_-]{0,63}$`: butler and connector names.
bool is_plain_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] < 'a' || s[0] > 'z')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
           || c == '-';
  });
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9');
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`: node names.
bool is_node_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || !is_alnum(s[0]))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alnum(c) || c == '.' || c == '_' || c == '-';
  });
}

/// Parses a decimal port 0..65535 made of digits only.
std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5)
    return std::nullopt;
  uint32_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (n > 65535)
    return std::nullopt;
  return static_cast<uint16_t>(n);
}

/// Checks "host:port" (host may be a bracketed IPv6 address); returns what
/// is wrong, or "".
std::string check_peer(const std::string& peer) {
  auto colon = peer.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "expected \"host:port\", got '" + peer + "'";
  auto port = parse_port(std::string_view{peer}.substr(colon + 1));
  if (!port || *port == 0)
    return "port of '" + peer + "' must be in 1..65535";
  return {};
}

/// `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`: tool names such as
/// "route.execute".
bool is_tool_name(std::string_view s) {
  size_t i = 0;
  for (;;) {
    if (i >= s.size() || s[i] < 'a' || s[i] > 'z')
      return false;
    ++i;
    while (i < s.size()
           && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')
               || s[i] == '_'))
      ++i;
    if (i == s.size())
      return true;
    if (s[i] != '.')
      return false;
    ++i;
  }
}

/// Number of whitespace-separated fields of `s`.
size_t count_fields(std::string_view s) {
  size_t n = 0;
  bool in_field = false;
  for (char c : s) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (!space && !in_field)
      ++n;
    in_field = !space;
  }
  return n;
}

/// Shortest text that reads back as `x`, always with a fraction or exponent
/// so that TOML reads it as a float ("0.0", "0.25", "1e-05", "inf").
std::string format_double(double x) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x);
  std::string out{buf, res.ptr};
  if (out.find_first_of(".eEn") == std::string::npos)
    out += ".0";
  return out;
}

/// The error classes of spec 001 §10.6, by the names of `butlers_errc`.
const std::vector<std::string>& taxonomy_classes() {
  static const std::vector<std::string> classes = [] {
    std::vector<std::string> xs;
    for (auto x :
         {butlers_errc::classification_error, butlers_errc::validation_error,
          butlers_errc::routing_error, butlers_errc::target_unavailable,
          butlers_errc::timeout, butlers_errc::overload_rejected,
          butlers_errc::internal_error})
      xs.emplace_back(to_string(x));
    return xs;
  }();
  return classes;
}

// -- parsing ------------------------------------------------------------------

using check_fn = std::function<std::string(const std::string&)>;

/// Collects the settings and the errors of one file.
struct parser {
  std::string file;
  std::vector<config_error> errors;
  node_settings settings;

  void error(source_position where, std::string key, std::string message) {
    errors.push_back(config_error{file, where.line, where.column,
                                  std::move(key), std::move(message)});
  }
};

/// Reads the keys of one table; every key asked for becomes known, and
/// `finish` reports the rest as unknown.
class section {
 public:
  section(parser& p, const toml::table& tbl, std::string prefix)
    : parser_(p), table_(tbl), prefix_(std::move(prefix)) {}

  std::string key_of(std::string_view name) const {
    return prefix_.empty() ? std::string{name}
                           : prefix_ + "." + std::string{name};
  }

  /// Position of the table itself (its header).
  source_position position() const {
    return position_of(table_.source());
  }

  /// Looks `name` up, marks it known and records its position.
  const toml::node* get(const char* name) {
    known_.emplace_back(name);
    auto i = table_.find(name);
    if (i == table_.end())
      return nullptr;
    parser_.settings.positions[key_of(name)] = position_of(i->first, i->second);
    return &i->second;
  }

  void wrong_type(const char* name, const toml::node& n, const char* expected) {
    parser_.error(position_of(n.source()), key_of(name),
                  std::string{"expected "} + expected + ", got "
                    + type_name(n));
  }

  void invalid(const char* name, const toml::node& n, std::string message) {
    parser_.error(position_of(n.source()), key_of(name), std::move(message));
  }

  void boolean(const char* name, bool& out) {
    if (auto n = get(name)) {
      if (auto v = n->as_boolean())
        out = v->get();
      else
        wrong_type(name, *n, "boolean");
    }
  }

  template<class T>
  void integer(const char* name, T& out, int64_t min, int64_t max) {
    auto n = get(name);
    if (!n)
      return;
    auto v = n->as_integer();
    if (!v) {
      wrong_type(name, *n, "integer");
      return;
    }
    auto x = v->get();
    if (x < min || x > max) {
      invalid(name, *n,
              "must be in " + std::to_string(min) + ".." + std::to_string(max)
                + ", got " + std::to_string(x));
      return;
    }
    out = static_cast<T>(x);
  }

  void string(const char* name, std::string& out, const check_fn& check = {}) {
    auto n = get(name);
    if (!n)
      return;
    auto v = n->as_string();
    if (!v) {
      wrong_type(name, *n, "string");
      return;
    }
    if (check) {
      if (auto what = check(v->get()); !what.empty()) {
        invalid(name, *n, std::move(what));
        return;
      }
    }
    out = v->get();
  }

  void one_of(const char* name, std::string& out,
              const std::vector<std::string>& choices) {
    string(name, out, choice_of(choices));
  }

  /// A float; integers are accepted too ("fail_rate = 1").
  void number(const char* name, double& out, double min, double max) {
    auto n = get(name);
    if (!n)
      return;
    double x;
    if (auto f = n->as_floating_point()) {
      x = f->get();
    } else if (auto i = n->as_integer()) {
      x = static_cast<double>(i->get());
    } else {
      wrong_type(name, *n, "float");
      return;
    }
    if (!(x >= min && x <= max)) { // also rejects nan
      invalid(name, *n,
              "must be in " + format_double(min) + ".." + format_double(max)
                + ", got " + format_double(x));
      return;
    }
    out = x;
  }

  void strings(const char* name, std::vector<std::string>& out,
               const check_fn& check = {}) {
    auto n = get(name);
    if (!n)
      return;
    auto arr = n->as_array();
    if (!arr) {
      wrong_type(name, *n, "array of strings");
      return;
    }
    std::vector<std::string> result;
    bool ok = true;
    for (size_t i = 0; i < arr->size(); ++i) {
      auto& elem = *arr->get(i);
      auto elem_key = key_of(name) + "[" + std::to_string(i) + "]";
      auto v = elem.as_string();
      if (!v) {
        parser_.error(position_of(elem.source()), elem_key,
                      std::string{"expected string, got "} + type_name(elem));
        ok = false;
        continue;
      }
      if (check) {
        if (auto what = check(v->get()); !what.empty()) {
          parser_.error(position_of(elem.source()), elem_key, std::move(what));
          ok = false;
          continue;
        }
      }
      result.push_back(v->get());
    }
    if (ok)
      out = std::move(result);
  }

  /// A sub-table; wrong types are reported, with `note` appended.
  const toml::table* table(const char* name, std::string_view note = {}) {
    auto n = get(name);
    if (!n)
      return nullptr;
    auto t = n->as_table();
    if (!t)
      invalid(name, *n,
              std::string{"expected table, got "} + type_name(*n)
                + std::string{note});
    return t;
  }

  /// An array of tables (`[[header]]`, `header` defaulting to `name`);
  /// wrong types are reported, and elements that are not tables come back as
  /// nullptr.
  std::vector<const toml::table*> tables(const char* name,
                                         std::string_view header = {}) {
    std::vector<const toml::table*> result;
    auto n = get(name);
    if (!n)
      return result;
    auto arr = n->as_array();
    if (!arr) {
      auto h = header.empty() ? std::string{name} : std::string{header};
      wrong_type(name, *n, ("array of tables ([[" + h + "]])").c_str());
      return result;
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      auto& elem = *arr->get(i);
      auto t = elem.as_table();
      if (!t)
        parser_.error(position_of(elem.source()),
                      key_of(name) + "[" + std::to_string(i) + "]",
                      std::string{"expected table, got "} + type_name(elem));
      result.push_back(t);
    }
    return result;
  }

  /// Reports a missing required key at the table's header.
  void require(const char* name) {
    if (!table_.contains(name))
      parser_.error(position(), key_of(name), "missing required key");
  }

  /// Marks `name` as a key that used to live here: `finish` reports it as
  /// unknown, followed by `note` saying where it went.
  void moved(const char* name, std::string note) {
    moved_.emplace_back(name, std::move(note));
  }

  /// Reports every key nobody asked for.
  void finish() {
    for (auto&& [k, v] : table_) {
      auto name = std::string{k.str()};
      if (std::find(known_.begin(), known_.end(), name) != known_.end())
        continue;
      auto what = v.is_table() || v.is_array_of_tables() ? "unknown table"
                                                         : "unknown key";
      auto m = std::find_if(moved_.begin(), moved_.end(), [&](auto& x) {
        return x.first == name;
      });
      auto more = m != moved_.end() ? "; " + m->second : hint(name, known_);
      parser_.error(position_of(k, v), key_of(name), what + more);
    }
  }

  /// Checks that a string is one of `choices`, listing them when not.
  static check_fn choice_of(std::vector<std::string> choices) {
    return [choices = std::move(choices)](const std::string& x) -> std::string {
      if (std::find(choices.begin(), choices.end(), x) != choices.end())
        return {};
      return "must be one of " + join(choices) + ", got '" + x + "'"
             + hint(x, choices);
    };
  }

 private:
  parser& parser_;
  const toml::table& table_;
  std::string prefix_;
  std::vector<std::string> known_;
  std::vector<std::pair<std::string, std::string>> moved_;
};

check_fn not_empty() {
  return [](const std::string& x) -> std::string {
    return x.empty() ? "must not be empty" : "";
  };
}

check_fn plain_name() {
  return [](const std::string& x) -> std::string {
    if (is_plain_name(x))
      return {};
    return "must match ^[a-z][a-z0-9_-]{0,63}$, got '" + x + "'";
  };
}

check_fn tool_name() {
  return [](const std::string& x) -> std::string {
    if (is_tool_name(x))
      return {};
    return "must match ^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$, got '" + x + "'";
  };
}

check_fn cron_fields() {
  return [](const std::string& x) -> std::string {
    auto n = count_fields(x);
    if (n == 5)
      return {};
    return "expected five fields (minute hour day-of-month month "
           "day-of-week), got "
           + std::to_string(n) + " in '" + x + "'";
  };
}

/// An http:// URL with a host; "" (unset) passes, `validate_settings` asks
/// for it where it is required.
check_fn http_url() {
  return [](const std::string& x) -> std::string {
    if (x.empty())
      return {};
    if (x.rfind("https://", 0) == 0)
      return "https:// is not supported; only http:// URLs are, got '" + x
             + "'";
    if (x.rfind("http://", 0) != 0 || x.size() == 7 || x[7] == '/')
      return "must be an http://HOST[:PORT][/PATH] URL, got '" + x + "'";
    return {};
  };
}

/// Source channels of `[[messenger.adapter]]` and `[[router.rule]]`; "*"
/// means all.
const std::vector<std::string>& channel_names() {
  static const std::vector<std::string> names{"*",     "telegram", "slack",
                                              "email", "api",      "mcp"};
  return names;
}

/// Output families of LLM CLIs, for `[butler.runtime]` and `[router]`.
const std::vector<std::string>& cli_families() {
  static const std::vector<std::string> names{"claude", "codex", "opencode"};
  return names;
}

constexpr int64_t u32_max = 4294967295;
constexpr int64_t i64_max = 9223372036854775807;

void read_node(parser& p, const toml::table& t, node_config& c) {
  section s{p, t, "node"};
  s.string("name", c.name, [](const std::string& x) -> std::string {
    if (is_node_name(x))
      return {};
    return "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, got '" + x + "'";
  });
  s.integer("drain_deadline_s", c.drain_deadline_s, 0, 3600);
  s.one_of("log_level", c.log_level,
           {"trace", "debug", "info", "warn", "error"});
  s.finish();
}

void read_database(parser& p, const toml::table& t, database_config& c) {
  section s{p, t, "database"};
  s.string("url", c.url);
  s.integer("pool_size", c.pool_size, 1, 64);
  s.integer("writer_connections", c.writer_connections, 1, 16);
  s.integer("lanes", c.lanes, 1, 16);
  s.integer("max_batch", c.max_batch, 1, 10000);
  s.integer("group_commit_delay_us", c.group_commit_delay_us, 0, 100000);
  s.integer("connect_timeout_s", c.connect_timeout_s, 1, 300);
  s.integer("retention_months", c.retention_months, 1, 120);
  s.integer("partitions_ahead", c.partitions_ahead, 0, 24);
  s.finish();
}

void read_http(parser& p, const toml::table& t, http_config& c) {
  section s{p, t, "http"};
  s.boolean("enabled", c.enabled);
  s.string("bind", c.bind, not_empty());
  s.integer("port", c.port, 0, 65535);
  s.string("token", c.token);
  s.integer("max_body_bytes", c.max_body_bytes, 1024, 64 * 1024 * 1024);
  s.integer("threads", c.threads, 1, 64);
  s.integer("max_connections", c.max_connections, 1, 65536);
  s.integer("request_timeout_ms", c.request_timeout_ms, 1, 600000);
  s.finish();
}

void read_switchboard(parser& p, const toml::table& t, switchboard_config& c) {
  section s{p, t, "switchboard"};
  s.boolean("enabled", c.enabled);
  s.integer("max_in_flight", c.max_in_flight, 1, 1000000);
  s.integer("queue_capacity", c.queue_capacity, 1, 1000000);
  s.integer("workers", c.workers, 1, 256);
  s.integer("scanner_interval_s", c.scanner_interval_s, 1, 3600);
  s.integer("scanner_grace_s", c.scanner_grace_s, 0, 3600);
  s.integer("scanner_batch_size", c.scanner_batch_size, 1, 10000);
  s.integer("lease_s", c.lease_s, 1, 86400);
  s.integer("dedupe_window_s", c.dedupe_window_s, 1, 86400);
  s.integer("route_timeout_s", c.route_timeout_s, 1, 86400);
  s.integer("retry_base_ms", c.retry_base_ms, 1, 600000);
  s.integer("retry_cap_ms", c.retry_cap_ms, 1, 600000);
  s.integer("circuit_failure_threshold", c.circuit_failure_threshold, 1, 1000);
  s.integer("circuit_open_s", c.circuit_open_s, 1, 3600);
  s.one_of("fanout_mode", c.fanout_mode,
           {"parallel", "ordered", "conditional"});
  s.integer("max_in_progress", c.max_in_progress, 1, 1000000);
  s.integer("max_waiting", c.max_waiting, 1, 100000);
  s.moved("router", "it is now [router] kind");
  s.finish();
}

void read_rule(parser& p, const toml::table& t, std::string prefix,
               routing_rule_config& c) {
  section s{p, t, std::move(prefix)};
  s.strings("channels", c.channels, section::choice_of(channel_names()));
  s.strings("allow", c.allow, plain_name());
  s.strings("deny", c.deny, plain_name());
  s.finish();
}

void read_router(parser& p, const toml::table& t, router_config& c) {
  section s{p, t, "router"};
  s.one_of("kind", c.kind, {"rules", "cli"});
  s.number("confidence_threshold", c.confidence_threshold, 0.0, 1.0);
  s.one_of("family", c.family, cli_families());
  s.strings("command", c.command);
  s.integer("timeout_s", c.timeout_s, 1, 3600);
  s.integer("max_output_bytes", c.max_output_bytes, 1024, 64 * 1024 * 1024);
  auto rules = s.tables("rule", "router.rule");
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!rules[i])
      continue;
    auto prefix = "router.rule[" + std::to_string(i) + "]";
    p.settings.positions[prefix] = position_of(rules[i]->source());
    c.rules.emplace_back();
    read_rule(p, *rules[i], prefix, c.rules.back());
  }
  s.finish();
}

void read_policy(parser& p, const toml::table& t, std::string prefix,
                 policy_config& c) {
  section s{p, t, std::move(prefix)};
  s.require("tier");
  s.one_of("tier", c.tier, {"default", "interactive", "high_priority"});
  s.integer("wall_clock_s", c.wall_clock_s, 1, 604800);
  s.integer("max_invocations", c.max_invocations, 1, 10000);
  s.integer("retry_max_attempts", c.retry_max_attempts, 1, 100);
  s.finish();
}

void read_runtime(parser& p, const toml::table& t, std::string prefix,
                  runtime_config& c) {
  section s{p, t, std::move(prefix)};
  s.one_of("kind", c.kind, {"scripted", "cli"});
  s.integer("turn_ms", c.turn_ms, 0, 3600000);
  s.integer("turns", c.turns, 1, 1000);
  s.number("fail_rate", c.fail_rate, 0.0, 1.0);
  s.integer("fail_attempts", c.fail_attempts, 0, 1000);
  s.one_of("fail_class", c.fail_class, taxonomy_classes());
  s.string("reply", c.reply);
  s.integer("seed", c.seed, 0, i64_max);
  s.one_of("family", c.family, cli_families());
  s.strings("command", c.command);
  s.one_of("prompt_via", c.prompt_via, {"stdin", "argument"});
  s.integer("max_output_bytes", c.max_output_bytes, 1024, 64 * 1024 * 1024);
  s.integer("kill_grace_ms", c.kill_grace_ms, 0, 60000);
  s.finish();
}

void read_schedule(parser& p, const toml::table& t, std::string prefix,
                   schedule_config& c) {
  section s{p, t, std::move(prefix)};
  s.require("name");
  s.string("name", c.name, plain_name());
  s.integer("every_s", c.every_s, 1, 31536000);
  s.string("cron", c.cron, cron_fields());
  s.require("prompt");
  s.string("prompt", c.prompt, not_empty());
  s.finish();
}

void read_butler(parser& p, const toml::table& t, std::string prefix,
                 butler_config& c) {
  section s{p, t, prefix};
  s.require("name");
  s.string("name", c.name, plain_name());
  s.string("description", c.description);
  s.strings("triggers", c.triggers, not_empty());
  s.strings("keywords", c.keywords, not_empty());
  s.strings("capabilities", c.capabilities, tool_name());
  s.integer("max_concurrent_sessions", c.max_concurrent_sessions, 1, 256);
  s.integer("max_pending", c.max_pending, 0, 100000);
  s.integer("session_timeout_s", c.session_timeout_s, 1, 86400);
  s.integer("lease_s", c.lease_s, 2, 86400);
  s.string("node", c.node);
  if (auto rt = s.table("runtime", "; the runtime is the table "
                                   "[butler.runtime], its adapter is `kind`"))
    read_runtime(p, *rt, prefix + ".runtime", c.runtime);
  auto schedules = s.tables("schedule", "butler.schedule");
  for (size_t i = 0; i < schedules.size(); ++i) {
    if (!schedules[i])
      continue;
    auto sub = prefix + ".schedule[" + std::to_string(i) + "]";
    p.settings.positions[sub] = position_of(schedules[i]->source());
    c.schedules.emplace_back();
    read_schedule(p, *schedules[i], sub, c.schedules.back());
  }
  s.moved("command", "it is now a key of [butler.runtime]");
  s.finish();
}

void read_adapter(parser& p, const toml::table& t, std::string prefix,
                  delivery_adapter_config& c) {
  section s{p, t, std::move(prefix)};
  s.require("kind");
  s.one_of("kind", c.kind, {"webhook", "outbox"});
  s.strings("channels", c.channels, section::choice_of(channel_names()));
  s.string("url", c.url, http_url());
  s.string("token", c.token);
  s.integer("timeout_ms", c.timeout_ms, 1, 600000);
  s.integer("retries", c.retries, 0, 100);
  s.string("path", c.path);
  s.finish();
}

void read_messenger(parser& p, const toml::table& t, messenger_config& c) {
  section s{p, t, "messenger"};
  s.integer("max_concurrent_sessions", c.max_concurrent_sessions, 1, 256);
  s.integer("max_pending", c.max_pending, 0, 100000);
  auto adapters = s.tables("adapter", "messenger.adapter");
  for (size_t i = 0; i < adapters.size(); ++i) {
    if (!adapters[i])
      continue;
    auto prefix = "messenger.adapter[" + std::to_string(i) + "]";
    p.settings.positions[prefix] = position_of(adapters[i]->source());
    c.adapters.emplace_back();
    read_adapter(p, *adapters[i], prefix, c.adapters.back());
  }
  s.finish();
}

void read_connector(parser& p, const toml::table& t, std::string prefix,
                    connector_config& c) {
  section s{p, t, std::move(prefix)};
  s.require("name");
  s.string("name", c.name, plain_name());
  s.require("type");
  s.one_of("type", c.type, {"http", "jsonl", "maildir", "telegram"});
  s.string("endpoint_identity", c.endpoint_identity);
  s.string("path", c.path);
  s.integer("max_in_flight", c.max_in_flight, 1, 10000);
  s.boolean("enabled", c.enabled);
  s.finish();
}

void read_cluster_tls(parser& p, const toml::table& t, cluster_config& c) {
  section s{p, t, "cluster.tls"};
  s.string("cert", c.tls_certificate);
  s.string("key", c.tls_key);
  s.string("ca", c.tls_cafile);
  s.finish();
}

void read_cluster(parser& p, const toml::table& t, cluster_config& c) {
  section s{p, t, "cluster"};
  s.string("bind", c.bind, not_empty());
  s.integer("port", c.port, 0, 65535);
  s.strings("peers", c.peers, check_peer);
  s.boolean("switchboard", c.switchboard);
  s.strings("butlers", c.butlers, not_empty());
  s.integer("heartbeat_interval_ms", c.heartbeat_interval_ms, 10, 600000);
  s.integer("connection_timeout_ms", c.connection_timeout_ms, 10, 600000);
  s.integer("quarantine_after_ms", c.quarantine_after_ms, 0, 86400000);
  s.integer("reconnect_cap_ms", c.reconnect_cap_ms, 100, 600000);
  if (auto tls = s.table("tls"))
    read_cluster_tls(p, *tls, c);
  s.moved("enabled", "clustering is on when cluster.port or cluster.peers "
                     "is set");
  s.moved("tls_certificate", "it is now `cert` of [cluster.tls]");
  s.moved("tls_key", "it is now `key` of [cluster.tls]");
  s.moved("tls_cafile", "it is now `ca` of [cluster.tls]");
  s.finish();
}

void read_scheduler(parser& p, const toml::table& t, scheduler_config& c) {
  section s{p, t, "scheduler"};
  s.integer("threads", c.threads, 0, 1024);
  s.one_of("policy", c.policy, {"stealing", "sharing"});
  s.integer("max_throughput", c.max_throughput, 0, u32_max);
  s.finish();
}

void read_threads(parser& p, const toml::table& t, threads_config& c) {
  section s{p, t, "threads"};
  s.integer("idle_timeout_s", c.idle_timeout_s, 1, 86400);
  s.integer("max_queued_runs", c.max_queued_runs, 1, 1000);
  s.integer("max_pending_turns", c.max_pending_turns, 1, 10000);
  s.integer("max_subscribers", c.max_subscribers, 1, 100000);
  s.integer("subscriber_buffer", c.subscriber_buffer, 1, 100000);
  s.integer("heartbeat_ms", c.heartbeat_ms, 100, 600000);
  s.finish();
}

void read_root(parser& p, const toml::table& root) {
  auto& out = p.settings;
  section s{p, root, ""};
  if (auto t = s.table("node"))
    read_node(p, *t, out.node);
  if (auto t = s.table("database"))
    read_database(p, *t, out.database);
  if (auto t = s.table("http"))
    read_http(p, *t, out.http);
  if (auto t = s.table("switchboard"))
    read_switchboard(p, *t, out.switchboard);
  if (auto t = s.table("router", "; the router is the table [router], its "
                                 "choice of router is `kind`"))
    read_router(p, *t, out.router);
  auto policies = s.tables("policy");
  for (size_t i = 0; i < policies.size(); ++i) {
    if (!policies[i])
      continue;
    auto prefix = "policy[" + std::to_string(i) + "]";
    p.settings.positions[prefix] = position_of(policies[i]->source());
    out.policies.emplace_back();
    read_policy(p, *policies[i], prefix, out.policies.back());
  }
  auto butlers = s.tables("butler");
  for (size_t i = 0; i < butlers.size(); ++i) {
    if (!butlers[i])
      continue;
    auto prefix = "butler[" + std::to_string(i) + "]";
    p.settings.positions[prefix] = position_of(butlers[i]->source());
    out.butlers.emplace_back();
    read_butler(p, *butlers[i], prefix, out.butlers.back());
  }
  if (auto t = s.table("messenger"))
    read_messenger(p, *t, out.messenger);
  auto connectors = s.tables("connector");
  for (size_t i = 0; i < connectors.size(); ++i) {
    if (!connectors[i])
      continue;
    auto prefix = "connector[" + std::to_string(i) + "]";
    p.settings.positions[prefix] = position_of(connectors[i]->source());
    out.connectors.emplace_back();
    read_connector(p, *connectors[i], prefix, out.connectors.back());
  }
  if (auto t = s.table("cluster"))
    read_cluster(p, *t, out.cluster);
  if (auto t = s.table("scheduler"))
    read_scheduler(p, *t, out.scheduler);
  if (auto t = s.table("threads"))
    read_threads(p, *t, out.threads);
  s.finish();
}

// -- validation ---------------------------------------------------------------

/// Position of the first of `keys` that was written in the file.
source_position where(const node_settings& s,
                      std::initializer_list<std::string> keys) {
  for (auto& k : keys)
    if (auto i = s.positions.find(k); i != s.positions.end())
      return i->second;
  return {};
}

// -- TOML output --------------------------------------------------------------

std::string quote(std::string_view x) {
  std::string out = "\"";
  for (unsigned char c : x) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string quote(const std::vector<std::string>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += quote(xs[i]);
  }
  out += "]";
  return out;
}

const char* boolean(bool x) {
  return x ? "true" : "false";
}

} // namespace

// -- equality -----------------------------------------------------------------

bool operator==(const node_config& x, const node_config& y) {
  return std::tie(x.name, x.drain_deadline_s, x.log_level)
         == std::tie(y.name, y.drain_deadline_s, y.log_level);
}

bool operator==(const database_config& x, const database_config& y) {
  return std::tie(x.url, x.pool_size, x.writer_connections, x.lanes,
                  x.max_batch, x.group_commit_delay_us, x.connect_timeout_s,
                  x.retention_months, x.partitions_ahead)
         == std::tie(y.url, y.pool_size, y.writer_connections, y.lanes,
                     y.max_batch, y.group_commit_delay_us, y.connect_timeout_s,
                     y.retention_months, y.partitions_ahead);
}

bool operator==(const http_config& x, const http_config& y) {
  return std::tie(x.enabled, x.bind, x.port, x.token, x.max_body_bytes,
                  x.threads, x.max_connections, x.request_timeout_ms)
         == std::tie(y.enabled, y.bind, y.port, y.token, y.max_body_bytes,
                     y.threads, y.max_connections, y.request_timeout_ms);
}

bool operator==(const switchboard_config& x, const switchboard_config& y) {
  return std::tie(x.enabled, x.max_in_flight, x.queue_capacity, x.workers,
                  x.scanner_interval_s, x.scanner_grace_s, x.scanner_batch_size,
                  x.lease_s, x.dedupe_window_s, x.route_timeout_s,
                  x.retry_base_ms, x.retry_cap_ms, x.circuit_failure_threshold,
                  x.circuit_open_s, x.fanout_mode, x.max_in_progress,
                  x.max_waiting)
         == std::tie(y.enabled, y.max_in_flight, y.queue_capacity, y.workers,
                     y.scanner_interval_s, y.scanner_grace_s,
                     y.scanner_batch_size, y.lease_s, y.dedupe_window_s,
                     y.route_timeout_s, y.retry_base_ms, y.retry_cap_ms,
                     y.circuit_failure_threshold, y.circuit_open_s,
                     y.fanout_mode, y.max_in_progress, y.max_waiting);
}

bool operator==(const routing_rule_config& x, const routing_rule_config& y) {
  return std::tie(x.channels, x.allow, x.deny)
         == std::tie(y.channels, y.allow, y.deny);
}

bool operator==(const router_config& x, const router_config& y) {
  return std::tie(x.kind, x.confidence_threshold, x.family, x.command,
                  x.timeout_s, x.max_output_bytes, x.rules)
         == std::tie(y.kind, y.confidence_threshold, y.family, y.command,
                     y.timeout_s, y.max_output_bytes, y.rules);
}

bool operator==(const policy_config& x, const policy_config& y) {
  return std::tie(x.tier, x.wall_clock_s, x.max_invocations,
                  x.retry_max_attempts)
         == std::tie(y.tier, y.wall_clock_s, y.max_invocations,
                     y.retry_max_attempts);
}

bool operator==(const runtime_config& x, const runtime_config& y) {
  return std::tie(x.kind, x.turn_ms, x.turns, x.fail_rate, x.fail_attempts,
                  x.fail_class, x.reply, x.seed, x.family, x.command,
                  x.prompt_via, x.max_output_bytes, x.kill_grace_ms)
         == std::tie(y.kind, y.turn_ms, y.turns, y.fail_rate, y.fail_attempts,
                     y.fail_class, y.reply, y.seed, y.family, y.command,
                     y.prompt_via, y.max_output_bytes, y.kill_grace_ms);
}

bool operator==(const schedule_config& x, const schedule_config& y) {
  return std::tie(x.name, x.every_s, x.cron, x.prompt)
         == std::tie(y.name, y.every_s, y.cron, y.prompt);
}

bool operator==(const butler_config& x, const butler_config& y) {
  return std::tie(x.name, x.description, x.triggers, x.keywords, x.capabilities,
                  x.max_concurrent_sessions, x.max_pending, x.session_timeout_s,
                  x.lease_s, x.node, x.runtime, x.schedules)
         == std::tie(y.name, y.description, y.triggers, y.keywords,
                     y.capabilities, y.max_concurrent_sessions, y.max_pending,
                     y.session_timeout_s, y.lease_s, y.node, y.runtime,
                     y.schedules);
}

bool operator==(const delivery_adapter_config& x,
                const delivery_adapter_config& y) {
  return std::tie(x.kind, x.channels, x.url, x.token, x.timeout_ms, x.retries,
                  x.path)
         == std::tie(y.kind, y.channels, y.url, y.token, y.timeout_ms,
                     y.retries, y.path);
}

bool operator==(const messenger_config& x, const messenger_config& y) {
  return std::tie(x.max_concurrent_sessions, x.max_pending, x.adapters)
         == std::tie(y.max_concurrent_sessions, y.max_pending, y.adapters);
}

bool operator==(const connector_config& x, const connector_config& y) {
  return std::tie(x.name, x.type, x.endpoint_identity, x.path, x.max_in_flight,
                  x.enabled)
         == std::tie(y.name, y.type, y.endpoint_identity, y.path,
                     y.max_in_flight, y.enabled);
}

bool operator==(const cluster_config& x, const cluster_config& y) {
  return std::tie(x.bind, x.port, x.peers, x.switchboard, x.butlers,
                  x.heartbeat_interval_ms, x.connection_timeout_ms,
                  x.quarantine_after_ms, x.reconnect_cap_ms, x.tls_certificate,
                  x.tls_key, x.tls_cafile)
         == std::tie(y.bind, y.port, y.peers, y.switchboard, y.butlers,
                     y.heartbeat_interval_ms, y.connection_timeout_ms,
                     y.quarantine_after_ms, y.reconnect_cap_ms,
                     y.tls_certificate, y.tls_key, y.tls_cafile);
}

bool cluster_config::hosts(const std::string& name) const {
  return std::find(butlers.begin(), butlers.end(), "*") != butlers.end()
         || std::find(butlers.begin(), butlers.end(), name) != butlers.end();
}

bool operator==(const scheduler_config& x, const scheduler_config& y) {
  return std::tie(x.threads, x.policy, x.max_throughput)
         == std::tie(y.threads, y.policy, y.max_throughput);
}

bool operator==(const threads_config& x, const threads_config& y) {
  return std::tie(x.idle_timeout_s, x.max_queued_runs, x.max_pending_turns,
                  x.max_subscribers, x.subscriber_buffer, x.heartbeat_ms)
         == std::tie(y.idle_timeout_s, y.max_queued_runs, y.max_pending_turns,
                     y.max_subscribers, y.subscriber_buffer, y.heartbeat_ms);
}

bool operator==(const node_settings& x, const node_settings& y) {
  return std::tie(x.node, x.database, x.http, x.switchboard, x.router,
                  x.policies, x.butlers, x.messenger, x.connectors, x.cluster,
                  x.scheduler, x.threads)
         == std::tie(y.node, y.database, y.http, y.switchboard, y.router,
                     y.policies, y.butlers, y.messenger, y.connectors,
                     y.cluster, y.scheduler, y.threads);
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
  std::stable_sort(p.errors.begin(), p.errors.end(),
                   [](const config_error& x, const config_error& y) {
                     return std::tie(x.line, x.column)
                            < std::tie(y.line, y.column);
                   });
  result.errors = std::move(p.errors);
  if (result.errors.empty())
    result.settings = std::move(p.settings);
  return result;
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
  return parse_config(text, path);
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
  return errors;
}

// -- validation ---------------------------------------------------------------

bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]")
    return true;
  // IPv4 dotted quad whose first octet is 127.
  int octets = 0;
  size_t i = 0;
  int first = -1;
  while (i <= host.size()) {
    size_t j = i;
    int value = 0;
    while (j < host.size() && host[j] >= '0' && host[j] <= '9' && j - i < 3) {
      value = value * 10 + (host[j] - '0');
      ++j;
    }
    if (j == i || value > 255)
      return false;
    if (first < 0)
      first = value;
    ++octets;
    if (j == host.size())
      break;
    if (host[j] != '.')
      return false;
    i = j + 1;
  }
  return octets == 4 && first == 127;
}

std::vector<config_error> validate_settings(const node_settings& s) {
  std::vector<config_error> errors;
  auto error = [&](source_position pos, std::string key, std::string msg) {
    errors.push_back(config_error{s.path, pos.line, pos.column, std::move(key),
                                  std::move(msg)});
  };
  // Names of [[butler]], [[connector]] and [[butler.schedule]] entries and
  // tiers of [[policy]] entries are unique: entry `i` of `items`, keyed
  // `base[i]`, is reported against the first entry with the same `field`
  // (member pointer, written in the file as `field_key`).
  auto check_unique = [&](const auto& items, size_t i, const std::string& base,
                          auto field, const std::string& field_key,
                          const std::string& what) {
    auto& value = items[i].*field;
    if (value.empty())
      return;
    for (size_t j = 0; j < i; ++j) {
      if (items[j].*field != value)
        continue;
      auto prefix = base + "[" + std::to_string(i) + "]";
      auto first = base + "[" + std::to_string(j) + "]";
      auto first_pos = where(s, {first + "." + field_key, first});
      auto at = first_pos.line > 0
                  ? first + ", line " + std::to_string(first_pos.line)
                  : first;
      error(where(s, {prefix + "." + field_key, prefix}),
            prefix + "." + field_key,
            "duplicate " + what + " '" + value + "' (first in " + at + ")");
      return;
    }
  };
  auto check_unique_name = [&](const auto& items, size_t i,
                               const std::string& base,
                               const std::string& kind) {
    using item = std::decay_t<decltype(items[i])>;
    check_unique(items, i, base, &item::name, "name", kind + " name");
  };
  // HTTP.
  if (s.http.enabled && !is_loopback(s.http.bind) && s.http.token.empty())
    error(where(s, {"http.bind", "http"}), "http.bind",
          "binding a non-loopback address requires http.token");
  // Switchboard.
  auto& sb = s.switchboard;
  if (sb.retry_base_ms > sb.retry_cap_ms)
    error(where(s, {"switchboard.retry_base_ms", "switchboard.retry_cap_ms",
                    "switchboard"}),
          "switchboard.retry_base_ms",
          "must not exceed switchboard.retry_cap_ms ("
            + std::to_string(sb.retry_base_ms) + " > "
            + std::to_string(sb.retry_cap_ms) + ")");
  // Router. parse_config already rejects an unknown family whatever the
  // kind; this catches settings built in code.
  auto& ro = s.router;
  auto& families = cli_families();
  if (ro.kind == "cli"
      && std::find(families.begin(), families.end(), ro.family)
           == families.end())
    error(where(s, {"router.family", "router.kind", "router"}), "router.family",
          "kind = \"cli\" requires one of " + join(families) + ", got '"
            + ro.family + "'");
  if (!ro.command.empty() && ro.command[0].empty())
    error(where(s, {"router.command", "router"}), "router.command",
          "the program (the first element) must not be empty");
  for (size_t i = 0; i < ro.rules.size(); ++i) {
    auto& r = ro.rules[i];
    auto prefix = "router.rule[" + std::to_string(i) + "]";
    if (r.channels.empty())
      error(where(s, {prefix + ".channels", prefix}), prefix + ".channels",
            "applies to no channel; [\"*\"] means every channel");
    for (auto k = r.deny.begin(); k != r.deny.end(); ++k)
      if (std::find(r.deny.begin(), k, *k) == k // once per name
          && std::find(r.allow.begin(), r.allow.end(), *k) != r.allow.end())
        error(where(s, {prefix + ".deny", prefix}), prefix + ".deny",
              "'" + *k + "' is both allowed and denied by this rule");
  }
  // Policies.
  for (size_t i = 0; i < s.policies.size(); ++i)
    check_unique(s.policies, i, "policy", &policy_config::tier, "tier",
                 "policy tier");
  // Butlers.
  for (size_t i = 0; i < s.butlers.size(); ++i) {
    auto& b = s.butlers[i];
    auto prefix = "butler[" + std::to_string(i) + "]";
    if (b.name == "messenger")
      error(where(s, {prefix + ".name", prefix}), prefix + ".name",
            "messenger is configured under [messenger], not as a [[butler]]");
    auto& rt = b.runtime;
    if (!rt.command.empty() && rt.command[0].empty())
      error(where(s,
                  {prefix + ".runtime.command", prefix + ".runtime", prefix}),
            prefix + ".runtime.command",
            "the program (the first element) must not be empty");
    if (!b.node.empty() && b.node != s.node.name && !s.cluster.active())
      error(where(s, {prefix + ".node", prefix}), prefix + ".node",
            "runs on node '" + b.node
              + "', which requires the cluster (cluster.port or "
                "cluster.peers)");
    check_unique_name(s.butlers, i, "butler", "butler");
    for (size_t j = 0; j < b.schedules.size(); ++j) {
      auto& sc = b.schedules[j];
      auto base = prefix + ".schedule";
      auto sub = base + "[" + std::to_string(j) + "]";
      if (sc.every_s != 0 && !sc.cron.empty())
        error(where(s, {sub + ".cron", sub}), sub + ".cron",
              "set together with every_s; a schedule has exactly one of "
              "every_s and cron");
      if (sc.every_s == 0 && sc.cron.empty())
        error(where(s, {sub}), sub,
              "has neither every_s nor cron; a schedule has exactly one");
      check_unique_name(b.schedules, j, base, "schedule");
    }
  }
  // Messenger.
  for (size_t i = 0; i < s.messenger.adapters.size(); ++i) {
    auto& a = s.messenger.adapters[i];
    auto prefix = "messenger.adapter[" + std::to_string(i) + "]";
    if (a.kind == "webhook" && a.url.empty())
      error(where(s, {prefix + ".kind", prefix}), prefix + ".url",
            "a 'webhook' adapter requires a url");
    if (a.kind == "outbox" && a.path.empty())
      error(where(s, {prefix + ".kind", prefix}), prefix + ".path",
            "an 'outbox' adapter requires a path");
    if (a.channels.empty())
      error(where(s, {prefix + ".channels", prefix}), prefix + ".channels",
            "delivers for no channel; [\"*\"] means every channel");
  }
  // Connectors.
  for (size_t i = 0; i < s.connectors.size(); ++i) {
    auto& c = s.connectors[i];
    auto prefix = "connector[" + std::to_string(i) + "]";
    if ((c.type == "jsonl" || c.type == "maildir") && c.path.empty())
      error(where(s, {prefix + ".type", prefix}), prefix + ".path",
            "a '" + c.type + "' connector requires a path");
    if (c.type == "http" && c.enabled && !s.http.enabled)
      error(where(s, {prefix + ".type", prefix}), prefix + ".type",
            "an 'http' connector requires http.enabled = true");
    check_unique_name(s.connectors, i, "connector", "connector");
  }
  // Cluster.
  auto& cl = s.cluster;
  bool any_tls = !cl.tls_certificate.empty() || !cl.tls_key.empty()
                 || !cl.tls_cafile.empty();
  if (any_tls) {
    // Mutual authentication needs all three: without a CA, CAF would accept
    // any certificate; without a certificate, it falls back to anonymous TLS.
    for (auto [key, value] :
         {std::pair{"cert", &cl.tls_certificate}, std::pair{"key", &cl.tls_key},
          std::pair{"ca", &cl.tls_cafile}})
      if (value->empty())
        error(where(s, {"cluster.tls", "cluster"}),
              std::string{"cluster.tls."} + key,
              "missing: [cluster.tls] needs cert, key and ca (mutual "
              "authentication)");
  }
  if (cl.active() && !is_loopback(cl.bind) && !any_tls)
    error(where(s, {"cluster.bind", "cluster"}), "cluster.bind",
          "binding a non-loopback address ('" + cl.bind
            + "') requires [cluster.tls] with cert, key and ca");
  if (!cl.switchboard && !cl.active())
    error(where(s, {"cluster.switchboard", "cluster"}), "cluster.switchboard",
          "false makes a butler-only node, which requires the cluster "
          "(cluster.port or cluster.peers)");
  for (size_t i = 0; i < cl.butlers.size(); ++i) {
    auto& name = cl.butlers[i];
    if (name == "*" || name == "general")
      continue;
    bool known = std::any_of(s.butlers.begin(), s.butlers.end(),
                             [&](const butler_config& b) {
                               return b.name == name;
                             });
    if (!known)
      error(where(s, {"cluster.butlers", "cluster"}),
            "cluster.butlers[" + std::to_string(i) + "]",
            "no [[butler]] named '" + name + "'");
  }
  if (s.http.enabled && cl.port != 0 && cl.port == s.http.port
      && cl.bind == s.http.bind)
    error(where(s, {"cluster.port", "cluster"}), "cluster.port",
          "same address as http.port");
  std::stable_sort(errors.begin(), errors.end(),
                   [](const config_error& x, const config_error& y) {
                     return std::tie(x.line, x.column)
                            < std::tie(y.line, y.column);
                   });
  return errors;
}

// -- output -------------------------------------------------------------------

std::string redact_database_url(std::string_view url) {
  std::string out{url};
  auto starts_with = [&](std::string_view prefix) {
    return url.substr(0, prefix.size()) == prefix;
  };
  if (starts_with("postgresql://") || starts_with("postgres://")) {
    auto auth_begin = url.find("://") + 3;
    auto auth_end = url.find_first_of("/?#", auth_begin);
    if (auth_end == std::string_view::npos)
      auth_end = url.size();
    // Query parameters first: replacing them does not move the authority.
    auto query = url.find('?', auth_begin);
    if (query != std::string_view::npos) {
      std::string rebuilt{url.substr(0, query + 1)};
      auto rest = url.substr(query + 1);
      auto fragment = rest.find('#');
      auto tail = fragment == std::string_view::npos ? std::string_view{}
                                                     : rest.substr(fragment);
      rest = rest.substr(0, fragment);
      size_t i = 0;
      bool first = true;
      while (i <= rest.size()) {
        auto amp = rest.find('&', i);
        if (amp == std::string_view::npos)
          amp = rest.size();
        auto param = rest.substr(i, amp - i);
        if (!first)
          rebuilt += '&';
        first = false;
        if (param.substr(0, 9) == "password=")
          rebuilt += "password=***";
        else
          rebuilt += param;
        i = amp + 1;
      }
      rebuilt += tail;
      out = std::move(rebuilt);
    }
    auto authority = url.substr(auth_begin, auth_end - auth_begin);
    auto at = authority.rfind('@');
    if (at != std::string_view::npos) {
      auto colon = authority.find(':');
      if (colon != std::string_view::npos && colon < at)
        out.replace(auth_begin + colon + 1, at - colon - 1, "***");
    }
    return out;
  }
  // key=value form: password = value, value plain or single-quoted.
  std::string result;
  size_t i = 0;
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  while (i < url.size()) {
    if (is_space(url[i])) {
      result += url[i++];
      continue;
    }
    auto key_begin = i;
    while (i < url.size() && url[i] != '=' && !is_space(url[i]))
      ++i;
    auto key = url.substr(key_begin, i - key_begin);
    while (i < url.size() && is_space(url[i]))
      ++i;
    if (i >= url.size() || url[i] != '=') {
      // Not key=value: keep the rest untouched.
      result += url.substr(key_begin);
      return result;
    }
    ++i;
    while (i < url.size() && is_space(url[i]))
      ++i;
    auto value_begin = i;
    if (i < url.size() && url[i] == '\'') {
      ++i;
      while (i < url.size() && url[i] != '\'') {
        if (url[i] == '\\' && i + 1 < url.size())
          ++i;
        ++i;
      }
      if (i < url.size())
        ++i;
    } else {
      while (i < url.size() && !is_space(url[i]))
        ++i;
    }
    result += key;
    result += '=';
    if (key == "password")
      result += "***";
    else
      result += url.substr(value_begin, i - value_begin);
  }
  return result;
}

std::string to_toml(const node_settings& s) {
  std::ostringstream out;
  out << "# Effective configuration of node " << quote(s.node.name);
  if (!s.path.empty())
    out << ", read from " << s.path;
  out << ".\n# Secrets are shown as \"***\".\n";
  auto& n = s.node;
  out << "\n[node]\n"
      << "name = " << quote(n.name) << '\n'
      << "drain_deadline_s = " << n.drain_deadline_s << '\n'
      << "log_level = " << quote(n.log_level) << '\n';
  auto& d = s.database;
  out << "\n[database]\n"
      << "url = " << quote(redact_database_url(d.url)) << '\n'
      << "pool_size = " << d.pool_size << '\n'
      << "writer_connections = " << d.writer_connections << '\n'
      << "lanes = " << d.lanes << '\n'
      << "max_batch = " << d.max_batch << '\n'
      << "group_commit_delay_us = " << d.group_commit_delay_us << '\n'
      << "connect_timeout_s = " << d.connect_timeout_s << '\n'
      << "retention_months = " << d.retention_months << '\n'
      << "partitions_ahead = " << d.partitions_ahead << '\n';
  auto& h = s.http;
  out << "\n[http]\n"
      << "enabled = " << boolean(h.enabled) << '\n'
      << "bind = " << quote(h.bind) << '\n'
      << "port = " << h.port << '\n'
      << "token = " << quote(h.token.empty() ? "" : "***") << '\n'
      << "max_body_bytes = " << h.max_body_bytes << '\n'
      << "threads = " << h.threads << '\n'
      << "max_connections = " << h.max_connections << '\n'
      << "request_timeout_ms = " << h.request_timeout_ms << '\n';
  auto& sb = s.switchboard;
  out << "\n[switchboard]\n"
      << "enabled = " << boolean(sb.enabled) << '\n'
      << "max_in_flight = " << sb.max_in_flight << '\n'
      << "queue_capacity = " << sb.queue_capacity << '\n'
      << "workers = " << sb.workers << '\n'
      << "scanner_interval_s = " << sb.scanner_interval_s << '\n'
      << "scanner_grace_s = " << sb.scanner_grace_s << '\n'
      << "scanner_batch_size = " << sb.scanner_batch_size << '\n'
      << "lease_s = " << sb.lease_s << '\n'
      << "dedupe_window_s = " << sb.dedupe_window_s << '\n'
      << "route_timeout_s = " << sb.route_timeout_s << '\n'
      << "retry_base_ms = " << sb.retry_base_ms << '\n'
      << "retry_cap_ms = " << sb.retry_cap_ms << '\n'
      << "circuit_failure_threshold = " << sb.circuit_failure_threshold << '\n'
      << "circuit_open_s = " << sb.circuit_open_s << '\n'
      << "fanout_mode = " << quote(sb.fanout_mode) << '\n'
      << "max_in_progress = " << sb.max_in_progress << '\n'
      << "max_waiting = " << sb.max_waiting << '\n';
  auto& r = s.router;
  out << "\n[router]\n"
      << "kind = " << quote(r.kind) << '\n'
      << "confidence_threshold = " << format_double(r.confidence_threshold)
      << '\n'
      << "family = " << quote(r.family) << '\n'
      << "command = " << quote(r.command) << '\n'
      << "timeout_s = " << r.timeout_s << '\n'
      << "max_output_bytes = " << r.max_output_bytes << '\n';
  for (auto& rule : r.rules)
    out << "[[router.rule]]\n"
        << "channels = " << quote(rule.channels) << '\n'
        << "allow = " << quote(rule.allow) << '\n'
        << "deny = " << quote(rule.deny) << '\n';
  for (auto& pol : s.policies)
    out << "\n[[policy]]\n"
        << "tier = " << quote(pol.tier) << '\n'
        << "wall_clock_s = " << pol.wall_clock_s << '\n'
        << "max_invocations = " << pol.max_invocations << '\n'
        << "retry_max_attempts = " << pol.retry_max_attempts << '\n';
  auto& c = s.cluster;
  out << "\n[cluster]\n"
      << "bind = " << quote(c.bind) << '\n'
      << "port = " << c.port << '\n'
      << "peers = " << quote(c.peers) << '\n'
      << "switchboard = " << boolean(c.switchboard) << '\n'
      << "butlers = " << quote(c.butlers) << '\n'
      << "heartbeat_interval_ms = " << c.heartbeat_interval_ms << '\n'
      << "connection_timeout_ms = " << c.connection_timeout_ms << '\n'
      << "quarantine_after_ms = " << c.quarantine_after_ms << '\n'
      << "reconnect_cap_ms = " << c.reconnect_cap_ms << '\n';
  if (c.tls())
    out << "[cluster.tls]\n"
        << "cert = " << quote(c.tls_certificate) << '\n'
        << "key = " << quote(c.tls_key) << '\n'
        << "ca = " << quote(c.tls_cafile) << '\n';
  auto& sc = s.scheduler;
  out << "\n[scheduler]\n"
      << "threads = " << sc.threads << '\n'
      << "policy = " << quote(sc.policy) << '\n'
      << "max_throughput = " << sc.max_throughput << '\n';
  auto& th = s.threads;
  out << "\n[threads]\n"
      << "idle_timeout_s = " << th.idle_timeout_s << '\n'
      << "max_queued_runs = " << th.max_queued_runs << '\n'
      << "max_pending_turns = " << th.max_pending_turns << '\n'
      << "max_subscribers = " << th.max_subscribers << '\n'
      << "subscriber_buffer = " << th.subscriber_buffer << '\n'
      << "heartbeat_ms = " << th.heartbeat_ms << '\n';
  for (auto& b : s.butlers) {
    out << "\n[[butler]]\n"
        << "name = " << quote(b.name) << '\n'
        << "description = " << quote(b.description) << '\n'
        << "triggers = " << quote(b.triggers) << '\n'
        << "keywords = " << quote(b.keywords) << '\n'
        << "capabilities = " << quote(b.capabilities) << '\n'
        << "max_concurrent_sessions = " << b.max_concurrent_sessions << '\n'
        << "max_pending = " << b.max_pending << '\n'
        << "session_timeout_s = " << b.session_timeout_s << '\n'
        << "lease_s = " << b.lease_s << '\n'
        << "node = " << quote(b.node) << '\n';
    auto& rt = b.runtime;
    out << "[butler.runtime]\n"
        << "kind = " << quote(rt.kind) << '\n'
        << "turn_ms = " << rt.turn_ms << '\n'
        << "turns = " << rt.turns << '\n'
        << "fail_rate = " << format_double(rt.fail_rate) << '\n'
        << "fail_attempts = " << rt.fail_attempts << '\n'
        << "fail_class = " << quote(rt.fail_class) << '\n'
        << "reply = " << quote(rt.reply) << '\n'
        << "seed = " << rt.seed << '\n'
        << "family = " << quote(rt.family) << '\n'
        << "command = " << quote(rt.command) << '\n'
        << "prompt_via = " << quote(rt.prompt_via) << '\n'
        << "max_output_bytes = " << rt.max_output_bytes << '\n'
        << "kill_grace_ms = " << rt.kill_grace_ms << '\n';
    for (auto& sc : b.schedules) {
      // Unset every_s (0) and cron ("") are left out: 0 is out of range.
      out << "[[butler.schedule]]\n"
          << "name = " << quote(sc.name) << '\n';
      if (sc.every_s != 0)
        out << "every_s = " << sc.every_s << '\n';
      if (!sc.cron.empty())
        out << "cron = " << quote(sc.cron) << '\n';
      out << "prompt = " << quote(sc.prompt) << '\n';
    }
  }
  auto& m = s.messenger;
  out << "\n[messenger]\n"
      << "max_concurrent_sessions = " << m.max_concurrent_sessions << '\n'
      << "max_pending = " << m.max_pending << '\n';
  for (auto& a : m.adapters)
    out << "\n[[messenger.adapter]]\n"
        << "kind = " << quote(a.kind) << '\n'
        << "channels = " << quote(a.channels) << '\n'
        << "url = " << quote(a.url) << '\n'
        << "token = " << quote(a.token.empty() ? "" : "***") << '\n'
        << "timeout_ms = " << a.timeout_ms << '\n'
        << "retries = " << a.retries << '\n'
        << "path = " << quote(a.path) << '\n';
  for (auto& cn : s.connectors)
    out << "\n[[connector]]\n"
        << "name = " << quote(cn.name) << '\n'
        << "type = " << quote(cn.type) << '\n'
        << "endpoint_identity = " << quote(cn.endpoint_identity) << '\n'
        << "path = " << quote(cn.path) << '\n'
        << "max_in_flight = " << cn.max_in_flight << '\n'
        << "enabled = " << boolean(cn.enabled) << '\n';
  return out.str();
}

} // namespace butlers
