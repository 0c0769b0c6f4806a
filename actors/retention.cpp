#include "actors/retention.hpp"

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "runtime/embedded.hpp"

namespace butlers {

namespace {

using namespace std::chrono_literals;

using retention_ptr = retention_actor::stateful_pointer<retention_state>;

/// Delay before looking again while the writer has not connected yet.
constexpr auto not_ready = 500ms;

/// Delay before the next pass after one failed (the database is down).
constexpr caf::timespan after_failure = 30s;

void schedule(retention_ptr self, caf::timespan delay) {
  self->delayed_send(self, delay, schedule_atom_v, ++self->state.timer);
}

caf::timespan interval_of(const retention_config& cfg) {
  return std::chrono::seconds{cfg.interval_s};
}

/// Runs one batch of `query` on the actor's connection (connecting first
/// when it has none); answers its rows (relation, action) → count. Throws
/// what libpqxx throws.
retention_counts run_batch(retention_state& st, const std::string& query,
                           uint32_t days) {
  if (!st.conn || !st.conn->is_open()) {
    st.conn.reset();
    auto conn = std::make_unique<pqxx::connection>(st.url);
    apply_deadlines(*conn, st.deadlines);
    st.conn = std::move(conn);
  }
  pqxx::work tx{*st.conn};
  auto r = tx.exec_params(named_query(query), static_cast<int>(days),
                          static_cast<int>(st.cfg.batch_rows));
  tx.commit();
  retention_counts out;
  for (const auto& row : r)
    out[{row[0].as<std::string>(), row[1].as<std::string>()}]
      += row[2].as<uint64_t>();
  return out;
}

/// Counts a batch's rows in `butlers_retention_rows_total{table,action}`.
void count_rows(retention_state& st, const retention_counts& batch) {
  for (auto& [key, n] : batch) {
    if (n == 0)
      continue;
    st.ctx->metrics
      .get_counter("butlers_retention_rows_total",
                   "Rows the retention deleted or redacted, by table",
                   "table=\"" + key.first + "\",action=\"" + key.second + "\"")
      .inc(n);
  }
}

/// Logs what a pass did, one line per table it touched.
void log_pass(retention_state& st, bool ok) {
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - st.pass_started)
                .count();
  uint64_t total = 0;
  for (auto& [key, n] : st.pass->totals()) {
    if (n == 0)
      continue;
    total += n;
    spdlog::info("retention: {} {} row(s) of {}",
                 key.second == "redact" ? "redacted" : "deleted", n, key.first);
  }
  if (ok)
    spdlog::log(total > 0 ? spdlog::level::info : spdlog::level::debug,
                "retention: pass done in {} ms, {} batch(es), {} row(s)", took,
                st.pass->batches(), total);
  else
    spdlog::warn("retention: pass ended early after {} ms, {} row(s)", took,
                 total);
}

/// Ends the current pass and schedules the next.
void end_pass(retention_ptr self, bool ok) {
  auto& st = self->state;
  log_pass(st, ok);
  (ok ? st.passes_ok : st.passes_failed)->inc();
  st.pass.reset();
  schedule(self, ok ? interval_of(st.cfg)
                    : std::min(interval_of(st.cfg), after_failure));
}

/// Runs the next batch of the pass (starting one when none is under way)
/// and schedules what follows.
void step(retention_ptr self) {
  auto& st = self->state;
  if (st.ctx->status.draining)
    return;
  if (!st.ctx->status.database_ready) {
    schedule(self, not_ready);
    return;
  }
  if (!st.pass) {
    st.pass.emplace(st.cfg);
    st.pass_started = std::chrono::steady_clock::now();
  }
  auto next = st.pass->next();
  if (!next) {
    end_pass(self, true);
    return;
  }
  auto started = std::chrono::steady_clock::now();
  double took_ms = 0;
  try {
    auto counts = run_batch(st, next->first.query, next->second);
    took_ms = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now() - started)
                .count();
    st.batch_ms->observe(took_ms);
    count_rows(st, counts);
    st.pass->record(counts);
  } catch (const std::exception& e) {
    spdlog::warn("retention: {} failed: {}", next->first.query, e.what());
    st.conn.reset();
    st.pass->abandon();
    end_pass(self, false);
    return;
  }
  if (!st.pass->next()) {
    end_pass(self, true);
    return;
  }
  // Paced by what the batch cost (its statement and its commit's flush):
  // on a database busy with the node's own work batches take longer, and
  // the pruning backs off in proportion.
  schedule(self, retention_pause(st.cfg, took_ms));
}

} // namespace

retention_actor::behavior_type retention(
  retention_actor::stateful_pointer<retention_state> self, retention_config cfg,
  database_config database, node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = cfg;
  st.url = database.url;
  st.deadlines = {database.statement_timeout_ms, database.lock_timeout_ms};
  st.ctx = std::move(ctx);
  auto& m = st.ctx->metrics;
  st.passes_ok = &m.get_counter("butlers_retention_passes_total",
                                "Retention passes by outcome",
                                "outcome=\"ok\"");
  st.passes_failed = &m.get_counter("butlers_retention_passes_total",
                                    "Retention passes by outcome",
                                    "outcome=\"error\"");
  st.batch_ms = &m.get_histogram("butlers_retention_batch_duration_ms",
                                 "Time of one retention batch (one "
                                 "statement, one transaction)");
  schedule(self, caf::timespan{0});
  return {
    [self](schedule_atom, uint64_t token) {
      if (token == self->state.timer)
        step(self);
    },
  };
}

} // namespace butlers
