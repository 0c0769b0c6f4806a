#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace butlers {

/// A 128-bit UUID, big-endian byte order as in RFC 9562.
struct uuid {
  std::array<uint8_t, 16> bytes{};

  /// The canonical 36-character lower-case text form.
  std::string to_string() const;

  /// Parses the canonical text form (either case); nullopt if malformed.
  static std::optional<uuid> parse(std::string_view text);

  /// The version nibble (7 for ours).
  int version() const {
    return bytes[6] >> 4;
  }

  /// The Unix epoch milliseconds stored in a version-7 UUID.
  uint64_t unix_ms() const;

  friend bool operator==(const uuid& x, const uuid& y) {
    return x.bytes == y.bytes;
  }
  friend bool operator!=(const uuid& x, const uuid& y) {
    return !(x == y);
  }
  friend bool operator<(const uuid& x, const uuid& y) {
    return x.bytes < y.bytes;
  }
};

/// Generates UUIDv7s (RFC 9562 §5.7): 48 bits of Unix milliseconds, then a
/// 12-bit counter in `rand_a` (method 1 of §6.2), then 62 random bits.
/// Values are strictly increasing per generator, across threads, also
/// within one millisecond: the (milliseconds, counter) pair advances through
/// one atomic compare-and-swap, and a counter overflow borrows the next
/// millisecond instead of wrapping. Thread-safe and lock-free.
class uuid_v7_generator {
 public:
  /// The next id, with the clock reading supplied.
  uuid next(uint64_t now_unix_ms);

 private:
  /// (unix_ms << 12) | counter of the last id handed out.
  std::atomic<uint64_t> last_stamp_{0};
};

/// The next id of the process-wide generator, at the current time.
uuid make_uuid_v7();

} // namespace butlers
