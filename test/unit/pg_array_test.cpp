#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "runtime/pg_array.hpp"

namespace butlers {
namespace {

using el = pg_array::element;

std::string bytes(const pqxx::binarystring& b) {
  return b.str();
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

/// array_send's header of a one-dimensional array.
std::string header(bool has_null, uint32_t oid, uint32_t n) {
  return be32(1) + be32(has_null ? 1 : 0) + be32(oid) + be32(n) + be32(1);
}

TEST(PgArray, TextElementsAreLengthPrefixedBytesAsTheyAre) {
  pg_array a{el::text};
  a.add("plain").add("with \"quotes\", {braces}\\").add("").null();
  a.add_or_null("").add_or_null("NULL");
  EXPECT_EQ(a.size(), 6u);
  EXPECT_EQ(bytes(a.take()), header(true, 25, 6) + be32(5) + "plain" + be32(24)
                               + "with \"quotes\", {braces}\\" + be32(0)
                               + be32(0xffffffff) + be32(0xffffffff) + be32(4)
                               + "NULL");
}

TEST(PgArray, TextKeepsNulBytesAndNonAscii) {
  pg_array a{el::text};
  a.add(std::string_view{"a\0b", 3}).add("caf\xc3\xa9");
  EXPECT_EQ(bytes(a.take()), header(false, 25, 2) + be32(3)
                               + std::string("a\0b", 3) + be32(5)
                               + "caf\xc3\xa9");
}

TEST(PgArray, Int8IsBigEndianTwosComplement) {
  pg_array a{el::int8};
  a.add(int64_t{1}).add(int64_t{-2}).add(int64_t{0x0102030405060708});
  EXPECT_EQ(bytes(a.take()), header(false, 20, 3) + be32(8) + be32(0) + be32(1)
                               + be32(8) + be32(0xffffffff) + be32(0xfffffffe)
                               + be32(8) + be32(0x01020304) + be32(0x05060708));
}

TEST(PgArray, UuidIsItsSixteenBytesInEitherCase) {
  pg_array a{el::uuid};
  a.add("01234567-89ab-cdef-0123-456789ABCDEF");
  EXPECT_EQ(bytes(a.take()),
            header(false, 2950, 1) + be32(16)
              + "\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab"
                "\xcd\xef");
}

TEST(PgArray, MalformedUuidsAreRefusedBeforeTheyReachTheServer) {
  for (const char* bad : {"", "01234567-89ab-cdef-0123-456789abcde",
                          "01234567-89ab-cdef-0123-456789abcdef0",
                          "0123456789ab-cdef-0123-456789abcdef0", // hyphen
                                                                  // misplaced
                          "01234567+89ab-cdef-0123-456789abcdef",
                          "0123456g-89ab-cdef-0123-456789abcdef",
                          "01234567-89ab-cdef-0123-456789abcde ",
                          "{1234567-89ab-cdef-0123-456789abcdef"}) {
    pg_array a{el::uuid};
    EXPECT_THROW(a.add(bad), std::invalid_argument) << bad;
    EXPECT_EQ(a.size(), 0u) << bad;
  }
}

TEST(PgArray, AnElementOfTheWrongKindIsALogicError) {
  pg_array ints{el::int8};
  EXPECT_THROW(ints.add("7"), std::logic_error);
  pg_array texts{el::text};
  EXPECT_THROW(texts.add(int64_t{7}), std::logic_error);
  pg_array uuids{el::uuid};
  EXPECT_THROW(uuids.add(int64_t{7}), std::logic_error);
}

TEST(PgArray, AnEmptyArrayHasNoDimension) {
  pg_array a{el::uuid};
  EXPECT_EQ(bytes(a.take()), be32(0) + be32(0) + be32(2950));
}

TEST(PgArray, TakeStartsOverWithTheSameElementType) {
  pg_array a{el::text};
  a.add("one").null();
  EXPECT_EQ(bytes(a.take()),
            header(true, 25, 2) + be32(3) + "one" + be32(0xffffffff));
  EXPECT_EQ(a.size(), 0u);
  a.add("two");
  EXPECT_EQ(bytes(a.take()), header(false, 25, 1) + be32(3) + "two");
}

} // namespace
} // namespace butlers
