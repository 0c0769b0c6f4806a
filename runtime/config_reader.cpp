#include <algorithm>
#include <charconv>
#include <cstdio>

#include "runtime/config_fields.hpp"
#include "runtime/webhook.hpp"

// The TOML reader under the field lists: one `section` per table, the checks
// of string values, and the text helpers that printing shares.

namespace butlers::config_detail {

namespace {

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

} // namespace

std::string hint(std::string_view word,
                 const std::vector<std::string>& candidates) {
  auto best = closest(word, candidates);
  return best.empty() ? std::string{} : "; did you mean '" + best + "'?";
}

namespace {

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

} // namespace

source_position position_of(const toml::source_region& r) {
  return {static_cast<int64_t>(r.begin.line),
          static_cast<int64_t>(r.begin.column)};
}

namespace {

/// Where an entry was written: the key if toml++ knows its place, else the
/// value.
source_position position_of(const toml::key& k, const toml::node& v) {
  auto pos = config_detail::position_of(k.source());
  return pos.line > 0 ? pos : config_detail::position_of(v.source());
}

} // namespace

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs) {
    if (!out.empty())
      out += ", ";
    out += x;
  }
  return out;
}

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

std::string format_double(double x) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x);
  std::string out{buf, res.ptr};
  if (out.find_first_of(".eEn") == std::string::npos)
    out += ".0";
  return out;
}

// -- section ------------------------------------------------------------------

section::section(parser& p, const toml::table& tbl, std::string prefix)
  : parser_(p), table_(tbl), prefix_(std::move(prefix)) {}

std::string section::key_of(std::string_view name) const {
  return prefix_.empty() ? std::string{name}
                         : prefix_ + "." + std::string{name};
}

source_position section::position() const {
  return position_of(table_.source());
}

/// Looks `name` up, marks it known and records its position.
const toml::node* section::get(const char* name) {
  known_.emplace_back(name);
  auto i = table_.find(name);
  if (i == table_.end())
    return nullptr;
  parser_.settings.positions[key_of(name)] = position_of(i->first, i->second);
  return &i->second;
}

void section::wrong_type(const char* name, const toml::node& n,
                         const char* expected) {
  parser_.error(position_of(n.source()), key_of(name),
                std::string{"expected "} + expected + ", got " + type_name(n));
}

void section::invalid(const char* name, const toml::node& n,
                      std::string message) {
  parser_.error(position_of(n.source()), key_of(name), std::move(message));
}

void section::boolean(const char* name, bool& out) {
  if (auto n = get(name)) {
    if (auto v = n->as_boolean())
      out = v->get();
    else
      wrong_type(name, *n, "boolean");
  }
}

bool section::integer(const char* name, int64_t& out, int64_t min,
                      int64_t max) {
  auto n = get(name);
  if (!n)
    return false;
  auto v = n->as_integer();
  if (!v) {
    wrong_type(name, *n, "integer");
    return false;
  }
  auto x = v->get();
  if (x < min || x > max) {
    invalid(name, *n,
            "must be in " + std::to_string(min) + ".." + std::to_string(max)
              + ", got " + std::to_string(x));
    return false;
  }
  out = x;
  return true;
}

void section::string(const char* name, std::string& out,
                     const check_fn& check) {
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

void section::number(const char* name, double& out, double min, double max) {
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

void section::strings(const char* name, std::vector<std::string>& out,
                      const check_fn& check) {
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

const toml::table* section::table(const char* name, std::string_view note) {
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

std::vector<const toml::table*> section::tables(const char* name,
                                                std::string_view header) {
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

void section::require(const char* name) {
  if (!table_.contains(name))
    parser_.error(position(), key_of(name), "missing required key");
}

void section::moved(const char* name, std::string note) {
  moved_.emplace_back(name, std::move(note));
}

void section::finish() {
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

check_fn web_url() {
  return [](const std::string& x) -> std::string {
    std::string error;
    if (x.empty() || parse_http_url(x, &error))
      return {};
    return error;
  };
}

check_fn choice_of(std::vector<std::string> choices) {
  return [choices = std::move(choices)](const std::string& x) -> std::string {
    if (std::find(choices.begin(), choices.end(), x) != choices.end())
      return {};
    return "must be one of " + join(choices) + ", got '" + x + "'"
           + hint(x, choices);
  };
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

} // namespace butlers::config_detail
