// Thread turn bodies (runtime/threads.cpp, parse_turn_body): the JSON a
// client POSTs to /v1/threads/{id}/turns.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/threads.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  butlers::thread_turn turn;
  auto err = butlers::parse_turn_body(body, turn);
  // An accepted turn carries only what a run may take.
  if (err.empty()
      && ((!turn.model.empty() && !butlers::valid_model_name(turn.model))
          || turn.max_steps > butlers::max_turn_steps
          || turn.sender.size() > 128))
    __builtin_trap();
  (void)butlers::valid_thread_id(body);
  return 0;
}
