#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <pqxx/binarystring>

namespace butlers {

/// Builds a one-dimensional PostgreSQL array in the binary wire format (the
/// layout of `array_send`) for one-round-trip batch statements
/// (`unnest($1::text[], ...)`), passed as a binary bind parameter: user text
/// never becomes SQL, and the server neither scans nor unescapes it. (As
/// text literals, parsing the arrays was about a seventh of the group
/// commit's backend CPU; see test/bench/README.md.)
///
/// The element type must be the one the statement casts the parameter to:
/// PostgreSQL refuses an array of another element type.
class pg_array {
 public:
  /// Element types, by their PostgreSQL type OIDs.
  enum class element : uint32_t { int8 = 20, text = 25, uuid = 2950 };

  explicit pg_array(element type);

  /// Adds a text element as it is, or a uuid element from its canonical
  /// 36-character form (either case). Throws std::invalid_argument for a
  /// malformed uuid, std::logic_error on an int8 array.
  pg_array& add(std::string_view value);
  /// Adds an int8 element. Throws std::logic_error on another array.
  pg_array& add(int64_t value);
  /// Adds `value`, or NULL when it is empty.
  pg_array& add_or_null(std::string_view value) {
    return value.empty() ? null() : add(value);
  }
  pg_array& null();

  /// The finished array as a binary parameter; the builder is empty again
  /// (same element type).
  pqxx::binarystring take();

  size_t size() const {
    return size_;
  }

 private:
  void start();
  void put32(uint32_t v);

  element type_;
  std::string bytes_;
  size_t size_ = 0;
  bool has_null_ = false;
};

} // namespace butlers
