#include <gtest/gtest.h>

#include "runtime/pg_array.hpp"

namespace butlers {
namespace {

TEST(PgArray, QuotesEveryElementAndEscapes) {
  pg_array a;
  a.add("plain").add("with \"quotes\"").add("back\\slash").add("");
  a.add("{braces},commas").null().add_or_null("").add(int64_t{-42});
  EXPECT_EQ(a.str(), R"({"plain","with \"quotes\"","back\\slash","",)"
                     R"("{braces},commas",NULL,NULL,-42})");
  EXPECT_EQ(a.size(), 8u);
}

TEST(PgArray, EmptyArray) {
  EXPECT_EQ(pg_array{}.str(), "{}");
}

TEST(PgArray, SqlInTextStaysData) {
  pg_array a;
  a.add("'); DROP TABLE message_inbox; --");
  EXPECT_EQ(a.str(), R"({"'); DROP TABLE message_inbox; --"})");
}

} // namespace
} // namespace butlers
