#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "runtime/messages.hpp"

namespace butlers {

/// The inbox's SQL, on one connection: group-committed appends, claims and
/// completions (each batch one transaction, or one autocommitted
/// statement when it holds appends alone; each kind one statement over
/// arrays), the cold-path scan, migrations and partition maintenance.
/// Blocking: used only from detached actors and tests. Methods throw
/// libpqxx exceptions; `pqxx::broken_connection` (and `in_doubt_error`)
/// mean the database is unreachable and the object must reconnect.
/// Runs the named statement `st` (sql/queries/<query>.sql) in `tx`.
named_result run_named(pqxx::transaction_base& tx, const named_statement& st);

/// Runs the named statements `in` in `tx`, in order, except that the
/// statements of a set-based query (see `set_based` in inbox_store.cpp)
/// run together as one statement, before the next statement of another
/// query. Returns their results in the order of `in`. With `prepared`, the
/// connection has the set-based queries prepared under their names.
std::vector<named_result> run_named(pqxx::transaction_base& tx,
                                    const std::vector<named_statement>& in,
                                    bool prepared = false);

/// Deadlines of a session: how long one statement may run, and how long it
/// may wait for a lock (milliseconds; 0 means no limit).
struct session_deadlines {
  uint32_t statement_ms = 0;
  uint32_t lock_ms = 0;
};

/// Applies `d` to the session of `conn` (`SET statement_timeout`,
/// `SET lock_timeout`).
void apply_deadlines(pqxx::connection& conn, session_deadlines d);

/// Which deadline cancelled a statement, when one did.
enum class deadline_kind : uint8_t { none, statement, lock };

/// Classifies a libpqxx exception: SQLSTATE 57014 (query_canceled: the
/// statement timeout) or 55P03 (lock_not_available: the lock timeout).
deadline_kind deadline_of(const std::exception& e);

/// "statement_timeout" or "lock_timeout" (logs and metric labels).
const char* to_string(deadline_kind k);

class inbox_store {
 public:
  /// `owner` names this node in leases and the transition log; claims hold
  /// their lease for `lease_s` seconds.
  inbox_store(std::string url, std::string owner, uint32_t lease_s);
  ~inbox_store();

  /// The deadlines every later connection's session runs with.
  void set_deadlines(session_deadlines d) {
    deadlines_ = d;
  }

  /// Opens the connection, applies the deadlines and prepares the named
  /// statements.
  void connect();
  void disconnect();
  bool connected() const {
    return conn_ != nullptr;
  }

  /// Applies pending migrations (advisory-locked); returns their names.
  std::vector<std::string> migrate();

  /// Creates the current and `ahead` next monthly partitions; returns how
  /// many were new.
  int ensure_partitions(uint32_t ahead);

  /// Drops partitions older than `retention_months` whole months (and their
  /// dedupe entries); returns the dropped partitions' names.
  std::vector<std::string> drop_partitions(uint32_t retention_months);

  /// A round trip, to notice a dead connection while idle.
  void ping();

  /// Writes a batch in one transaction (appends alone: one autocommitted
  /// statement, and a broken connection is reported as
  /// `pqxx::in_doubt_error`, since it may have committed). Duplicate dedupe
  /// keys inside the batch resolve to the first occurrence's request.
  /// Appends are written in dedupe-key order, so concurrent batches on
  /// other connections lock keys in the same order and cannot deadlock.
  write_result write(const write_batch& b);

  /// Writes each element in its own transaction, marking the ones that
  /// fail (see `write_result`): isolates a bad element after a batch failed
  /// with a statement error. Connection errors still throw.
  write_result write_each(const write_batch& b);

  /// The cold path: `accepted` rows older than `grace_s` and `progress`
  /// rows whose lease expired, received at or after `after_us` (Unix µs),
  /// oldest first, at most `limit`; each with its context, normalized text
  /// and policy tier (no raw payload, no dedupe key).
  std::vector<inbox_record> scan(uint32_t grace_s, uint32_t limit,
                                 int64_t after_us = 0);

 private:
  /// `committed`: `tx` commits each statement by itself (autocommit), so
  /// the appends stand even if the dedupe lookup after them fails.
  void write_appends(pqxx::transaction_base& tx,
                     const std::vector<inbox_record>& in,
                     std::vector<append_result>& out, bool committed);
  void write_claims(pqxx::work& tx, const std::vector<inbox_ref>& in,
                    std::vector<claim_result>& out);
  void write_completions(pqxx::work& tx, const std::vector<completion>& in,
                         std::vector<bool>& out);
  void write_work(pqxx::work& tx, const std::vector<work_op>& in,
                  std::vector<work_result>& out);
  /// The finish ops `which` of `in` through `name` (work_finish_usage).
  pqxx::result finish_with_usage(pqxx::work& tx, const char* name,
                                 const std::vector<work_op>& in,
                                 const std::vector<size_t>& which);
  void write_work_appends(pqxx::work& tx, const std::vector<work_op>& in,
                          const std::vector<size_t>& which,
                          std::vector<work_result>& out);

  std::string url_;
  std::string owner_;
  uint32_t lease_s_;
  std::unique_ptr<pqxx::connection> conn_;
  session_deadlines deadlines_;
};

} // namespace butlers
