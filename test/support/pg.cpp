#include "test/support/pg.hpp"

#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace butlers::test {

namespace {

// spdlog's registry is a function-local static inside libspdlog, which is
// not instrumented: built here, during static initialization on the main
// thread, before any test or actor thread exists, so that TSan sees its
// construction happen before every use. (The node builds it in main()
// already; the integration tests also spawn actors in their own process.)
[[maybe_unused]] const bool spdlog_registry_built = (spdlog::
                                                       default_logger_raw(),
                                                     true);

} // namespace

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
  // key=value form (scripts/test.sh): replace the dbname value.
  auto pos = base.find("dbname=");
  if (pos == std::string::npos)
    throw std::runtime_error("BUTLERS_TEST_DATABASE_URL has no dbname=");
  auto end = base.find(' ', pos);
  return base.substr(0, pos) + "dbname=" + name
         + (end == std::string::npos ? "" : base.substr(end));
}

} // namespace butlers::test

namespace butlers::test {

namespace {

std::string env_or_throw(const char* name) {
  auto value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    throw std::runtime_error(std::string{name}
                             + " is not set: run the suite through "
                               "scripts/test.sh");
  return value;
}

} // namespace

int pg_ctl(const std::string& action) {
  auto dir = env_or_throw("BUTLERS_PG_DIR");
  auto bin = env_or_throw("BUTLERS_PG_BIN");
  auto port = env_or_throw("BUTLERS_PG_PORT");
  std::string cmd = bin + "/pg_ctl -D " + dir + "/data -l " + dir
                    + "/server.log -w -t 300 ";
  if (action == "start")
    cmd += "-o \"-k " + dir + " -p " + port
           + " -c listen_addresses=127.0.0.1 -c max_connections=200"
             " -c shared_buffers=256MB\" start";
  else
    cmd += action;
  if (::geteuid() == 0)
    cmd = "runuser -u postgres -- " + cmd;
  cmd += " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

pg_outage::pg_outage() {
  // A stop that timed out may still be under way: down either way.
  stopped_ = pg_ctl("stop -m fast") == 0;
  down_ = true;
}

pg_outage::~pg_outage() {
  if (down_)
    restart();
}

bool pg_outage::restart() {
  // A shutdown still under way (the stop timed out) refuses the start:
  // wait for it to end, then start.
  if (pg_ctl("start") != 0 && (pg_ctl("stop -m fast"), pg_ctl("start") != 0))
    return false;
  down_ = false;
  return true;
}

} // namespace butlers::test
