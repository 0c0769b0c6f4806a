// TOML configuration through the project's loader (runtime/config_reader.cpp
// parse_config, then validate_settings and config_warnings), not raw toml++:
// what check-config and the node run on a config file.

#include "runtime/config.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = butlers::parse_config(text, "fuzz.toml");
  if (r.settings.has_value() == !r.errors.empty())
    __builtin_trap();
  for (const auto& e : r.errors)
    (void)e.to_string();
  if (r.settings) {
    (void)butlers::validate_settings(*r.settings);
    (void)butlers::config_warnings(*r.settings);
  }
  return 0;
}
