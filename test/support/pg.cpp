#include "test/support/pg.hpp"

#include <cstdlib>
#include <random>
#include <regex>
#include <stdexcept>

#include <pqxx/pqxx>

namespace butlers::test {

std::string test_database_url() {
  auto url = std::getenv("BUTLERS_TEST_DATABASE_URL");
  if (url == nullptr || *url == '\0')
    throw std::runtime_error("BUTLERS_TEST_DATABASE_URL is not set: run the "
                             "suite through scripts/test.sh");
  return url;
}

std::string fresh_database(const std::string& prefix) {
  auto base = test_database_url();
  std::random_device rd;
  auto name = prefix + "_" + std::to_string(rd() % 1000000000u);
  pqxx::connection conn{base};
  pqxx::nontransaction tx{conn};
  tx.exec("CREATE DATABASE " + tx.quote_name(name));
  static const std::regex dbname{R"(dbname=\S+)"};
  return std::regex_replace(base, dbname, "dbname=" + name);
}

} // namespace butlers::test
