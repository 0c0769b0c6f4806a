// The Server-Sent Events parser (runtime/sse.cpp): the first byte gives the
// chunk size, the rest is fed in chunks of that size, as a response
// arrives split anywhere. The events must not depend on the split: the
// same bytes fed whole give the same events.

#include "runtime/sse.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::string> run(std::string_view in, size_t chunk) {
  butlers::sse_parser p(4096);
  std::vector<std::string> out;
  auto on = [&out](butlers::sse_event& ev) {
    out.push_back(ev.type + '\x1f' + ev.data + '\x1f' + ev.id);
  };
  while (!in.empty()) {
    auto n = std::min(chunk, in.size());
    if (!p.feed(in.substr(0, n), on)) {
      out.emplace_back("<failed>");
      break;
    }
    in.remove_prefix(n);
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  size_t chunk = data[0] % 16 + 1;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto split = run(in, chunk);
  auto whole = run(in, in.size() + 1);
  // A failure (a line or event over the bound) may be detected at a
  // different event depending on the split; compare only clean runs.
  bool failed = (!split.empty() && split.back() == "<failed>")
                || (!whole.empty() && whole.back() == "<failed>");
  if (!failed && split != whole)
    __builtin_trap();
  return 0;
}
