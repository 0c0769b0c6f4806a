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

void init_logging(const std::string& level, const std::string& node_name) {
  auto logger = spdlog::stderr_logger_mt("butlers");
  logger->set_formatter(std::make_unique<json_formatter>(node_name));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

} // namespace butlers
