#pragma once

#include <string>

namespace butlers::test {

/// The libpq connection string of the throwaway PostgreSQL that
/// scripts/test.sh started (BUTLERS_TEST_DATABASE_URL). Throws when it is
/// not set, so a pg test run without the script fails loudly, never skips.
std::string test_database_url();

/// Creates a new, empty database named `<prefix>_<random>` on the test
/// server and returns its connection string. Tests use one each, so they
/// never see each other's rows.
std::string fresh_database(const std::string& prefix);

} // namespace butlers::test
