#include "actors/inbox_scanner.hpp"

#include <chrono>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// Delay before the next sweep while draining a backlog.
constexpr auto drain_delay = 50ms;

/// Delay before looking again while the writer is not ready.
constexpr auto not_ready = 100ms;

} // namespace

inbox_scanner_actor::behavior_type inbox_scanner(
  inbox_scanner_actor::stateful_pointer<inbox_scanner_state> self,
  std::string database_url, switchboard_config cfg,
  switchboard_actor switchboard, node_context_ptr ctx) {
  auto& st = self->state;
  st.store = std::make_unique<inbox_store>(std::move(database_url), "", 0);
  st.cfg = std::move(cfg);
  st.switchboard = std::move(switchboard);
  st.ctx = std::move(ctx);
  st.sweeps = &st.ctx->metrics
                 .get_counter("butlers_buffer_scanner_sweeps_total",
                              "Cold-path sweeps run");
  // Crash recovery: the first sweep runs at start.
  self->send(self, scan_atom_v);
  return {
    [self](scan_atom) {
      auto& st = self->state;
      auto interval = std::chrono::seconds{st.cfg.scanner_interval_s};
      if (st.ctx->status.draining)
        return;
      if (!st.ctx->status.database_ready) {
        // The writer has not connected (and made the partitions) yet, or
        // the database is down: every claim of what we found would be
        // refused as unavailable. Look again shortly; at start this is
        // crash recovery and should not wait a whole interval.
        self->delayed_send(self, std::min<caf::timespan>(interval, not_ready),
                           scan_atom_v);
        return;
      }
      std::vector<inbox_ref> refs;
      try {
        if (!st.store->connected())
          st.store->connect();
        refs = st.store->scan(st.cfg.scanner_grace_s, st.cfg.scanner_batch_size,
                              st.cursor_us);
        st.sweeps->inc();
      } catch (const std::exception& e) {
        // Before the writer migrated, or while the database is down: try
        // again next interval.
        // Retry within a second: the first sweep is crash recovery, and
        // should not wait a whole interval for the writer's migrations.
        spdlog::debug("scanner: {}", e.what());
        st.store->disconnect();
        self->delayed_send(self, std::min<caf::timespan>(interval, 1s),
                           scan_atom_v);
        return;
      }
      if (refs.empty()) {
        st.cursor_us = 0;
        self->delayed_send(self, interval, scan_atom_v);
        return;
      }
      auto found = static_cast<uint32_t>(refs.size());
      std::vector<int64_t> stamps;
      stamps.reserve(refs.size());
      for (auto& ref : refs)
        stamps.push_back(ref.received_at_us);
      spdlog::info("scanner: found {} message(s) to recover", found);
      self->request(st.switchboard, 10s, enqueue_atom_v, std::move(refs))
        .then(
          [self, stamps, interval](uint32_t taken) {
            // The switchboard takes a prefix of the page. While it takes
            // any, continue right after the last one taken (the queue
            // drains as workers finish); when it takes none (full), or the
            // backlog is done, wait the interval.
            auto& st = self->state;
            if (taken > 0) {
              st.cursor_us = stamps[taken - 1];
              self->delayed_send(self, drain_delay, scan_atom_v);
            } else {
              st.cursor_us = 0;
              self->delayed_send(self, interval, scan_atom_v);
            }
          },
          [self, interval](const caf::error&) {
            self->state.cursor_us = 0;
            self->delayed_send(self, interval, scan_atom_v);
          });
    },
  };
}

} // namespace butlers
