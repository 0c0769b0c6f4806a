// Codex app-server messages (runtime/codex_app_server.cpp): every line of
// the input goes through parse_codex_line, as the session reads them.

#include "runtime/codex_app_server.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (true) {
    auto nl = in.find('\n');
    (void)butlers::parse_codex_line(in.substr(0, nl));
    if (nl == std::string_view::npos)
      break;
    in.remove_prefix(nl + 1);
  }
  return 0;
}
