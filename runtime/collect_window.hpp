#pragma once

// Collect mode of conversation threads (`threads.collect_ms`): turns for a
// butler of a thread that arrive within `collect_ms` of each other, while
// no run of that butler is active, become one run whose input is all of
// them in arrival order. A window holds the turns of that run until it
// closes: `collect_ms` after its last turn, `collect_max_ms` after its
// first, or at once when it holds `collect_max_turns` (or a turn would take
// its input past `collect_limits::max_bytes`). Pure: the thread
// actor stores each turn as it arrives, owns the one timer of a window and
// starts the run when `due` says so; time is passed in.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/threads.hpp"

namespace butlers {

/// How a collect window is bounded (from `threads_config`).
struct collect_limits {
  /// A window closes this long after its last turn; zero: collect is off.
  std::chrono::milliseconds quiet{0};
  /// ... and at the latest this long after its first turn.
  std::chrono::milliseconds max_open{0};
  /// ... or at once when it holds this many turns.
  size_t max_turns = 1;
  /// A turn whose text would take the window's input past this many bytes
  /// does not join it: the window closes first, so a collected run's
  /// prompt stays within the 65536 characters route.v1 allows. Not
  /// configurable.
  size_t max_bytes = 64 * 1024;

  /// The limits of `cfg`.
  static collect_limits of(const threads_config& cfg);

  /// Whether collect mode is on.
  bool on() const {
    return quiet.count() > 0;
  }
};

/// The input of a run made of the turn texts `texts` (arrival order): a
/// single text as it is, several separated by one blank line ("\n\n"), so
/// the model reads them as consecutive messages of one user.
std::string collected_input(const std::vector<std::string>& texts);

/// `collected_input` of the texts in `json_array`, a JSON array of strings
/// (as `thread_open_runs` answers them); nothing when it is not one.
std::optional<std::string> collected_input_json(std::string_view json_array);

/// The turns collected for one run of one butler of a thread.
class collect_window {
 public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// Opens the window of run `run_id` for `butler` with its first turn's
  /// text `text`, stored at `now`.
  collect_window(std::string run_id, std::string butler, collect_limits lim,
                 std::string text, time_point now);

  /// Adds the text of a further turn, stored at `now`.
  void add(std::string text, time_point now);

  /// When the window closes unless another turn arrives first: the earlier
  /// of `quiet` after the last turn and `max_open` after the first.
  time_point deadline() const;

  /// Whether the window must close at `now`: it is full or its deadline
  /// has passed.
  bool due(time_point now) const;

  /// Whether a turn text of `bytes` bytes may join (see
  /// `collect_limits::max_bytes`).
  bool fits(size_t bytes) const;

  /// Whether it holds `max_turns` turns.
  bool full() const {
    return texts_.size() >= lim_.max_turns;
  }

  const std::string& run_id() const {
    return run_id_;
  }

  const std::string& butler() const {
    return butler_;
  }

  size_t turns() const {
    return texts_.size();
  }

  /// The run's input: `collected_input` of the turns so far.
  std::string input() const {
    return collected_input(texts_);
  }

  /// The actor has a timer out for this window (at most one at a time).
  bool armed = false;
  /// What the turn that opened the window asked of its run.
  run_options options;

 private:
  std::string run_id_;
  std::string butler_;
  collect_limits lim_;
  std::vector<std::string> texts_;
  /// The size of `input()`.
  size_t bytes_ = 0;
  time_point first_;
  time_point last_;
};

} // namespace butlers
