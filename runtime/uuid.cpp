#include "runtime/uuid.hpp"

#include <atomic>
#include <chrono>
#include <random>

namespace butlers {

namespace {

uuid_v7_generator process_generator;

uint64_t random_bits() {
  thread_local std::mt19937_64 engine{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64{seq};
  }()};
  return engine();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace

std::string uuid::to_string() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out += '-';
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 0x0F];
  }
  return out;
}

std::optional<uuid> uuid::parse(std::string_view text) {
  if (text.size() != 36)
    return std::nullopt;
  uuid result;
  size_t byte = 0;
  for (size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-')
        return std::nullopt;
      ++i;
      continue;
    }
    auto hi = hex_value(text[i]);
    auto lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    result.bytes[byte++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return result;
}

uint64_t uuid::unix_ms() const {
  uint64_t ms = 0;
  for (size_t i = 0; i < 6; ++i)
    ms = ms << 8 | bytes[i];
  return ms;
}

uuid uuid_v7_generator::next(uint64_t now_unix_ms) {
  auto candidate = now_unix_ms << 12;
  auto prev = last_stamp_.load(std::memory_order_relaxed);
  uint64_t stamp;
  do {
    stamp = candidate > prev ? candidate : prev + 1;
  } while (
    !last_stamp_.compare_exchange_weak(prev, stamp, std::memory_order_relaxed));
  auto ms = stamp >> 12;
  auto counter = stamp & 0x0FFF;
  auto rnd = random_bits();
  uuid result;
  auto& b = result.bytes;
  for (int i = 0; i < 6; ++i)
    b[i] = static_cast<uint8_t>(ms >> (40 - 8 * i));
  b[6] = static_cast<uint8_t>(0x70 | (counter >> 8));
  b[7] = static_cast<uint8_t>(counter & 0xFF);
  b[8] = static_cast<uint8_t>(0x80 | ((rnd >> 56) & 0x3F));
  for (int i = 9; i < 16; ++i)
    b[i] = static_cast<uint8_t>(rnd >> (8 * (15 - i)));
  return result;
}

uuid make_uuid_v7() {
  using namespace std::chrono;
  auto now = duration_cast<milliseconds>(
    system_clock::now().time_since_epoch());
  return process_generator.next(static_cast<uint64_t>(now.count()));
}

} // namespace butlers
