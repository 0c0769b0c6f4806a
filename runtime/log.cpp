#include "runtime/log.hpp"

#include <chrono>
#include <ctime>

#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "runtime/json.hpp"

namespace butlers {

namespace {

class json_formatter final : public spdlog::formatter {
 public:
  explicit json_formatter(std::string node) : node_(json::quote(node)) {
    // nop
  }

  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto t = system_clock::to_time_t(msg.time);
    auto micros = duration_cast<microseconds>(msg.time.time_since_epoch())
                  % 1000000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[64];
    auto n = std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(ts + n, sizeof(ts) - n, ".%06ldZ",
                  static_cast<long>(micros.count()));
    std::string line = R"({"ts":")";
    line += ts;
    line += R"(","level":")";
    auto level = spdlog::level::to_string_view(msg.level);
    line.append(level.data(), level.size());
    line += R"(","node":)";
    line += node_;
    line += R"(,"msg":)";
    line += json::quote(
      std::string_view{msg.payload.data(), msg.payload.size()});
    if (const auto* fields = detail::current_log_fields();
        fields != nullptr && !fields->empty()) {
      line += ',';
      line += *fields;
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    auto copy = std::make_unique<json_formatter>("");
    copy->node_ = node_;
    return copy;
  }

 private:
  std::string node_;
};

} // namespace

namespace detail {

const std::string*& current_log_fields() noexcept {
  thread_local const std::string* fields = nullptr;
  return fields;
}

} // namespace detail

void log_fields::key(std::string_view k) {
  if (!members_.empty())
    members_ += ',';
  members_ += json::quote(k);
  members_ += ':';
}

log_fields& log_fields::add(std::string_view k, std::string_view value) {
  if (value.empty())
    return *this;
  key(k);
  members_ += json::quote(value);
  return *this;
}

log_fields& log_fields::add_int(std::string_view k, int64_t value) {
  key(k);
  members_ += std::to_string(value);
  return *this;
}

log_fields& log_fields::add_ms(std::string_view k, int64_t value) {
  if (value < 0)
    return *this;
  return add_int(k, value);
}

std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& node) {
  return std::make_unique<json_formatter>(node);
}

void init_logging(const std::string& level, const std::string& node_name) {
  auto logger = spdlog::stderr_logger_mt("butlers");
  logger->set_formatter(make_log_formatter(node_name));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

} // namespace butlers
