// Streamed model API responses (runtime/model_api.cpp): an OpenAI- or
// Anthropic-style SSE body (the first byte picks the API and the chunk
// size), fed in chunks; also model_error_text over the same bytes, as for
// an error response body.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/model_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  auto api = (data[0] & 1) ? butlers::model_api::anthropic
                           : butlers::model_api::openai;
  size_t chunk = (data[0] >> 1) % 64 + 1;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  butlers::model_stream s(api, 1 << 16);
  std::string deltas;
  auto on_delta = [&deltas](std::string_view d) {
    deltas.append(d);
  };
  std::string_view rest = in;
  bool ok = true;
  while (ok && !rest.empty()) {
    auto n = std::min(chunk, rest.size());
    ok = s.feed(rest.substr(0, n), on_delta);
    rest.remove_prefix(n);
  }
  if (ok && deltas != s.state().text)
    __builtin_trap();
  (void)s.complete();
  (void)butlers::model_error_text(in);
  return 0;
}
