#include "runtime/cron.hpp"

#include <time.h>

#include <array>
#include <vector>

namespace butlers {

namespace {

/// What one of the five fields accepts.
struct field_spec {
  const char* name;
  int lo;
  int hi;
  /// Three-letter names for `lo`, `lo + 1`, ...; empty for numeric fields.
  std::vector<std::string_view> names;
  /// Completes "is not a number" in errors, e.g. " or month name".
  const char* names_hint;
};

const field_spec minute_field{"minute", 0, 59, {}, ""};
const field_spec hour_field{"hour", 0, 23, {}, ""};
const field_spec dom_field{"day-of-month", 1, 31, {}, ""};
const field_spec month_field{"month",
                             1,
                             12,
                             {"jan", "feb", "mar", "apr", "may", "jun", "jul",
                              "aug", "sep", "oct", "nov", "dec"},
                             " or month name"};
// 7 is accepted as a second Sunday; names stop at SAT (6).
const field_spec dow_field{"day-of-week",
                           0,
                           7,
                           {"sun", "mon", "tue", "wed", "thu", "fri", "sat"},
                           " or weekday name"};

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i]))
      return false;
  return true;
}

bool all_digits(std::string_view s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (c < '0' || c > '9')
      return false;
  return true;
}

/// Digits to int, saturating well above any valid value so that huge
/// numbers still read as "out of range" rather than overflowing.
int to_int(std::string_view digits) {
  int v = 0;
  for (char c : digits) {
    v = v * 10 + (c - '0');
    if (v > 1000000)
      return 1000000;
  }
  return v;
}

std::string quoted(std::string_view s) {
  std::string out = "'";
  out += s;
  out += '\'';
  return out;
}

bool fail(std::string* error, std::string msg) {
  if (error)
    *error = std::move(msg);
  return false;
}

struct value {
  int v = 0;
  bool from_name = false;
};

/// Parses one number or name of field `f`, range-checked.
bool parse_value(const field_spec& f, std::string_view tok,
                 std::string_view element, value& out, std::string* error) {
  std::string prefix = std::string{f.name} + ": ";
  if (tok.empty())
    return fail(error, prefix + "missing value in " + quoted(element));
  if (all_digits(tok)) {
    out.v = to_int(tok);
    out.from_name = false;
    if (out.v < f.lo || out.v > f.hi)
      return fail(error, prefix + std::string{tok} + " is out of range "
                           + std::to_string(f.lo) + "-" + std::to_string(f.hi));
    return true;
  }
  for (size_t i = 0; i < f.names.size(); ++i) {
    if (iequals(tok, f.names[i])) {
      out.v = f.lo + static_cast<int>(i);
      out.from_name = true;
      return true;
    }
  }
  return fail(error, prefix + quoted(tok) + " is not a number" + f.names_hint);
}

/// Parses a comma-separated field into a bit set.
bool parse_field(const field_spec& f, std::string_view text, uint64_t& bits,
                 std::string* error) {
  std::string prefix = std::string{f.name} + ": ";
  const std::string_view whole = text;
  bits = 0;
  for (;;) {
    auto comma = text.find(',');
    auto element = text.substr(0, comma);
    if (element.empty())
      return fail(error, prefix + "empty list element in " + quoted(whole));
    auto range = element;
    int step = 1;
    bool has_step = false;
    if (auto slash = element.find('/'); slash != std::string_view::npos) {
      has_step = true;
      range = element.substr(0, slash);
      auto step_text = element.substr(slash + 1);
      if (!all_digits(step_text))
        return fail(error, prefix + "step " + quoted(step_text)
                             + " is not a number in " + quoted(element));
      step = to_int(step_text);
      if (step < 1)
        return fail(error,
                    prefix + "step must be at least 1 in " + quoted(element));
    }
    int first = f.lo;
    int last = f.hi;
    if (range == "*") {
      // The full range.
    } else if (auto dash = range.find('-'); dash != std::string_view::npos) {
      value a;
      value b;
      if (!parse_value(f, range.substr(0, dash), element, a, error)
          || !parse_value(f, range.substr(dash + 1), element, b, error))
        return false;
      // `FRI-SUN` reads naturally; SUN is 0 but means 7 as an upper bound.
      if (&f == &dow_field && b.from_name && b.v == 0 && a.v > 0)
        b.v = 7;
      if (a.v > b.v)
        return fail(error, prefix + "range " + quoted(range) + " is reversed");
      first = a.v;
      last = b.v;
    } else {
      if (has_step)
        return fail(error, prefix + "a step needs a range or '*', got "
                             + quoted(element));
      value a;
      if (!parse_value(f, range, element, a, error))
        return false;
      first = last = a.v;
    }
    for (int v = first; v <= last; v += step)
      bits |= uint64_t{1} << v;
    if (comma == std::string_view::npos)
      return true;
    text.remove_prefix(comma + 1);
  }
}

std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_blank(s[i]))
      ++i;
    size_t start = i;
    while (i < s.size() && !is_blank(s[i]))
      ++i;
    if (i > start)
      out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view expand_macro(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7>
    macros{{{"@yearly", "0 0 1 1 *"},
            {"@annually", "0 0 1 1 *"},
            {"@monthly", "0 0 1 * *"},
            {"@weekly", "0 0 * * 0"},
            {"@daily", "0 0 * * *"},
            {"@midnight", "0 0 * * *"},
            {"@hourly", "0 * * * *"}}};
  for (auto& [key, expansion] : macros)
    if (iequals(name, key))
      return expansion;
  return {};
}

bool bit(uint64_t bits, int n) {
  return (bits >> n) & 1u;
}

/// Re-derives every field of `tm` (including the weekday) from its possibly
/// out-of-range members, in UTC.
time_t normalize(struct tm& tm) {
  time_t t = timegm(&tm);
  gmtime_r(&t, &tm);
  return t;
}

} // namespace

std::optional<cron_schedule> cron_schedule::parse(std::string_view expr,
                                                  std::string* error) {
  auto fields = split_blanks(expr);
  if (!fields.empty() && fields[0].front() == '@') {
    auto expansion = expand_macro(fields[0]);
    if (expansion.empty()) {
      fail(error, "unknown macro " + quoted(fields[0]));
      return std::nullopt;
    }
    if (fields.size() > 1) {
      fail(error, "unexpected text after " + quoted(fields[0]));
      return std::nullopt;
    }
    fields = split_blanks(expansion);
  }
  if (fields.size() != 5) {
    fail(error, "expected 5 fields, got " + std::to_string(fields.size()));
    return std::nullopt;
  }
  cron_schedule result;
  if (!parse_field(minute_field, fields[0], result.minutes_, error)
      || !parse_field(hour_field, fields[1], result.hours_, error)
      || !parse_field(dom_field, fields[2], result.days_, error)
      || !parse_field(month_field, fields[3], result.months_, error)
      || !parse_field(dow_field, fields[4], result.weekdays_, error))
    return std::nullopt;
  if (bit(result.weekdays_, 7))
    result.weekdays_ = (result.weekdays_ | 1u) & ~(uint64_t{1} << 7);
  result.dom_star_ = fields[2].front() == '*';
  result.dow_star_ = fields[4].front() == '*';
  return result;
}

bool cron_schedule::day_matches(int mday, int wday) const {
  bool dom = bit(days_, mday);
  bool dow = bit(weekdays_, wday);
  // Vixie cron: with either field unrestricted both must match (one of them
  // trivially does); with both restricted, either one suffices.
  if (dom_star_ || dow_star_)
    return dom && dow;
  return dom || dow;
}

std::optional<std::chrono::system_clock::time_point> cron_schedule::next_after(
  std::chrono::system_clock::time_point t) const {
  using namespace std::chrono;
  auto start = floor<minutes>(t) + minutes{1};
  auto start_s = duration_cast<seconds>(start.time_since_epoch()).count();
  time_t current = static_cast<time_t>(start_s);
  struct tm tm {};
  if (!gmtime_r(&current, &tm))
    return std::nullopt;
  struct tm limit_tm = tm;
  limit_tm.tm_year += 5;
  time_t limit = timegm(&limit_tm);
  // Each step skips to the start of the next month, day, hour or minute, so
  // even a schedule that never matches costs only a few thousand steps.
  while (current <= limit) {
    if (!bit(months_, tm.tm_mon + 1)) {
      tm.tm_mon += 1;
      tm.tm_mday = 1;
      tm.tm_hour = 0;
      tm.tm_min = 0;
    } else if (!day_matches(tm.tm_mday, tm.tm_wday)) {
      tm.tm_mday += 1;
      tm.tm_hour = 0;
      tm.tm_min = 0;
    } else if (!bit(hours_, tm.tm_hour)) {
      tm.tm_hour += 1;
      tm.tm_min = 0;
    } else if (!bit(minutes_, tm.tm_min)) {
      tm.tm_min += 1;
    } else {
      return system_clock::time_point{seconds{current}};
    }
    current = normalize(tm);
  }
  return std::nullopt;
}

} // namespace butlers
