#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pqxx {
class connection_base;
} // namespace pqxx

namespace butlers {

/// One numbered migration from `sql/NNNN_name.sql`, compiled in.
struct migration {
  /// The number in the file name; applied in ascending order.
  int version = 0;
  /// The file name without directory, e.g. `0001_inbox.sql`.
  std::string name;
  /// The SQL text.
  std::string_view sql;
};

/// The embedded migrations in version order. Throws std::logic_error if two
/// files share a number or a name does not start with digits.
std::vector<migration> embedded_migrations();

/// Applies every embedded migration that `schema_migrations` does not list,
/// each in its own transaction, under a PostgreSQL advisory lock so that two
/// nodes starting at once apply each migration exactly once. Returns the
/// names applied. Throws pqxx exceptions on database errors, and
/// std::runtime_error if an applied migration's checksum no longer matches
/// its embedded file (someone edited history).
std::vector<std::string> apply_migrations(pqxx::connection_base& conn);

/// True when every embedded migration is recorded as applied.
bool migrations_current(pqxx::connection_base& conn);

} // namespace butlers
