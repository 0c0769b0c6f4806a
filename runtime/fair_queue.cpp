#include "runtime/fair_queue.hpp"

namespace butlers {

uint8_t tier_rank(const std::string& tier) {
  if (tier == "high_priority")
    return 0;
  if (tier == "interactive")
    return 1;
  return 2;
}

} // namespace butlers
