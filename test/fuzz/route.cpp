// route.v1 envelopes and route_response.v1 documents (runtime/route.cpp):
// what a worker or a peer node hands the butlers. The first byte picks
// parse_route (with read_notify of an accepted notify_request) or
// parse_route_response.

#include "runtime/route.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    std::string error;
    auto r = butlers::parse_route_response(text, &error);
    if (!r && error.empty())
      __builtin_trap();
    return 0;
  }
  butlers::route_envelope env;
  auto rejection = butlers::parse_route(text, env);
  if (rejection) {
    if (rejection->error_class.empty())
      __builtin_trap();
    return 0;
  }
  if (!env.notify_request.empty())
    (void)butlers::read_notify(env.notify_request);
  return 0;
}
