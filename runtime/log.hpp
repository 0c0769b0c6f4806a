#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

namespace butlers {

/// Installs the process-wide logger: one JSON object per line on stderr,
/// `{"ts":"...","level":"info","node":"...","msg":"..."}`, the message
/// JSON-escaped so that user text can never break the framing. `level` is
/// one of trace|debug|info|warn|error. Lines logged with `log_with` carry
/// their fields as further top-level keys after `msg`.
void init_logging(const std::string& level, const std::string& node_name);

/// The formatter `init_logging` installs (exposed for tests).
std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& node);

/// The structured fields of one log line (spec 001 §12.4: `request_id`,
/// `source`, `destination_butler`, `lifecycle_state`, `error_class`,
/// stage latencies, `trace_id`), rendered as JSON members. Empty string
/// values are left out, so callers add what applies without branching.
class log_fields {
 public:
  /// Adds `"key":"value"` unless `value` is empty.
  log_fields& add(std::string_view key, std::string_view value);

  /// Adds `"key":value`.
  log_fields& add_int(std::string_view key, int64_t value);

  /// Adds `"key":value` unless `value` is negative (not measured).
  log_fields& add_ms(std::string_view key, int64_t value);

  /// The members, `"k":"v","n":1`, or empty.
  const std::string& members() const noexcept {
    return members_;
  }

 private:
  void key(std::string_view k);

  std::string members_;
};

namespace detail {

/// Fields of the line being logged on this thread (set by `log_with` for
/// the duration of one synchronous spdlog call), or null.
const std::string*& current_log_fields() noexcept;

/// Sets the fields of this thread's next lines for one scope.
class scoped_log_fields {
 public:
  explicit scoped_log_fields(const log_fields& f) noexcept
    : previous_(current_log_fields()) {
    current_log_fields() = &f.members();
  }
  ~scoped_log_fields() {
    current_log_fields() = previous_;
  }
  scoped_log_fields(const scoped_log_fields&) = delete;
  scoped_log_fields& operator=(const scoped_log_fields&) = delete;

 private:
  const std::string* previous_;
};

} // namespace detail

/// Logs one line with structured fields: `msg` as usual, the fields as
/// top-level JSON members of the same line.
template<class... Ts>
void log_with(spdlog::level::level_enum level, const log_fields& fields,
              spdlog::format_string_t<Ts...> fmt, Ts&&... args) {
  auto* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level))
    return;
  detail::scoped_log_fields guard{fields};
  logger->log(level, fmt, std::forward<Ts>(args)...);
}

} // namespace butlers
