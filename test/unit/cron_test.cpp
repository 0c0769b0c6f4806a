#include <time.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "runtime/cron.hpp"

using butlers::cron_schedule;
using std::chrono::system_clock;

namespace {

/// "YYYY-MM-DD HH:MM[:SS]" in UTC.
system_clock::time_point at(const char* text) {
  struct tm tm {};
  int sec = 0;
  int n = std::sscanf(text, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon,
                      &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &sec);
  EXPECT_GE(n, 5) << text;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = sec;
  return system_clock::from_time_t(timegm(&tm));
}

std::string show(system_clock::time_point t) {
  time_t s = system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %a", &tm);
  return buf;
}

std::string show(const std::optional<system_clock::time_point>& t) {
  return t ? show(*t) : std::string{"none"};
}

cron_schedule must_parse(const char* expr) {
  std::string error;
  auto s = cron_schedule::parse(expr, &error);
  EXPECT_TRUE(s) << expr << ": " << error;
  return s ? *s : *cron_schedule::parse("* * * * *", nullptr);
}

std::string parse_error(const char* expr) {
  std::string error;
  auto s = cron_schedule::parse(expr, &error);
  EXPECT_FALSE(s) << expr << " parsed";
  return error;
}

struct next_case {
  const char* expr;
  const char* from;
  const char* expected; // nullptr: no match within 5 years
};

// Expected values worked out by hand from a calendar (2025-01-01 is a
// Wednesday, 2024 and 2028 are leap years, 2100 is not).
const next_case next_cases[] = {
  // Strictly after, on minute boundaries.
  {"* * * * *", "2025-01-01 00:00:00", "2025-01-01 00:01"},
  {"* * * * *", "2025-01-01 00:00:30", "2025-01-01 00:01"},
  {"* * * * *", "2025-01-01 00:00:59", "2025-01-01 00:01"},
  {"0 * * * *", "2025-01-01 10:00", "2025-01-01 11:00"},
  {"30 9 * * *", "2025-01-01 09:29:59", "2025-01-01 09:30"},
  {"30 9 * * *", "2025-01-01 09:30", "2025-01-02 09:30"},
  // Lists, ranges, steps.
  {"5,10,50 * * * *", "2025-01-01 10:10", "2025-01-01 10:50"},
  {"5,10,50 * * * *", "2025-01-01 10:50", "2025-01-01 11:05"},
  {"*/15 * * * *", "2025-01-01 10:07", "2025-01-01 10:15"},
  {"*/15 * * * *", "2025-01-01 10:45", "2025-01-01 11:00"},
  {"10-20 * * * *", "2025-01-01 10:20", "2025-01-01 11:10"},
  {"0 8-18/5 * * *", "2025-01-01 08:00", "2025-01-01 13:00"},
  {"0 8-18/5 * * *", "2025-01-01 13:00", "2025-01-01 18:00"},
  {"0 8-18/5 * * *", "2025-01-01 18:00", "2025-01-02 08:00"},
  {"0 0 */10 * *", "2025-01-01 00:00", "2025-01-11 00:00"},
  {"0 0 */10 * *", "2025-01-31 00:00", "2025-02-01 00:00"},
  // Month and year rollovers.
  {"0 0 * * *", "2025-12-31 23:59", "2026-01-01 00:00"},
  {"0 0 1 1 *", "2025-06-15 12:00", "2026-01-01 00:00"},
  {"59 23 31 12 *", "2025-12-31 23:59", "2026-12-31 23:59"},
  {"0 12 31 * *", "2025-04-01 00:00", "2025-05-31 12:00"},
  {"0 0 31 * *", "2025-01-31 00:00", "2025-03-31 00:00"},
  {"0 0 30 * *", "2025-01-30 00:00", "2025-03-30 00:00"},
  // Leap days.
  {"0 0 29 2 *", "2024-02-28 12:00", "2024-02-29 00:00"},
  {"0 0 29 2 *", "2025-03-01 00:00", "2028-02-29 00:00"},
  {"0 0 29 2 *", "2096-01-01 00:00", "2096-02-29 00:00"},
  // 2100 is not a leap year, so the next one (2104) is beyond 5 years.
  {"0 0 29 2 *", "2097-01-01 00:00", nullptr},
  // Month names.
  {"0 0 1 JAN,jul *", "2025-02-01 00:00", "2025-07-01 00:00"},
  {"0 0 1 Mar-May *", "2025-05-01 00:00", "2026-03-01 00:00"},
  // Weekdays: numbers, names, 7 = Sunday, FRI-SUN wraps to Sunday.
  {"0 9 * * MON-FRI", "2025-01-04 10:00", "2025-01-06 09:00"},
  {"0 9 * * 1-5", "2025-01-03 09:00", "2025-01-06 09:00"},
  {"0 0 * * 7", "2025-01-01 00:00", "2025-01-05 00:00"},
  {"0 0 * * 0", "2025-01-01 00:00", "2025-01-05 00:00"},
  {"0 0 * * sun", "2025-01-01 00:00", "2025-01-05 00:00"},
  {"0 0 * * 5-7", "2025-01-05 00:00", "2025-01-10 00:00"},
  {"0 0 * * FRI-SUN", "2025-01-06 00:00", "2025-01-10 00:00"},
  {"0 0 * * FRI-SUN", "2025-01-11 00:00", "2025-01-12 00:00"},
  // Both day fields restricted: either matches (the 13th OR a Friday).
  {"0 0 13 * FRI", "2025-01-01 00:00", "2025-01-03 00:00"},
  {"0 0 13 * FRI", "2025-01-10 01:00", "2025-01-13 00:00"},
  {"0 0 13 * FRI", "2025-01-13 00:00", "2025-01-17 00:00"},
  // Only day-of-month restricted: the weekday is irrelevant.
  {"0 0 13 * *", "2025-01-01 00:00", "2025-01-13 00:00"},
  // Vixie: `*/2` counts as `*`, so both must match: odd days AND Monday.
  {"0 0 */2 * MON", "2025-01-01 00:00", "2025-01-13 00:00"},
  // Macros.
  {"@hourly", "2025-01-01 10:59:59", "2025-01-01 11:00"},
  {"@daily", "2025-01-01 00:00", "2025-01-02 00:00"},
  {"@midnight", "2025-01-01 00:00", "2025-01-02 00:00"},
  {"@weekly", "2025-01-01 00:00", "2025-01-05 00:00"},
  {"@monthly", "2025-01-01 00:00", "2025-02-01 00:00"},
  {"@yearly", "2025-01-01 00:00", "2026-01-01 00:00"},
  {"@annually", "2025-06-01 00:00", "2026-01-01 00:00"},
  // Never matches.
  {"0 0 30 2 *", "2025-01-01 00:00", nullptr},
  {"0 0 31 4,6,9,11 *", "2025-01-01 00:00", nullptr},
};

} // namespace

TEST(cron_next_after, table) {
  for (const auto& c : next_cases) {
    auto s = must_parse(c.expr);
    auto got = s.next_after(at(c.from));
    std::string want = c.expected ? show(at(c.expected)) : "none";
    EXPECT_EQ(show(got), want) << c.expr << " from " << c.from;
  }
}

TEST(cron_next_after, is_always_a_matching_minute_boundary) {
  auto s = must_parse("*/7 3,15 * * *");
  auto t = at("2025-01-01 00:00");
  for (int i = 0; i < 100; ++i) {
    auto next = s.next_after(t);
    ASSERT_TRUE(next);
    ASSERT_GT(*next, t);
    auto since_epoch = next->time_since_epoch();
    EXPECT_EQ(since_epoch % std::chrono::minutes{1}, since_epoch.zero());
    time_t secs = system_clock::to_time_t(*next);
    struct tm tm {};
    gmtime_r(&secs, &tm);
    EXPECT_EQ(tm.tm_min % 7, 0) << show(*next);
    EXPECT_TRUE(tm.tm_hour == 3 || tm.tm_hour == 15) << show(*next);
    t = *next;
  }
}

TEST(cron_next_after, sub_second_input_is_floored) {
  auto s = must_parse("* * * * *");
  auto t = at("2025-01-01 00:00") + std::chrono::milliseconds{1};
  EXPECT_EQ(show(s.next_after(t)), show(at("2025-01-01 00:01")));
}

TEST(cron_parse, accepts_every_syntax_form) {
  for (const char* expr :
       {"* * * * *", "0 0 1 1 0", "1,2,3 4,5 6,7 8,9 1,2",
        "0-59 0-23 1-31 1-12 0-7", "*/5 */2 */3 */4 */2",
        "1-30/3 1-12/4 1-31/10 1-12/6 0-6/2", "0 0 * JAN-DEC SUN-SAT",
        "0 0 * jan,Feb,MAR * ", "\t0  0\t* * mon ", "0 0 * * 7", "@hourly",
        "@daily", "@weekly", "@monthly", "@yearly", "@DAILY", "  @daily  "}) {
    std::string error;
    EXPECT_TRUE(cron_schedule::parse(expr, &error)) << expr << ": " << error;
  }
}

TEST(cron_parse, errors_name_field_and_value) {
  EXPECT_EQ(parse_error("0 24 * * *"), "hour: 24 is out of range 0-23");
  EXPECT_EQ(parse_error("60 * * * *"), "minute: 60 is out of range 0-59");
  EXPECT_EQ(parse_error("* * 0 * *"), "day-of-month: 0 is out of range 1-31");
  EXPECT_EQ(parse_error("* * 32 * *"), "day-of-month: 32 is out of range 1-31");
  EXPECT_EQ(parse_error("* * * 13 *"), "month: 13 is out of range 1-12");
  EXPECT_EQ(parse_error("* * * 0 *"), "month: 0 is out of range 1-12");
  EXPECT_EQ(parse_error("* * * * 8"), "day-of-week: 8 is out of range 0-7");
  EXPECT_EQ(parse_error("99999999999 * * * *"),
            "minute: 99999999999 is out of range 0-59");
  EXPECT_EQ(parse_error("0 1-24 * * *"), "hour: 24 is out of range 0-23");
}

TEST(cron_parse, field_count_errors) {
  EXPECT_EQ(parse_error("* * * *"), "expected 5 fields, got 4");
  EXPECT_EQ(parse_error("* * * * * *"), "expected 5 fields, got 6");
  EXPECT_EQ(parse_error(""), "expected 5 fields, got 0");
  EXPECT_EQ(parse_error("   "), "expected 5 fields, got 0");
}

TEST(cron_parse, rejects_garbage) {
  EXPECT_EQ(parse_error("x * * * *"), "minute: 'x' is not a number");
  EXPECT_EQ(parse_error("MON * * * *"), "minute: 'MON' is not a number");
  EXPECT_EQ(parse_error("* * * FOO *"),
            "month: 'FOO' is not a number or month name");
  EXPECT_EQ(parse_error("* * * * FUN"),
            "day-of-week: 'FUN' is not a number or weekday name");
  EXPECT_EQ(parse_error("* * * * MON-"),
            "day-of-week: missing value in 'MON-'");
  EXPECT_EQ(parse_error("-5 * * * *"), "minute: missing value in '-5'");
  EXPECT_EQ(parse_error("1-2-3 * * * *"), "minute: '2-3' is not a number");
  EXPECT_EQ(parse_error("5-3 * * * *"), "minute: range '5-3' is reversed");
  EXPECT_EQ(parse_error("*/0 * * * *"),
            "minute: step must be at least 1 in '*/0'");
  EXPECT_EQ(parse_error("*/x * * * *"),
            "minute: step 'x' is not a number in '*/x'");
  EXPECT_EQ(parse_error("*/ * * * *"),
            "minute: step '' is not a number in '*/'");
  EXPECT_EQ(parse_error("5/10 * * * *"),
            "minute: a step needs a range or '*', got '5/10'");
  EXPECT_EQ(parse_error("1,,2 * * * *"),
            "minute: empty list element in '1,,2'");
  EXPECT_EQ(parse_error("1, * * * *"), "minute: empty list element in '1,'");
  EXPECT_EQ(parse_error(",1 * * * *"), "minute: empty list element in ',1'");
  EXPECT_EQ(parse_error("1.5 * * * *"), "minute: '1.5' is not a number");
  EXPECT_EQ(parse_error("+1 * * * *"), "minute: '+1' is not a number");
  EXPECT_EQ(parse_error("@every"), "unknown macro '@every'");
  EXPECT_EQ(parse_error("@daily 0"), "unexpected text after '@daily'");
}

TEST(cron_parse, null_error_pointer_is_allowed) {
  EXPECT_FALSE(cron_schedule::parse("nonsense", nullptr));
  EXPECT_TRUE(cron_schedule::parse("* * * * *", nullptr));
}
