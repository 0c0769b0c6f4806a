// The worker wire (runtime/worker_wire.cpp): request bodies of recv, ack,
// nack and extend (first byte: the op), and the verb of a work path.

#include "runtime/worker_wire.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  auto op = static_cast<butlers::worker_op>(data[0] % 4);
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  butlers::worker_call call;
  (void)butlers::parse_worker_body(op, body, call);
  butlers::worker_op verb;
  (void)butlers::parse_worker_verb(body, verb);
  return 0;
}
