#pragma once

// Internal to the config reader (config*.cpp): the declarative field lists
// that read, check, print and compare each section of node.toml, and the
// TOML reader they run on. Adding an option is one line in its section's list
// (config_fields.cpp) plus the member in config.hpp; the member's initializer
// is the default.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "runtime/config.hpp"

namespace butlers::config_detail {

// -- helpers shared by reading, checking and printing -------------------------

/// Checks a string value; returns what is wrong, or "".
using check_fn = std::function<std::string(const std::string&)>;

/// "; did you mean 'X'?" when one of `candidates` is within two edits of
/// `word` (a swap of neighbours counts as one), else "".
std::string hint(std::string_view word,
                 const std::vector<std::string>& candidates);

/// "a, b, c".
std::string join(const std::vector<std::string>& xs);

/// TOML basic string with escapes.
std::string quote(std::string_view x);

/// TOML array of basic strings.
std::string quote(const std::vector<std::string>& xs);

/// Shortest text that reads back as `x`, always with a fraction or exponent
/// so that TOML reads it as a float ("0.0", "0.25", "1e-05", "inf").
std::string format_double(double x);

/// Parses a decimal port 0..65535 made of digits only.
std::optional<uint16_t> parse_port(std::string_view s);

source_position position_of(const toml::source_region& r);

/// Checks that a string is one of `choices`, listing them when not.
check_fn choice_of(std::vector<std::string> choices);

/// Checks that a string is "" or an http:// or https:// URL by
/// parse_http_url's rules (runtime/webhook.hpp), saying why not.
check_fn web_url();

/// The names of E's enumerators in `allowed`, or of all of them.
template<class E>
std::vector<std::string> names_of(const std::vector<E>& allowed = {}) {
  std::vector<std::string> out;
  for (auto& entry : enum_names<E>())
    if (allowed.empty()
        || std::find(allowed.begin(), allowed.end(), entry.value)
             != allowed.end())
      out.emplace_back(entry.name);
  return out;
}

// -- reading ------------------------------------------------------------------

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
  section(parser& p, const toml::table& tbl, std::string prefix);

  /// "PREFIX.name", or "name" at the root.
  std::string key_of(std::string_view name) const;

  /// Position of the table itself (its header).
  source_position position() const;

  void boolean(const char* name, bool& out);
  /// An integer in min..max; nothing is stored when it is out of range.
  bool integer(const char* name, int64_t& out, int64_t min, int64_t max);
  void string(const char* name, std::string& out, const check_fn& check = {});
  /// A float; integers are accepted too ("fail_rate = 1").
  void number(const char* name, double& out, double min, double max);
  void strings(const char* name, std::vector<std::string>& out,
               const check_fn& check = {});

  /// A sub-table; wrong types are reported, with `note` appended.
  const toml::table* table(const char* name, std::string_view note = {});

  /// An array of tables (`[[header]]`, `header` defaulting to `name`);
  /// wrong types are reported, and elements that are not tables come back
  /// as nullptr.
  std::vector<const toml::table*> tables(const char* name,
                                         std::string_view header = {});

  /// Reports a missing required key at the table's header.
  void require(const char* name);

  /// Marks `name` as a key that used to live here: `finish` reports it as
  /// unknown, followed by `note` saying where it went.
  void moved(const char* name, std::string note);

  /// Reports every key nobody asked for.
  void finish();

  /// The parser this section reports to.
  parser& owner() {
    return parser_;
  }

 private:
  const toml::node* get(const char* name);
  void wrong_type(const char* name, const toml::node& n, const char* expected);
  void invalid(const char* name, const toml::node& n, std::string message);

  parser& parser_;
  const toml::table& table_;
  std::string prefix_;
  std::vector<std::string> known_;
  std::vector<std::pair<std::string, std::string>> moved_;
};

// -- field lists --------------------------------------------------------------

/// One option of a table whose values live in a `T`: how to read, print and
/// compare it, and what config/README.md says about it.
template<class T>
struct field {
  /// TOML key within the table.
  const char* key;
  /// What the option does, in one line.
  const char* doc;
  /// Type as the reference names it ("integer", "array of strings", ...).
  const char* type;
  /// "MIN..MAX" of numbers, else "".
  std::string bounds;
  /// Allowed values of an enumeration or of a list's elements, else empty.
  std::vector<std::string> choices;
  /// A missing key is an error.
  bool is_required = false;
  /// Unset by default and printed only when set (its default is out of
  /// range, so printing it would not read back).
  bool is_unset_by_default = false;
  /// Reads the key (if present) into the struct, reporting bad values.
  std::function<void(section&, T&)> read;
  /// The value as TOML text, secrets redacted.
  std::function<std::string(const T&)> print;
  /// Whether two structs hold the same value.
  std::function<bool(const T&, const T&)> equal;

  /// This field, required in the file.
  field required() const {
    auto f = *this;
    f.is_required = true;
    return f;
  }

  /// This field, left out of `to_toml` while at its default.
  field unset_by_default() const {
    auto f = *this;
    f.is_unset_by_default = true;
    return f;
  }
};

template<class T>
using fields = std::vector<field<T>>;

/// Compares a member.
template<class T, class M>
std::function<bool(const T&, const T&)> equal_member(M T::*m) {
  return [m](const T& x, const T& y) {
    return x.*m == y.*m;
  };
}

template<class T>
field<T> flag(const char* key, bool T::*m, const char* doc) {
  return {key,
          doc,
          "boolean",
          {},
          {},
          false,
          false,
          [key, m](section& s, T& c) {
            s.boolean(key, c.*m);
          },
          [m](const T& c) {
            return std::string{c.*m ? "true" : "false"};
          },
          equal_member(m)};
}

template<class T, class I>
field<T> integer(const char* key, I T::*m, int64_t min, int64_t max,
                 const char* doc) {
  return {key,
          doc,
          "integer",
          std::to_string(min) + ".." + std::to_string(max),
          {},
          false,
          false,
          [key, m, min, max](section& s, T& c) {
            int64_t x = 0;
            if (s.integer(key, x, min, max))
              c.*m = static_cast<I>(x);
          },
          [m](const T& c) {
            return std::to_string(c.*m);
          },
          equal_member(m)};
}

template<class T>
field<T> number(const char* key, double T::*m, double min, double max,
                const char* doc) {
  return {key,
          doc,
          "float",
          format_double(min) + ".." + format_double(max),
          {},
          false,
          false,
          [key, m, min, max](section& s, T& c) {
            s.number(key, c.*m, min, max);
          },
          [m](const T& c) {
            return format_double(c.*m);
          },
          equal_member(m)};
}

template<class T>
field<T> text(const char* key, std::string T::*m, const char* doc,
              check_fn check = {}) {
  return {key,
          doc,
          "string",
          {},
          {},
          false,
          false,
          [key, m, check](section& s, T& c) {
            s.string(key, c.*m, check);
          },
          [m](const T& c) {
            return quote(c.*m);
          },
          equal_member(m)};
}

/// A secret string, printed as `redact` makes of it (check-config output
/// must not leak it).
template<class T>
field<T> secret_text(const char* key, std::string T::*m,
                     std::string (*redact)(std::string_view), const char* doc) {
  auto f = text(key, m, doc);
  f.print = [m, redact](const T& c) {
    return quote(redact(c.*m));
  };
  return f;
}

/// A string that must be one of `choices`.
template<class T>
field<T> text_of(const char* key, std::string T::*m,
                 std::vector<std::string> choices, const char* doc) {
  auto f = text(key, m, doc, choice_of(choices));
  f.choices = std::move(choices);
  return f;
}

template<class T>
field<T> texts(const char* key, std::vector<std::string> T::*m, const char* doc,
               check_fn check = {}) {
  return {key,
          doc,
          "array of strings",
          {},
          {},
          false,
          false,
          [key, m, check](section& s, T& c) {
            s.strings(key, c.*m, check);
          },
          [m](const T& c) {
            return quote(c.*m);
          },
          equal_member(m)};
}

/// A list whose elements must be among `choices`.
template<class T>
field<T> texts_of(const char* key, std::vector<std::string> T::*m,
                  std::vector<std::string> choices, const char* doc) {
  auto f = texts(key, m, doc, choice_of(choices));
  f.choices = std::move(choices);
  return f;
}

/// An enumeration, written as one of the names in E's table (`allowed`
/// narrows them; empty means all).
template<class T, class E>
field<T> choice(const char* key, E T::*m, const char* doc,
                std::vector<E> allowed = {}) {
  auto names = names_of<E>(allowed);
  auto check = choice_of(names);
  return {key,
          doc,
          "string",
          {},
          names,
          false,
          false,
          [key, m, check](section& s, T& c) {
            std::string name;
            s.string(key, name, check);
            if (auto x = parse_enum<E>(name))
              c.*m = *x;
          },
          [m](const T& c) {
            return quote(name_of(c.*m));
          },
          equal_member(m)};
}

/// Reads every field of `list` from `s` into `c`.
template<class T>
void read_fields(section& s, const fields<T>& list, T& c) {
  for (auto& f : list) {
    if (f.is_required)
      s.require(f.key);
    f.read(s, c);
  }
}

/// "key = value" lines of every field of `list`.
template<class T>
std::string print_fields(const fields<T>& list, const T& c) {
  static const T defaults{};
  std::string out;
  for (auto& f : list) {
    if (f.is_unset_by_default && f.equal(c, defaults))
      continue;
    out += f.key;
    out += " = ";
    out += f.print(c);
    out += '\n';
  }
  return out;
}

/// Whether every field of `list` is equal in `x` and `y`.
template<class T>
bool equal_fields(const fields<T>& list, const T& x, const T& y) {
  for (auto& f : list)
    if (!f.equal(x, y))
      return false;
  return true;
}

// The field lists, one per table (config_fields.cpp).
const fields<node_config>& node_fields();
const fields<database_config>& database_fields();
const fields<http_config>& http_fields();
const fields<switchboard_config>& switchboard_fields();
const fields<router_config>& router_fields();
const fields<routing_rule_config>& rule_fields();
const fields<policy_config>& policy_fields();
const fields<budget_config>& budget_fields();
const fields<butler_config>& butler_fields();
const fields<runtime_config>& runtime_fields();
const fields<schedule_config>& schedule_fields();
const fields<messenger_config>& messenger_fields();
const fields<delivery_adapter_config>& adapter_fields();
/// `[messenger.adapter.reactions]` of a telegram adapter.
const fields<reaction_config>& reaction_fields();
/// The same keys for a slack adapter: Slack emoji names.
const fields<reaction_config>& slack_reaction_fields();
const fields<connector_config>& connector_fields();
const fields<cluster_config>& cluster_fields();
/// `[cluster.tls]`, whose keys live in cluster_config as tls_*.
const fields<cluster_config>& cluster_tls_fields();
const fields<scheduler_config>& scheduler_fields();
const fields<threads_config>& threads_fields();
const fields<tool_settings>& tool_fields();
/// `[connectors]`.
const fields<connectors_config>& connectors_fields();

/// `[telemetry]` (tracing).
const fields<telemetry_config>& telemetry_fields();

/// `[[http.credential]]` (actors/README.md "Roles").
const fields<http_credential_config>& credential_fields();

/// `[attachments]` (runtime/attachments.md).
const fields<attachment_limits>& attachment_fields();

/// `[rate_limits]` and its `[[rate_limits.tier]]` (runtime/rate_limit.md).
const fields<rate_limits_config>& rate_limit_fields();
const fields<rate_limit_tier>& rate_limit_tier_fields();
/// `[retention]` (runtime/retention.md).
const fields<retention_config>& retention_fields();

} // namespace butlers::config_detail
