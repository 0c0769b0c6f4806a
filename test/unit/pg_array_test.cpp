#include <gtest/gtest.h>

#include "runtime/pg_array.hpp"

namespace butlers {
namespace {

TEST(PgArray, QuotesEveryElementAndEscapes) {
  pg_array a;
  a.add("plain").add("with \"quotes\"").add("back\\slash").add("");
  a.add("{braces},commas").null().add_or_null("").add(int64_t{-42});
  EXPECT_EQ(a.size(), 8u);
  EXPECT_EQ(a.take(), R"({"plain","with \"quotes\"","back\\slash","",)"
                      R"("{braces},commas",NULL,NULL,-42})");
}

TEST(PgArray, EscapesAtTheEdgesAndInARow) {
  pg_array a;
  a.add("\"").add("\\\\").add("\"x\"").add("x\"\"y").add(R"({"a":"b\"c"})");
  EXPECT_EQ(a.take(), R"({"\"","\\\\","\"x\"","x\"\"y","{\"a\":\"b\\\"c\"}"})");
}

TEST(PgArray, TakeMovesTheLiteralOutAndStartsOver) {
  pg_array a;
  a.add("one").add(int64_t{2});
  EXPECT_EQ(a.take(), R"({"one",2})");
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.take(), "{}");
  a.add("three");
  EXPECT_EQ(a.take(), R"({"three"})");
}

TEST(PgArray, EmptyArray) {
  EXPECT_EQ(pg_array{}.take(), "{}");
}

TEST(PgArray, SqlInTextStaysData) {
  pg_array a;
  a.add("'); DROP TABLE message_inbox; --");
  EXPECT_EQ(a.take(), R"({"'); DROP TABLE message_inbox; --"})");
}

} // namespace
} // namespace butlers
