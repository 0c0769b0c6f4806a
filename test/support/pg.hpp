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

namespace butlers::test {

/// Runs `pg_ctl <action>` (stop -m fast / start) on the test server that
/// scripts/test.sh started (BUTLERS_PG_DIR, BUTLERS_PG_BIN, BUTLERS_PG_PORT),
/// as the server's owner, waiting up to 300 s (a fast shutdown finishes a
/// checkpoint first, which on a busy disk with the suite's many databases
/// can take minutes). Returns pg_ctl's exit code.
int pg_ctl(const std::string& action);

/// The test server stopped for the life of this object (`stopped()` says
/// whether the stop worked), started again by `restart()` or, whatever
/// the test's outcome, at destruction: one test's outage never becomes
/// the rest of the suite's.
class pg_outage {
 public:
  pg_outage();
  ~pg_outage();

  pg_outage(const pg_outage&) = delete;
  pg_outage& operator=(const pg_outage&) = delete;

  bool stopped() const {
    return stopped_;
  }

  /// Starts the server again; true when it started.
  bool restart();

 private:
  bool stopped_ = false;
  bool down_ = false;
};

} // namespace butlers::test
