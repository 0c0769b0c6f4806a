#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace butlers {

/// Builds PostgreSQL array literals for one-round-trip batch statements
/// (`unnest($1::text[], ...)`), passed as ordinary bind parameters: user
/// text never becomes SQL. Elements are double-quoted with `"` and `\`
/// escaped, so any text round-trips; `null()` adds an unquoted NULL.
class pg_array {
 public:
  pg_array() {
    text_ = "{";
  }

  pg_array& add(std::string_view element);
  pg_array& add(int64_t element);
  /// Adds `element`, or NULL when it is empty.
  pg_array& add_or_null(std::string_view element) {
    return element.empty() ? null() : add(element);
  }
  pg_array& null();

  /// The finished literal, e.g. `{"a","b\"c",NULL}`, moved out; the
  /// array is empty again.
  std::string take();

  size_t size() const {
    return size_;
  }

 private:
  void separator() {
    if (size_++ > 0)
      text_ += ',';
  }
  std::string text_;
  size_t size_ = 0;
};

} // namespace butlers
