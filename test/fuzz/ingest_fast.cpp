// The ingest fast path alone (runtime/ingest.cpp, detail::parse_ingest_fast):
// one streaming pass over an untrusted ingest.v1 body.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/ingest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto rec = butlers::detail::parse_ingest_fast(body, 1 << 20, 3600,
                                                1'700'000'000'000'000);
  if (rec && rec->raw_payload != body)
    __builtin_trap();
  return 0;
}
