// The ingest full path alone (runtime/ingest.cpp, detail::parse_ingest_full):
// DOM parse, the generic schema check of ingest.v1, the NUL checks.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/ingest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto r = butlers::detail::parse_ingest_full(body, 1 << 20, 3600,
                                              1'700'000'000'000'000);
  // Exactly one outcome: a record, or a reason (parse error or violations).
  bool has_reason = !r.parse_error.empty() || !r.violations.empty();
  if (r.record.has_value() == has_reason)
    __builtin_trap();
  return 0;
}
