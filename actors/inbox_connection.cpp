#include "actors/inbox_connection.hpp"

#include <random>

#include <caf/event_based_actor.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// How often an idle connection probes the database.
constexpr auto probe_interval = 2s;

/// How often partitions are created ahead and expired ones dropped.
constexpr auto maintenance_interval = 1h;

/// Longest delay between connection attempts.
constexpr caf::timespan max_backoff = 5s;

using connection_ptr = inbox_connection_actor::stateful_pointer<
  inbox_connection_state>;

caf::timespan jittered(caf::timespan x) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist{0.5, 1.0};
  return std::chrono::duration_cast<caf::timespan>(x * dist(rng));
}

/// Drops the connection, tells the writer, and schedules a reconnect.
void go_down(connection_ptr self, const std::string& why) {
  auto& st = self->state;
  st.store->disconnect();
  self->send(st.writer, link_atom_v, st.index, false, why);
  if (!st.connect_scheduled) {
    st.connect_scheduled = true;
    self->delayed_send(self, jittered(st.backoff), connect_atom_v);
    st.backoff = std::min(st.backoff * 2, max_backoff);
  }
}

/// A batch a session deadline cancelled: logged (without its data) and
/// answered `timeout`, which the writer counts and hands on as
/// `database_unavailable`. The connection stays up.
caf::error timed_out(connection_ptr self, deadline_kind kind, size_t n) {
  auto& st = self->state;
  auto limit = kind == deadline_kind::lock ? st.cfg.lock_timeout_ms
                                           : st.cfg.statement_timeout_ms;
  spdlog::warn("writer connection {}: a batch of {} write(s) hit the {} "
               "({} ms) and rolled back; it is retried",
               st.index, n, to_string(kind), limit);
  return caf::error{butlers_errc::timeout, std::string{"database "}
                                             + to_string(kind) + " ("
                                             + std::to_string(limit) + " ms)"};
}

void maintain_partitions_or_throw(connection_ptr self) {
  auto& st = self->state;
  auto created = st.store->ensure_partitions(st.cfg.partitions_ahead);
  if (created > 0)
    spdlog::info("created {} message_inbox partition(s)", created);
  for (auto& name : st.store->drop_partitions(st.cfg.retention_months))
    spdlog::info("dropped partition {} (retention {} month(s))", name,
                 st.cfg.retention_months);
}

/// Creates partitions ahead and drops expired ones. A failure here (other
/// than a lost connection) is logged and retried next time; it does not take
/// the connection down.
void maintain_partitions(connection_ptr self) {
  auto& st = self->state;
  st.last_maintenance = std::chrono::steady_clock::now();
  try {
    maintain_partitions_or_throw(self);
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const std::exception& e) {
    spdlog::error("partition maintenance failed: {}", e.what());
  }
}

} // namespace

inbox_connection_actor::behavior_type inbox_connection(
  inbox_connection_actor::stateful_pointer<inbox_connection_state> self,
  uint32_t index, database_config cfg, std::string owner, uint32_t lease_s,
  inbox_writer_actor writer) {
  auto& st = self->state;
  st.index = index;
  st.store = std::make_unique<inbox_store>(cfg.url, std::move(owner), lease_s);
  st.store->set_deadlines({cfg.statement_timeout_ms, cfg.lock_timeout_ms});
  st.cfg = std::move(cfg);
  st.writer = std::move(writer);
  st.connect_scheduled = true;
  self->send(self, connect_atom_v);
  return {
    [self](write_atom, const write_batch& batch) -> caf::result<write_result> {
      auto& st = self->state;
      if (!st.store->connected())
        return caf::error{butlers_errc::database_unavailable,
                          std::string{"database unavailable"}};
      try {
        try {
          return st.store->write(batch);
        } catch (const pqxx::broken_connection&) {
          throw;
        } catch (const pqxx::in_doubt_error&) {
          throw;
        } catch (const pqxx::sql_error& e) {
          // A deadline (a held lock, a stalled statement) cancelled it: the
          // transaction rolled back and nothing is acknowledged. One by one
          // each would wait as long again, so the batch fails as a whole,
          // classified, and its writers retry.
          if (auto kind = deadline_of(e); kind != deadline_kind::none)
            return timed_out(self, kind, batch.size());
          if (batch.size() == 1)
            spdlog::error("inbox write failed: {}", e.what());
          else
            spdlog::warn("batch of {} failed ({}), retrying one by one",
                         batch.size(), e.what());
          return st.store->write_each(batch);
        } catch (const std::exception& e) {
          // A statement error: the transaction (or the autocommitted
          // append statement) rolled back and the connection lives.
          // Isolate the bad element(s).
          if (batch.size() == 1)
            spdlog::error("inbox write failed: {}", e.what());
          else
            spdlog::warn("batch of {} failed ({}), retrying one by one",
                         batch.size(), e.what());
          return st.store->write_each(batch);
        }
      } catch (const pqxx::in_doubt_error& e) {
        // The commit may or may not have happened: nothing is acknowledged,
        // so clients retry and dedupe finds what was stored.
        spdlog::warn("commit in doubt: {}", e.what());
        go_down(self, e.what());
        return caf::error{butlers_errc::database_unavailable,
                          std::string{"commit outcome unknown"}};
      } catch (const std::exception& e) {
        spdlog::warn("database connection lost: {}", e.what());
        go_down(self, e.what());
        return caf::error{butlers_errc::database_unavailable,
                          std::string{"database unavailable"}};
      }
    },
    [self](connect_atom) {
      auto& st = self->state;
      st.connect_scheduled = false;
      try {
        st.store->connect();
        for (auto& name : st.store->migrate())
          spdlog::info("applied migration {}", name);
        if (st.index == 0)
          maintain_partitions(self);
        st.backoff = 100ms;
        self->send(st.writer, link_atom_v, st.index, true, std::string{});
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database unavailable: {}", e.what());
        go_down(self, e.what());
      }
    },
    [self](caf::tick_atom) {
      auto& st = self->state;
      if (!st.store->connected())
        return;
      try {
        if (st.index == 0
            && std::chrono::steady_clock::now() - st.last_maintenance
                 >= maintenance_interval)
          maintain_partitions(self);
        else
          st.store->ping();
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database probe failed: {}", e.what());
        go_down(self, e.what());
      }
    },
  };
}

} // namespace butlers
