#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace butlers {

/// A five-field cron schedule evaluated in UTC.
class cron_schedule {
 public:
  /// Parses "minute hour day-of-month month day-of-week": `*`, numbers,
  /// lists `a,b`, ranges `a-b`, steps `*/n` and `a-b/n`, month names JAN..DEC
  /// and weekday names SUN..SAT (case-insensitive), day-of-week 0-7 (0 and 7
  /// = Sunday). Also the macros @hourly @daily @weekly @monthly @yearly
  /// (and their aliases @midnight and @annually).
  /// Standard Vixie semantics: when both day-of-month and day-of-week are
  /// restricted, a day matches if EITHER matches. As in Vixie cron, a field
  /// that starts with `*` (so also `*/2`) counts as unrestricted.
  /// On failure returns nullopt and, when `error` is not null, stores a
  /// reason naming the field and value, e.g. `hour: 24 is out of range 0-23`.
  static std::optional<cron_schedule> parse(std::string_view expr,
                                            std::string* error);

  /// The first minute boundary strictly after `t` that matches (UTC), or
  /// nullopt when none within the next 5 years (e.g. "0 0 30 2 *").
  std::optional<std::chrono::system_clock::time_point> next_after(
    std::chrono::system_clock::time_point t) const;

 private:
  cron_schedule() = default;

  bool day_matches(int mday, int wday) const;

  /// Bit n set: minute n matches (0-59).
  uint64_t minutes_ = 0;
  /// Bit n set: hour n matches (0-23).
  uint64_t hours_ = 0;
  /// Bit n set: day of month n matches (1-31).
  uint64_t days_ = 0;
  /// Bit n set: month n matches (1-12).
  uint64_t months_ = 0;
  /// Bit n set: weekday n matches (0-6, Sunday = 0; 7 is folded into 0).
  uint64_t weekdays_ = 0;
  /// The day-of-month field started with `*`.
  bool dom_star_ = false;
  /// The day-of-week field started with `*`.
  bool dow_star_ = false;
};

} // namespace butlers
