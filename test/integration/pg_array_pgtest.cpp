// pg_array's binary arrays through a real PostgreSQL: what arrives is what
// was added, element for element, whatever the text contains.

#include "test/support/pg.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/pg_array.hpp"

namespace butlers::test {
namespace {

using el = pg_array::element;

TEST(PgArrayRoundTrip, TextArrivesAsItWasAddedWithNullsInPlace) {
  const std::vector<std::string>
    texts{"plain",
          "",
          "NULL",
          "with \"quotes\" and \\backslashes\\",
          "{braces},commas",
          "'); DROP TABLE message_inbox; --",
          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
          "line\nbreak\ttab",
          std::string(100000, 'x')};
  pg_array a{el::text};
  for (auto& t : texts)
    a.add(t);
  a.null();
  pqxx::connection conn{test_database_url()};
  pqxx::nontransaction tx{conn};
  auto rows = tx.exec_params("SELECT x, x IS NULL FROM unnest($1::text[]) WITH "
                             "ORDINALITY AS u(x, i)"
                             " ORDER BY i",
                             a.take());
  ASSERT_EQ(rows.size(), texts.size() + 1);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_FALSE(rows[i][1].as<bool>()) << i;
    EXPECT_EQ(rows[i][0].as<std::string>(), texts[i]) << i;
  }
  EXPECT_TRUE(rows[texts.size()][1].as<bool>());
}

TEST(PgArrayRoundTrip, Int8AndUuidArriveAsTheirValues) {
  pg_array ints{el::int8};
  ints.add(int64_t{0}).add(int64_t{-1}).add(INT64_MIN).add(INT64_MAX);
  ints.add(int64_t{1795000000123456});
  pg_array ids{el::uuid};
  ids.add("01a211c2-e412-7791-9cff-4a3d44093679").null();
  ids.add("FFFFFFFF-0000-4000-8000-0123456789AB");
  pqxx::connection conn{test_database_url()};
  pqxx::nontransaction tx{conn};
  EXPECT_EQ(tx.exec_params1("SELECT array_to_string($1::bigint[], ',')",
                            ints.take())[0]
              .as<std::string>(),
            "0,-1,-9223372036854775808,9223372036854775807,1795000000123456");
  EXPECT_EQ(tx.exec_params1("SELECT array_to_string($1::uuid[], ',', 'null')",
                            ids.take())[0]
              .as<std::string>(),
            "01a211c2-e412-7791-9cff-4a3d44093679,null,"
            "ffffffff-0000-4000-8000-0123456789ab");
}

TEST(PgArrayRoundTrip, EmptyArraysAreEmpty) {
  pqxx::connection conn{test_database_url()};
  pqxx::nontransaction tx{conn};
  pg_array t{el::text};
  pg_array u{el::uuid};
  auto row = tx.exec_params1("SELECT cardinality($1::text[]), "
                             "cardinality($2::uuid[])",
                             t.take(), u.take());
  EXPECT_EQ(row[0].as<int>(), 0);
  EXPECT_EQ(row[1].as<int>(), 0);
}

TEST(PgArrayRoundTrip, AnArrayOfAnotherElementTypeIsRefused) {
  pg_array ints{el::int8};
  ints.add(int64_t{1});
  pqxx::connection conn{test_database_url()};
  pqxx::nontransaction tx{conn};
  EXPECT_THROW(tx.exec_params("SELECT $1::text[]", ints.take()),
               pqxx::sql_error);
}

} // namespace
} // namespace butlers::test
