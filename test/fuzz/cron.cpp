// Cron expressions (runtime/cron.cpp): parse, then the next match after a
// fixed instant (bounded to five years by the implementation).

#include "runtime/cron.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view expr(reinterpret_cast<const char*>(data), size);
  std::string error;
  auto c = butlers::cron_schedule::parse(expr, &error);
  if (!c) {
    if (error.empty())
      __builtin_trap();
    return 0;
  }
  auto t = std::chrono::system_clock::time_point{}
           + std::chrono::seconds{1'700'000'000};
  auto next = c->next_after(t);
  if (next && *next <= t)
    __builtin_trap();
  return 0;
}
