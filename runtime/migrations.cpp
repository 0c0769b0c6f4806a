#include "runtime/migrations.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include <pqxx/pqxx>

#include "runtime/dedupe.hpp"
#include "runtime/embedded.hpp"

namespace butlers {

namespace {

/// Advisory lock key shared by every node: "butlers" in ASCII.
constexpr int64_t migration_lock_key = 0x6275746c657273;

constexpr const char* create_table_sql
  = "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY,"
    " name text NOT NULL,"
    " checksum text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";

} // namespace

std::vector<migration> embedded_migrations() {
  std::vector<migration> result;
  std::set<int> seen;
  for (auto& f : embedded_files()) {
    std::string_view path = f.path;
    // Migrations are the files directly in sql/ (sql/queries/ holds the
    // named statements the code prepares).
    if (path.substr(0, 4) != "sql/" || path.size() < 4 + 5
        || path.substr(path.size() - 4) != ".sql"
        || path.find('/', 4) != std::string_view::npos)
      continue;
    auto name = std::string{path.substr(4)};
    size_t digits = 0;
    while (digits < name.size()
           && std::isdigit(static_cast<unsigned char>(name[digits])))
      ++digits;
    if (digits == 0)
      throw std::logic_error("migration without a number: " + name);
    auto version = std::stoi(name.substr(0, digits));
    if (!seen.insert(version).second)
      throw std::logic_error("two migrations numbered "
                             + std::to_string(version));
    result.push_back(migration{version, std::move(name), f.content});
  }
  std::sort(result.begin(), result.end(), [](auto& x, auto& y) {
    return x.version < y.version;
  });
  return result;
}

std::vector<std::string> apply_migrations(pqxx::connection_base& conn) {
  std::vector<std::string> applied;
  pqxx::nontransaction{conn}.exec_params("SELECT pg_advisory_lock($1)",
                                         migration_lock_key);
  try {
    pqxx::nontransaction{conn}.exec(create_table_sql);
    for (auto& m : embedded_migrations()) {
      auto checksum = sha256_hex(m.sql);
      pqxx::work tx{conn};
      auto r = tx.exec_params("SELECT checksum FROM schema_migrations"
                              " WHERE version = $1",
                              m.version);
      if (!r.empty()) {
        if (r[0][0].as<std::string>() != checksum)
          throw std::runtime_error("migration " + m.name
                                   + " was changed after it was applied");
        continue;
      }
      tx.exec(std::string{m.sql});
      tx.exec_params("INSERT INTO schema_migrations (version, name, checksum)"
                     " VALUES ($1, $2, $3)",
                     m.version, m.name, checksum);
      tx.commit();
      applied.push_back(m.name);
    }
  } catch (...) {
    try {
      pqxx::nontransaction{conn}.exec_params("SELECT pg_advisory_unlock($1)",
                                             migration_lock_key);
    } catch (...) {
      // The connection is gone; the session lock went with it.
    }
    throw;
  }
  pqxx::nontransaction{conn}.exec_params("SELECT pg_advisory_unlock($1)",
                                         migration_lock_key);
  return applied;
}

bool migrations_current(pqxx::connection_base& conn) {
  pqxx::nontransaction tx{conn};
  auto exists = tx.exec("SELECT to_regclass('schema_migrations') IS NOT NULL");
  if (!exists[0][0].as<bool>())
    return false;
  std::set<int> done;
  for (auto row : tx.exec("SELECT version FROM schema_migrations"))
    done.insert(row[0].as<int>());
  for (auto& m : embedded_migrations())
    if (done.count(m.version) == 0)
      return false;
  return true;
}

} // namespace butlers
