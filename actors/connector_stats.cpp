#include "actors/connector_stats.hpp"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "runtime/route.hpp"

namespace butlers {

namespace {

using stats_ptr = connector_stats_actor::stateful_pointer<
  connector_stats_state>;

using sys_clock = std::chrono::system_clock;

void ensure_partitions(stats_ptr self);

/// Timer kinds (the low two bits of a timer token).
enum timer_kind : uint64_t {
  hourly_timer = 0,
  daily_timer = 1,
  gauge_timer = 2
};

/// How often the liveness gauge is refreshed.
constexpr std::chrono::seconds gauge_period{30};

void arm(stats_ptr self, timer_kind kind) {
  auto& st = self->state;
  auto token = (++st.timers[kind] << 2) | kind;
  if (kind == gauge_timer) {
    // Every second until the partitions are made (the writer connects
    // within a few), then at the gauge's own pace.
    auto period = st.partitions_ensured
                    ? caf::timespan{gauge_period}
                    : caf::timespan{std::chrono::seconds{1}};
    self->delayed_send(self, period, schedule_atom_v, token);
    return;
  }
  auto& cron = kind == hourly_timer ? st.hourly_cron : st.daily_cron;
  auto now = sys_clock::now();
  auto next = cron ? cron->next_after(now) : std::nullopt;
  if (!next)
    return;
  auto delay = std::chrono::duration_cast<caf::timespan>(*next - now);
  self->delayed_send(self, delay, schedule_atom_v, token);
}

void init_metrics(connector_stats_state& st) {
  auto& m = st.ctx->metrics;
  st.received = &m.get_counter("butlers_connector_heartbeats_received_total",
                               "Connector heartbeats queued for their write");
  st.dropped = &m.get_counter("butlers_connector_heartbeats_dropped_total",
                              "Connector heartbeats refused: the heartbeat "
                              "queue was full");
  st.failed = &m.get_counter("butlers_connector_heartbeats_failed_total",
                             "Connector heartbeats whose write failed");
  st.registered = &m.get_counter("butlers_connector_registered_total",
                                 "Connectors registered by their first "
                                 "heartbeat");
  st.queue_depth = &m.get_gauge("butlers_connector_heartbeat_queue",
                                "Connector heartbeats waiting for their "
                                "write");
  for (auto x : {connector_liveness::online, connector_liveness::stale,
                 connector_liveness::offline})
    st.by_liveness[static_cast<int>(x)]
      = &m.get_gauge("butlers_connectors", "Known connectors by liveness",
                     std::string{"liveness=\""} + to_string(x) + "\"");
}

/// Hands a heartbeat's statement to the writer; false when the queue is
/// full.
bool queue_heartbeat(stats_ptr self, named_statement& stmt) {
  auto& st = self->state;
  if (st.queued >= st.cfg.heartbeat_queue) {
    st.dropped->inc();
    return false;
  }
  ++st.queued;
  st.received->inc();
  st.queue_depth->set(st.queued);
  auto who = stmt.params.size() > 1 ? stmt.params[0] + "/" + stmt.params[1]
                                    : std::string{};
  self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
    .then(
      [self, who](named_result& r) {
        auto& st = self->state;
        st.queue_depth->set(--st.queued);
        if (!r.ok || r.rows.empty()) {
          st.failed->inc();
          spdlog::warn("connector heartbeat of {} was not stored", who);
          return;
        }
        auto& row = r.rows.front();
        if (!row.empty() && row[0] == "t") {
          st.registered->inc();
          spdlog::info("connector {} registered by its first heartbeat", who);
        } else if (row.size() > 1 && row[1] == "t") {
          spdlog::info("connector {} reports a new instance (restarted)", who);
        }
      },
      [self, who](const caf::error& err) {
        auto& st = self->state;
        st.queue_depth->set(--st.queued);
        st.failed->inc();
        spdlog::warn("connector heartbeat of {} was not stored: {}", who,
                     self->system().render(err));
      });
  return true;
}

/// What a rollup run answers: a JSON array of what each statement did, or
/// why the run failed.
using rollup_done = std::function<void(caf::expected<std::string>)>;

/// Runs one rollup through the writer, then `done`.
void run_rollup(stats_ptr self, rollup_kind kind, std::string at,
                rollup_done done) {
  auto stmts = rollup_statements(kind, at);
  write_request req;
  req.named = stmts;
  auto started = std::chrono::steady_clock::now();
  auto& m = self->state.ctx->metrics;
  std::string labels = std::string{"kind=\""} + to_string(kind) + "\"";
  auto* ok = &m.get_counter("butlers_connector_rollup_runs_total",
                            "Connector rollup runs by kind and outcome",
                            labels + ",outcome=\"ok\"");
  auto* failed = &m.get_counter("butlers_connector_rollup_runs_total",
                                "Connector rollup runs by kind and outcome",
                                labels + ",outcome=\"error\"");
  auto* took = &m.get_histogram("butlers_connector_rollup_duration_ms",
                                "Connector rollup run time",
                                latency_buckets_ms(), labels);
  self->request(self->state.writer, local_call, exec_atom_v, std::move(req))
    .then(
      [done, kind, at, stmts, started, ok, failed, took](write_reply& r) {
        std::string out = "[";
        bool all_ok = true;
        for (size_t i = 0; i < stmts.size(); ++i) {
          named_result res;
          if (i < r.named.size())
            res = std::move(r.named[i]);
          all_ok = all_ok && res.ok;
          if (out.size() > 1)
            out += ',';
          out += log_rollup_result(kind, at, stmts[i], res);
        }
        (all_ok ? ok : failed)->inc();
        took->observe(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - started)
                        .count());
        done(out + "]");
      },
      [done, kind, failed](const caf::error& err) {
        failed->inc();
        spdlog::warn("connector rollup {} failed", to_string(kind));
        done(err);
      });
}

/// A scheduled run: hourly rolls up the hour that just ended; daily rolls
/// up the day that just ended (daily, fanout) and applies retention.
void scheduled(stats_ptr self, timer_kind kind) {
  using namespace std::chrono;
  auto now = sys_clock::now();
  auto run = [self](rollup_kind k, sys_clock::time_point at) {
    // Logged and counted by run_rollup; nobody waits for the answer.
    run_rollup(self, k, rollup_time(at), [](caf::expected<std::string>) {});
  };
  if (kind == hourly_timer) {
    run(rollup_kind::hourly, now - hours{1});
  } else {
    run(rollup_kind::daily, now - hours{24});
    run(rollup_kind::fanout, now - hours{24});
    run(rollup_kind::retention, now);
  }
}

void refresh_gauge(stats_ptr self) {
  auto& st = self->state;
  if (!st.reader)
    return;
  self
    ->request(st.reader, std::chrono::seconds{30}, read_atom_v,
              named_statement{"connector_ages", {}})
    .then(
      [self](named_result& r) {
        if (!r.ok)
          return;
        int64_t n[3] = {0, 0, 0};
        for (auto& row : r.rows)
          ++n[static_cast<int>(
            liveness_of(row.empty() ? std::nullopt : parse_age(row[0])))];
        for (int i = 0; i < 3; ++i)
          self->state.by_liveness[i]->set(n[i]);
      },
      [](const caf::error&) {});
}

/// Creates the heartbeat log's partitions for this month and the next (at
/// start, and on every gauge tick until it worked once: the writer may not
/// be connected yet; the hourly and retention runs keep doing it). Not
/// before the writer is connected: a write sent earlier is refused, and
/// counted, as unavailable.
void ensure_partitions(stats_ptr self) {
  auto& st = self->state;
  if (!st.ctx->status.database_ready)
    return;
  self
    ->request(st.writer, local_call, exec_atom_v,
              named_statement{"connector_partitions_ensure",
                              {rollup_time(sys_clock::now())},
                              "connector_stats"})
    .then(
      [self](named_result& r) {
        self->state.partitions_ensured = r.ok;
        for (auto& row : r.rows)
          if (!row.empty())
            spdlog::info("connector heartbeat log: created partition {}",
                         row[0]);
      },
      [](const caf::error&) {});
}

} // namespace

std::string rollup_time(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  return rfc3339_utc(duration_cast<microseconds>(t.time_since_epoch()).count());
}

connector_stats_actor::behavior_type connector_stats(
  connector_stats_actor::stateful_pointer<connector_stats_state> self,
  connectors_config cfg, inbox_writer_actor writer, db_reader_actor reader,
  node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = cfg;
  st.writer = std::move(writer);
  st.reader = std::move(reader);
  st.ctx = std::move(ctx);
  init_metrics(st);
  st.hourly_cron = cron_schedule::parse("5 * * * *", nullptr);
  st.daily_cron = cron_schedule::parse("15 0 * * *", nullptr);
  // The heartbeat log's partitions for this month and the next, whatever
  // the rollup setting: heartbeats are stored either way.
  ensure_partitions(self);
  if (st.cfg.rollups) {
    arm(self, hourly_timer);
    arm(self, daily_timer);
  }
  refresh_gauge(self);
  arm(self, gauge_timer);
  return {
    [self](heartbeat_atom, named_statement& stmt) {
      return queue_heartbeat(self, stmt);
    },
    [self](rollup_atom, const std::string& kind,
           const std::string& at) -> caf::result<std::string> {
      auto k = parse_rollup_kind(kind);
      if (!k)
        return caf::make_error(butlers_errc::validation_error,
                               "rollup kind: hourly, daily, fanout or "
                               "retention");
      auto rp = self->make_response_promise<std::string>();
      run_rollup(self, *k, at, [rp](caf::expected<std::string> x) mutable {
        if (x)
          rp.deliver(std::move(*x));
        else
          rp.deliver(x.error());
      });
      return rp;
    },
    [self](schedule_atom, uint64_t token) {
      auto kind = static_cast<timer_kind>(token & 3);
      if (kind > gauge_timer || (token >> 2) != self->state.timers[kind])
        return;
      if (kind == gauge_timer) {
        refresh_gauge(self);
        if (!self->state.partitions_ensured)
          ensure_partitions(self);
      } else
        scheduled(self, kind);
      arm(self, kind);
    },
  };
}

} // namespace butlers
