#pragma once

// Helpers that the rules router (runtime/router.cpp) and the cli router
// (runtime/cli_router.cpp) share. Internal: nothing outside those two files
// includes this.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/routing_plan.hpp"
#include "runtime/text.hpp"

namespace butlers::router_detail {

inline bool is_space(char c) {
  return is_ascii_space(c);
}

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

/// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence (and
/// thereby to at most `max` code points).
std::string truncated(std::string s, size_t max);

/// `xs` joined by `sep`.
std::string join(const std::vector<std::string>& xs, std::string_view sep);

/// One segment to `general` carrying the whole text verbatim.
routing_plan whole_text_fallback(std::string_view text, std::string reason,
                                 std::string rationale, std::string router);

} // namespace butlers::router_detail
