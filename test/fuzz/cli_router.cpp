// Router plans from a CLI router's answer (runtime/cli_router.cpp,
// plan_from_cli_answer): JSON extraction from free text, router_plan.v1
// validation, then the plan's own checks against the message and registry.

#include "runtime/cli_router.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/messages.hpp"

namespace {

std::vector<butlers::registry_entry> make_registry() {
  std::vector<butlers::registry_entry> xs(3);
  xs[0].name = "general";
  xs[0].description = "anything else";
  xs[1].name = "calendar";
  xs[1].description = "dates and meetings";
  xs[1].triggers = {"meeting"};
  xs[2].name = "health";
  xs[2].description = "medication and doctors";
  xs[2].keywords = {"doctor"};
  return xs;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto registry = make_registry();
  static constexpr std::string_view text = "Book a meeting with Ana on Friday. "
                                           "Also remind me to call the doctor.";
  std::string_view answer(reinterpret_cast<const char*>(data), size);
  auto plan = butlers::plan_from_cli_answer(answer, text, registry);
  // A plan always routes somewhere: on failure, one general segment.
  if (plan.segments.empty())
    __builtin_trap();
  if (plan.fallback && plan.fallback_reason.empty())
    __builtin_trap();
  return 0;
}
