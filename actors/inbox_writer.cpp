#include "actors/inbox_writer.hpp"

#include <random>

#include <caf/event_based_actor.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// How often a connected writer probes the database.
constexpr auto probe_interval = 2s;

/// How often partitions are created ahead and expired ones dropped.
constexpr auto maintenance_interval = 1h;

/// Longest delay between connection attempts.
constexpr caf::timespan max_backoff = 5s;

caf::timespan jittered(caf::timespan x) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist{0.5, 1.0};
  return std::chrono::duration_cast<caf::timespan>(x * dist(rng));
}

using writer_ptr = inbox_writer_actor::stateful_pointer<inbox_writer_state>;

/// Drops the connection, reports it, and schedules a reconnect.
void disconnect(writer_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.store)
    st.store->disconnect();
  st.status.connected = false;
  st.status.last_error = why;
  st.ctx->status.database_ready = false;
  st.ctx->status.set_database_error(why);
  if (!st.connect_scheduled) {
    st.connect_scheduled = true;
    self->delayed_send(self, jittered(st.backoff), connect_atom_v);
    st.backoff = std::min(st.backoff * 2, max_backoff);
  }
}

void maintain_partitions(writer_ptr self) {
  auto& st = self->state;
  auto created = st.store->ensure_partitions(st.cfg.partitions_ahead);
  if (created > 0)
    spdlog::info("created {} message_inbox partition(s)", created);
  for (auto& name : st.store->drop_partitions(st.cfg.retention_months))
    spdlog::info("dropped partition {} (retention {} month(s))", name,
                 st.cfg.retention_months);
  st.last_maintenance = std::chrono::steady_clock::now();
}

/// Writes one batch; delivers results or errors to its waiters.
void flush(writer_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.batch.size() == 0)
    return;
  auto batch = std::move(st.batch);
  auto appends = std::move(st.append_waiters);
  auto claims = std::move(st.claim_waiters);
  auto completes = std::move(st.complete_waiters);
  st.batch = inbox_store::batch{};
  st.append_waiters.clear();
  st.claim_waiters.clear();
  st.complete_waiters.clear();
  auto started = std::chrono::steady_clock::now();
  auto deliver_error = [&](const caf::error& err) {
    for (auto& rp : appends)
      rp.deliver(err);
    for (auto& rp : claims)
      rp.deliver(err);
    for (auto& rp : completes)
      rp.deliver(err);
  };
  if (!st.store->connected()) {
    st.unavailable->inc(batch.size());
    deliver_error(caf::error{butlers_errc::database_unavailable,
                             std::string{"database unavailable"}});
    return;
  }
  try {
    auto result = st.store->write(batch);
    st.commits->inc();
    st.status.commits += 1;
    st.status.rows += batch.size();
    st.appended->inc(batch.appends.size());
    st.claimed->inc(batch.claims.size());
    st.completed->inc(batch.completions.size());
    st.batch_sizes->observe(static_cast<double>(batch.size()));
    for (size_t i = 0; i < appends.size(); ++i)
      appends[i].deliver(std::move(result.appends[i]));
    for (size_t i = 0; i < claims.size(); ++i)
      claims[i].deliver(result.claims[i]);
    for (size_t i = 0; i < completes.size(); ++i)
      completes[i].deliver(static_cast<bool>(result.completions[i]));
  } catch (const pqxx::broken_connection& e) {
    st.unavailable->inc(batch.size());
    deliver_error(caf::error{butlers_errc::database_unavailable,
                             std::string{"database unavailable"}});
    spdlog::warn("database connection lost: {}", e.what());
    disconnect(self, e.what());
  } catch (const pqxx::in_doubt_error& e) {
    // The commit may or may not have happened: nothing was acknowledged, so
    // clients retry and dedupe finds what was stored.
    st.unavailable->inc(batch.size());
    deliver_error(caf::error{butlers_errc::database_unavailable,
                             std::string{"commit outcome unknown"}});
    spdlog::warn("commit in doubt: {}", e.what());
    disconnect(self, e.what());
  } catch (const std::exception& e) {
    // A statement error: the transaction rolled back, the connection lives.
    // Retry element by element, so one bad element fails alone.
    if (batch.size() == 1) {
      spdlog::error("inbox write failed: {}", e.what());
      deliver_error(
        caf::error{butlers_errc::internal_error, std::string{"storage error"}});
    } else {
      spdlog::warn("batch of {} failed ({}), retrying one by one", batch.size(),
                   e.what());
      for (size_t i = 0; i < batch.appends.size(); ++i) {
        st.batch.appends.push_back(std::move(batch.appends[i]));
        st.append_waiters.push_back(std::move(appends[i]));
        flush(self);
      }
      for (size_t i = 0; i < batch.claims.size(); ++i) {
        st.batch.claims.push_back(std::move(batch.claims[i]));
        st.claim_waiters.push_back(std::move(claims[i]));
        flush(self);
      }
      for (size_t i = 0; i < batch.completions.size(); ++i) {
        st.batch.completions.push_back(std::move(batch.completions[i]));
        st.complete_waiters.push_back(std::move(completes[i]));
        flush(self);
      }
    }
  }
  using ms = std::chrono::duration<double, std::milli>;
  st.flush_ms->observe(ms{std::chrono::steady_clock::now() - started}.count());
}

/// Adds one element to the batch; flushes when it is full, else makes sure
/// a flush is queued behind the messages already in the mailbox.
template<class Waiters, class Promise>
void enqueue(writer_ptr self, Waiters& waiters, Promise rp) {
  auto& st = self->state;
  waiters.push_back(std::move(rp));
  if (st.batch.size() >= st.cfg.max_batch) {
    flush(self);
  } else if (!st.flush_scheduled) {
    st.flush_scheduled = true;
    self->send(self, flush_atom_v);
  }
}

caf::error unavailable_error(writer_ptr self) {
  self->state.unavailable->inc();
  return caf::error{butlers_errc::database_unavailable,
                    "database unavailable: " + self->state.status.last_error};
}

} // namespace

inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, std::string owner, uint32_t lease_s,
  node_context_ptr ctx) {
  auto& st = self->state;
  st.store = std::make_unique<inbox_store>(cfg.url, std::move(owner), lease_s);
  st.cfg = std::move(cfg);
  st.ctx = std::move(ctx);
  auto& m = st.ctx->metrics;
  st.commits = &m.get_counter("butlers_inbox_writer_commits_total",
                              "Group-commit transactions");
  st.appended = &m.get_counter("butlers_inbox_writer_rows_total",
                               "Batched writes by kind", "op=\"append\"");
  st.claimed = &m.get_counter("butlers_inbox_writer_rows_total",
                              "Batched writes by kind", "op=\"claim\"");
  st.completed = &m.get_counter("butlers_inbox_writer_rows_total",
                                "Batched writes by kind", "op=\"complete\"");
  st.unavailable = &m.get_counter("butlers_inbox_writer_unavailable_total",
                                  "Writes answered database_unavailable");
  st.batch_sizes = &m.get_histogram("butlers_inbox_writer_batch_size",
                                    "Writes per group commit",
                                    {1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                     1024, 4096});
  st.flush_ms = &m.get_histogram("butlers_inbox_writer_flush_latency_ms",
                                 "Duration of one group commit");
  self->send(self, connect_atom_v);
  st.connect_scheduled = true;
  return {
    [self](status_atom) {
      return self->state.status;
    },
    [self](append_atom, inbox_record& rec) -> caf::result<append_result> {
      auto& st = self->state;
      if (!st.store->connected())
        return unavailable_error(self);
      st.batch.appends.push_back(std::move(rec));
      auto rp = self->make_response_promise<append_result>();
      enqueue(self, st.append_waiters, rp);
      return rp;
    },
    [self](claim_atom, inbox_ref& ref) -> caf::result<claim_result> {
      auto& st = self->state;
      if (!st.store->connected())
        return unavailable_error(self);
      st.batch.claims.push_back(std::move(ref));
      auto rp = self->make_response_promise<claim_result>();
      enqueue(self, st.claim_waiters, rp);
      return rp;
    },
    [self](complete_atom, completion& c) -> caf::result<bool> {
      auto& st = self->state;
      if (!st.store->connected())
        return unavailable_error(self);
      st.batch.completions.push_back(std::move(c));
      auto rp = self->make_response_promise<bool>();
      enqueue(self, st.complete_waiters, rp);
      return rp;
    },
    [self](flush_atom) {
      flush(self);
    },
    [self](connect_atom) {
      auto& st = self->state;
      st.connect_scheduled = false;
      try {
        st.store->connect();
        for (auto& name : st.store->migrate())
          spdlog::info("applied migration {}", name);
        maintain_partitions(self);
        st.status.connected = true;
        st.status.migrated = true;
        st.status.last_error.clear();
        st.backoff = 100ms;
        st.ctx->status.set_database_error({});
        st.ctx->status.database_ready = true;
        spdlog::info("database ready");
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database unavailable: {}", e.what());
        disconnect(self, e.what());
      }
    },
    [self](caf::tick_atom) {
      auto& st = self->state;
      if (!st.store->connected())
        return;
      try {
        if (std::chrono::steady_clock::now() - st.last_maintenance
            >= maintenance_interval)
          maintain_partitions(self);
        else
          st.store->ping();
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database probe failed: {}", e.what());
        disconnect(self, e.what());
      }
    },
  };
}

} // namespace butlers
