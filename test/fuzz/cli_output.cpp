// CLI outputs (runtime/cli_output.cpp): a CLI's whole stdout, for the three
// families; the first byte picks claude, codex or opencode.

#include "runtime/cli_output.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  static constexpr butlers::cli_family families[]
    = {butlers::cli_family::claude, butlers::cli_family::codex,
       butlers::cli_family::opencode};
  auto family = families[data[0] % 3];
  std::string_view out(reinterpret_cast<const char*>(data + 1), size - 1);
  auto answer = butlers::parse_cli_output(family, out);
  if (answer.ok && answer.text.empty())
    __builtin_trap();
  return 0;
}
