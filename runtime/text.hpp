#pragma once

// Small text helpers shared by the parsers (one definition each).

#include <string_view>

namespace butlers {

/// ASCII whitespace: space, \t, \n, \r, \f, \v (what `std::isspace` means in
/// the C locale, without its locale lookup or its UB on negative chars).
inline bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

/// `s` without leading and trailing ASCII whitespace.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back()))
    s.remove_suffix(1);
  return s;
}

} // namespace butlers
