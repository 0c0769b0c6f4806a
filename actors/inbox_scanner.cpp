#include "actors/inbox_scanner.hpp"

#include <chrono>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

using scanner_ptr = inbox_scanner_actor::stateful_pointer<inbox_scanner_state>;

/// Delay before looking again while the writer is not ready.
constexpr auto not_ready = 100ms;

/// The one pending timer: any earlier one becomes a no-op. A sweep after
/// `interval` starts a new chain with the configured grace period; a drain
/// sweep keeps the chain's.
void schedule(scanner_ptr self, caf::timespan delay, bool new_chain) {
  auto& st = self->state;
  if (new_chain)
    st.grace_s = st.cfg.scanner_grace_s;
  self->delayed_send(self, delay, scan_atom_v, ++st.timer);
}

void sweep(scanner_ptr self);

/// A sweep at once, from the oldest row (what overflowed may be older than
/// the cursor) and without the grace period: starts a refill chain.
void refill(scanner_ptr self) {
  auto& st = self->state;
  st.cursor_us = 0;
  st.grace_s = 0;
  sweep(self);
}

/// One sweep: `accepted` rows older than the chain's grace period (none
/// after a refill) and expired `progress` rows, offered to the switchboard;
/// schedules what comes next.
void sweep(scanner_ptr self) {
  auto& st = self->state;
  auto interval = caf::timespan{
    std::chrono::seconds{st.cfg.scanner_interval_s}};
  ++st.timer; // whatever was scheduled is superseded by this sweep
  if (st.ctx->status.draining)
    return;
  if (!st.ctx->status.database_ready) {
    // The writer has not connected (and made the partitions) yet, or the
    // database is down: every claim of what we found would be refused as
    // unavailable. Look again shortly; at start this is crash recovery and
    // should not wait a whole interval.
    schedule(self, std::min<caf::timespan>(interval, not_ready), false);
    return;
  }
  std::vector<inbox_record> refs;
  try {
    if (!st.store->connected())
      st.store->connect();
    refs = st.store->scan(st.grace_s, st.cfg.scanner_batch_size, st.cursor_us);
    st.sweeps->inc();
  } catch (const std::exception& e) {
    // Before the writer migrated, or while the database is down. Retry
    // within a second: the first sweep is crash recovery, and should not
    // wait a whole interval for the writer's migrations.
    spdlog::debug("scanner: {}", e.what());
    st.store->disconnect();
    schedule(self, std::min<caf::timespan>(interval, 1s), false);
    return;
  }
  if (refs.empty()) {
    st.cursor_us = 0;
    schedule(self, interval, true);
    return;
  }
  auto found = static_cast<uint32_t>(refs.size());
  std::vector<int64_t> stamps;
  stamps.reserve(refs.size());
  for (auto& ref : refs)
    stamps.push_back(ref.context.received_at_us);
  spdlog::info("scanner: found {} message(s) to recover", found);
  st.offering = true;
  auto after = [self](caf::timespan next, bool new_chain) {
    auto& st = self->state;
    st.offering = false;
    if (st.refill_pending) {
      st.refill_pending = false;
      refill(self);
      return;
    }
    schedule(self, next, new_chain);
  };
  self->request(st.switchboard, 10s, enqueue_atom_v, std::move(refs))
    .then(
      [self, stamps, interval, after](uint32_t taken) {
        // The switchboard takes a prefix of the page. All of it: the next
        // page at once, right after the last one taken. Only part of it:
        // its queue is full, and it asks for a refill once it has room
        // again; until then (or after the backlog), the interval.
        auto& st = self->state;
        if (taken == stamps.size()) {
          // The next page starts at this page's last receipt time (ties may
          // straddle pages); a page of one microsecond moves past it.
          auto last = stamps[taken - 1];
          st.cursor_us = last == st.cursor_us ? last + 1 : last;
          after(caf::timespan{0}, false);
        } else {
          st.cursor_us = 0;
          after(interval, true);
        }
      },
      [self, interval, after](const caf::error&) {
        self->state.cursor_us = 0;
        after(interval, true);
      });
}

} // namespace

inbox_scanner_actor::behavior_type inbox_scanner(
  inbox_scanner_actor::stateful_pointer<inbox_scanner_state> self,
  database_config database, switchboard_config cfg,
  switchboard_actor switchboard, node_context_ptr ctx) {
  auto& st = self->state;
  st.store = std::make_unique<inbox_store>(database.url, "", 0);
  st.store->set_deadlines(
    {database.statement_timeout_ms, database.lock_timeout_ms});
  st.cfg = cfg;
  st.switchboard = std::move(switchboard);
  st.ctx = std::move(ctx);
  st.grace_s = st.cfg.scanner_grace_s;
  st.sweeps = &st.ctx->metrics
                 .get_counter("butlers_buffer_scanner_sweeps_total",
                              "Cold-path sweeps run");
  st.refills = &st.ctx->metrics.get_counter(
    "butlers_buffer_scanner_refills_total",
    "Sweeps run at once because the hot queue overflowed and drained");
  // Whom to ask when the hot queue has room again after an overflow.
  self->send(st.switchboard, refill_atom_v, inbox_scanner_actor{self});
  // Crash recovery: the first sweep runs at start.
  self->send(self, scan_atom_v, ++st.timer);
  return {
    [self](scan_atom, uint64_t token) {
      auto& st = self->state;
      if (token != st.timer)
        return; // superseded by a later schedule or a refill
      sweep(self);
    },
    [self](refill_atom) {
      auto& st = self->state;
      st.refills->inc();
      if (st.offering) {
        st.refill_pending = true;
        return;
      }
      refill(self);
    },
  };
}

} // namespace butlers
