#include "actors/inbox_writer.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/spawn_options.hpp>
#include <spdlog/spdlog.h>

#include "actors/inbox_connection.hpp"
#include "runtime/error.hpp"

namespace butlers {

void append_waiter::deliver(append_result r) {
  if (!batch) {
    one.deliver(std::move(r));
    return;
  }
  batch->results[index] = std::move(r);
  if (--batch->left == 0)
    batch->rp.deliver(std::move(batch->results));
}

void append_waiter::deliver(const caf::error& err) {
  if (!batch) {
    one.deliver(err);
    return;
  }
  auto& r = batch->results[index];
  r.request_id.clear();
  r.error_code = static_cast<uint8_t>(code_of(err));
  r.error_message = message_of(err);
  if (r.error_code == 0)
    r.error_code = static_cast<uint8_t>(butlers_errc::internal_error);
  if (--batch->left == 0)
    batch->rp.deliver(std::move(batch->results));
}

namespace {

using writer_ptr = inbox_writer_actor::stateful_pointer<inbox_writer_state>;

/// Connections count as up only once connection 0 has been up: it creates
/// the inbox's partitions when it connects, and the others may connect
/// sooner; nothing may be written before the partitions exist.
bool any_up(writer_ptr self) {
  auto& st = self->state;
  return st.primed
         && std::find(st.up.begin(), st.up.end(), true) != st.up.end();
}

bool usable(writer_ptr self, size_t i) {
  auto& st = self->state;
  return st.primed && i < st.up.size() && st.up[i] && !st.busy[i];
}

/// The index of a connection that is up and idle, or -1.
int idle_connection(writer_ptr self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.connections.size(); ++i)
    if (usable(self, i))
      return static_cast<int>(i);
  return -1;
}

/// The connection for the next batch of lifecycle and routing writes, or -1
/// to wait. Connection 0 is theirs; only while it is down may another take
/// them. One such batch is in flight at a time, whichever connection
/// carries it, so they commit in the order they were submitted.
int ordered_connection(writer_ptr self) {
  auto& st = self->state;
  if (st.ordered_in_flight)
    return -1;
  if (st.up[0])
    return usable(self, 0) ? 0 : -1;
  return idle_connection(self);
}

/// The connection for the next batch of appends alone, or -1 to wait: with
/// more than one connection, appends have the others to themselves, so
/// group commit of new requests never queues behind routing writes.
///
/// The first of those that is up takes every batch. The others only spill
/// over: they take one while it is busy and at least a quarter of
/// `max_batch` appends wait. At moderate load new requests then keep to one
/// connection and commit in batches that grow while it flushes (every
/// commit costs the database and the node CPU of its own); under load one
/// batch commits while the next is being written.
int append_connection(writer_ptr self) {
  auto& st = self->state;
  bool own_up = false;
  size_t spill = std::max<size_t>(1, st.cfg.max_batch / 4);
  for (size_t i = 1; i < st.connections.size(); ++i) {
    if (!st.up[i])
      continue;
    if (usable(self, i) && (!own_up || st.pending.appends.size() >= spill))
      return static_cast<int>(i);
    own_up = true;
  }
  // All of their own are down (or there is just one connection): share.
  if (!own_up && usable(self, 0) && !st.ordered_in_flight)
    return 0;
  return -1;
}

template<class T>
void take(std::vector<T>& from, std::vector<T>& to, size_t n) {
  n = std::min(n, from.size());
  to.insert(to.end(), std::make_move_iterator(from.begin()),
            std::make_move_iterator(from.begin() + static_cast<long>(n)));
  from.erase(from.begin(), from.begin() + static_cast<long>(n));
}

void deliver(batch_waiters& w, write_result& r) {
  for (size_t i = 0; i < w.appends.size(); ++i) {
    if (r.appends[i].request_id.empty())
      w.appends[i].deliver(
        caf::error{butlers_errc::internal_error, std::string{"storage error"}});
    else
      w.appends[i].deliver(std::move(r.appends[i]));
  }
  for (size_t i = 0; i < w.claims.size(); ++i)
    w.claims[i].deliver(r.claims[i]);
  for (size_t i = 0; i < w.completions.size(); ++i)
    w.completions[i].deliver(static_cast<bool>(r.completions[i]));
  for (size_t i = 0; i < w.named.size(); ++i) {
    if (i < r.named.size() && r.named[i].ok)
      w.named[i].deliver(std::move(r.named[i]));
    else
      w.named[i].deliver(
        caf::error{butlers_errc::internal_error, std::string{"storage error"}});
  }
  for (size_t i = 0; i < w.work.size(); ++i) {
    if (i < r.work.size())
      w.work[i].deliver(std::move(r.work[i]));
    else
      w.work[i].deliver(
        caf::error{butlers_errc::internal_error, std::string{"storage error"}});
  }
}

void deliver(batch_waiters& w, const caf::error& err) {
  for (auto& rp : w.appends)
    rp.deliver(err);
  for (auto& rp : w.claims)
    rp.deliver(err);
  for (auto& rp : w.completions)
    rp.deliver(err);
  for (auto& rp : w.work)
    rp.deliver(err);
  for (auto& rp : w.named)
    rp.deliver(err);
}

/// Hands pending work to idle connections, one transaction each.
void send_batch(writer_ptr self, int idx, bool ordered);

/// A butler storing a new work item (its route.execute accept) is an
/// independent insert, like a new request: it may ride the append lane.
bool is_work_append(const work_op& op) {
  return op.kind == work_op_kind::append;
}

bool has_work_appends(writer_ptr self) {
  auto& work = self->state.pending.work;
  return std::any_of(work.begin(), work.end(), is_work_append);
}

/// With lanes for appends (more than one connection), a work append only
/// ever rides one of those: were the ordered lane to take some too, two
/// accepts for the same butler could commit in two transactions in either
/// order, and its queue would no longer be in arrival order.
bool rides_ordered_lane(writer_ptr self, const work_op& op) {
  return self->state.connections.size() == 1 || !is_work_append(op);
}

bool has_ordered_work(writer_ptr self) {
  auto& work = self->state.pending.work;
  return std::any_of(work.begin(), work.end(), [self](const work_op& op) {
    return rides_ordered_lane(self, op);
  });
}

/// Moves up to `room` pending work ops that `pick` selects (and their
/// waiters) into `batch`, keeping the order of everything else.
template<class Pick>
size_t take_work(writer_ptr self, write_batch& batch, batch_waiters& waiters,
                 size_t room, Pick pick) {
  auto& st = self->state;
  auto& work = st.pending.work;
  auto& waiting = st.pending_waiters.work;
  size_t taken = 0;
  size_t keep = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    if (taken < room && pick(work[i])) {
      batch.work.push_back(std::move(work[i]));
      waiters.work.push_back(std::move(waiting[i]));
      ++taken;
    } else {
      if (keep != i) {
        work[keep] = std::move(work[i]);
        waiting[keep] = std::move(waiting[i]);
      }
      ++keep;
    }
  }
  work.resize(keep);
  waiting.resize(keep);
  return taken;
}

/// With `group_commit_delay_us`, whether a batch of appends that is not
/// full waits for more: until that long after the previous one went out.
/// Then a delayed flush_atom ends the wait (one at a time). At low load
/// the previous batch is long gone and nothing waits; at moderate load
/// batches go out at most once per delay, each larger, and each commit's
/// fixed cost (a flush, wake-ups on both sides) is paid less often.
bool hold_appends(writer_ptr self) {
  auto& st = self->state;
  if (st.cfg.group_commit_delay_us == 0
      || st.pending.appends.size() >= st.cfg.max_batch)
    return false;
  auto now = self->clock().now();
  auto due = st.last_append_batch
             + std::chrono::microseconds{st.cfg.group_commit_delay_us};
  if (now >= due)
    return false;
  if (st.hold_flush_at <= now) {
    st.hold_flush_at = due;
    self->delayed_send(self, due - now, flush_atom_v);
  }
  return true;
}

/// Hands pending work to free connections: lifecycle and routing writes
/// (claims, completions, work items, named statements) together with any
/// appends that fit, on the ordered lane; appends alone on the others.
void dispatch(writer_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  for (;;) {
    bool has_ordered = !st.pending.claims.empty()
                       || !st.pending.completions.empty()
                       || has_ordered_work(self) || !st.pending.named.empty();
    int idx;
    if (has_ordered && (idx = ordered_connection(self)) >= 0)
      send_batch(self, idx, true);
    else if ((!st.pending.appends.empty() || has_work_appends(self))
             && (idx = append_connection(self)) >= 0 && !hold_appends(self))
      send_batch(self, idx, false);
    else
      return;
  }
}

void send_batch(writer_ptr self, int idx, bool ordered) {
  auto& st = self->state;
  write_batch batch;
  batch_waiters waiters;
  size_t room = st.cfg.max_batch;
  auto move_kind = [&](auto items, auto waiting) {
    auto n = std::min(room, (st.pending.*items).size());
    take(st.pending.*items, batch.*items, n);
    take(st.pending_waiters.*waiting, waiters.*waiting, n);
    room -= n;
  };
  if (ordered) {
    move_kind(&write_batch::claims, &batch_waiters::claims);
    move_kind(&write_batch::completions, &batch_waiters::completions);
    room -= take_work(self, batch, waiters, room, [self](const work_op& op) {
      return rides_ordered_lane(self, op);
    });
    move_kind(&write_batch::named, &batch_waiters::named);
  }
  // Appends ride along on the ordered lane only when they have no lane of
  // their own (a single connection).
  if (!ordered || st.connections.size() == 1)
    move_kind(&write_batch::appends, &batch_waiters::appends);
  // So do a butler's new work items: an accept then waits for one flush,
  // not for the lifecycle batch ahead of it as well.
  if (!ordered)
    room -= take_work(self, batch, waiters, room, is_work_append);
  st.busy[idx] = true;
  if (ordered)
    st.ordered_in_flight = true;
  else
    st.last_append_batch = self->clock().now();
  auto size = batch.size();
  auto appends = batch.appends.size();
  auto claims = batch.claims.size();
  auto completions = batch.completions.size();
  auto work = batch.work.size();
  auto started = std::chrono::steady_clock::now();
  self
    ->request(st.connections[idx], caf::infinite, write_atom_v,
              std::move(batch))
    .then(
      [self, idx, ordered, waiters, size, appends, claims, completions, work,
       started](write_result& r) mutable {
        auto& st = self->state;
        st.busy[idx] = false;
        if (ordered)
          st.ordered_in_flight = false;
        st.commits->inc();
        st.status.commits += 1;
        st.status.rows += size;
        st.appended->inc(appends);
        st.claimed->inc(claims);
        st.completed->inc(completions);
        st.worked->inc(work);
        st.batch_sizes->observe(static_cast<double>(size));
        using ms = std::chrono::duration<double, std::milli>;
        st.flush_ms->observe(
          ms{std::chrono::steady_clock::now() - started}.count());
        deliver(waiters, r);
        dispatch(self);
      },
      [self, idx, ordered, waiters, size](caf::error& err) mutable {
        auto& st = self->state;
        st.busy[idx] = false;
        if (ordered)
          st.ordered_in_flight = false;
        st.unavailable->inc(size);
        deliver(waiters, err);
        dispatch(self);
      });
}

/// Flushes now when a batch is full, else once the mailbox has run empty
/// (a flush message queued behind the requests already there).
void schedule_flush(writer_ptr self) {
  auto& st = self->state;
  if (st.pending.size() >= st.cfg.max_batch) {
    dispatch(self);
  } else if (!st.flush_scheduled && idle_connection(self) >= 0) {
    st.flush_scheduled = true;
    self->send(self, flush_atom_v);
  }
}

template<class Reply, class Item, class Waiter>
caf::result<Reply> submit(writer_ptr self,
                          std::vector<Item> write_batch::*items,
                          std::vector<Waiter> batch_waiters::*waiters,
                          Item item) {
  auto& st = self->state;
  if (!any_up(self)) {
    st.unavailable->inc();
    return caf::error{butlers_errc::database_unavailable,
                      "database unavailable: " + st.last_error};
  }
  (st.pending.*items).push_back(std::move(item));
  auto rp = self->make_response_promise<Reply>();
  (st.pending_waiters.*waiters).push_back(rp);
  schedule_flush(self);
  return rp;
}

caf::result<std::vector<append_result>> submit_appends(
  writer_ptr self, std::vector<inbox_record>& recs) {
  auto& st = self->state;
  if (!any_up(self)) {
    st.unavailable->inc(recs.size());
    return caf::error{butlers_errc::database_unavailable,
                      "database unavailable: " + st.last_error};
  }
  auto reply = std::make_shared<append_batch_reply>();
  reply->rp = self->make_response_promise<std::vector<append_result>>();
  reply->results.resize(recs.size());
  reply->left = recs.size();
  if (recs.empty()) {
    reply->rp.deliver(std::vector<append_result>{});
    return reply->rp;
  }
  for (size_t i = 0; i < recs.size(); ++i) {
    st.pending.appends.push_back(std::move(recs[i]));
    st.pending_waiters.appends.emplace_back(reply, i);
    // Never more than a batch pending: a full one goes out at once.
    if (st.pending.size() >= st.cfg.max_batch)
      dispatch(self);
  }
  schedule_flush(self);
  return reply->rp;
}

} // namespace

inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, std::string owner, uint32_t lease_s,
  node_context_ptr ctx) {
  auto db = cfg;
  auto make = [db, owner, lease_s](writer_ptr writer, uint32_t index) {
    return writer
      ->spawn<caf::detached + caf::linked>(inbox_connection, index, db, owner,
                                           lease_s,
                                           caf::actor_cast<inbox_writer_actor>(
                                             writer));
  };
  return inbox_writer_with(self, std::move(cfg), std::move(ctx), make);
}

inbox_writer_actor::behavior_type inbox_writer_with(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, node_context_ptr ctx, connection_factory make) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.ctx = std::move(ctx);
  st.last_error = "not connected yet";
  auto& m = st.ctx->metrics;
  st.commits = &m.get_counter("butlers_inbox_writer_commits_total",
                              "Group-commit transactions");
  st.appended = &m.get_counter("butlers_inbox_writer_rows_total",
                               "Batched writes by kind", "op=\"append\"");
  st.claimed = &m.get_counter("butlers_inbox_writer_rows_total",
                              "Batched writes by kind", "op=\"claim\"");
  st.completed = &m.get_counter("butlers_inbox_writer_rows_total",
                                "Batched writes by kind", "op=\"complete\"");
  st.worked = &m.get_counter("butlers_inbox_writer_rows_total",
                             "Batched writes by kind", "op=\"work\"");
  st.unavailable = &m.get_counter("butlers_inbox_writer_unavailable_total",
                                  "Writes answered database_unavailable");
  st.batch_sizes = &m.get_histogram("butlers_inbox_writer_batch_size",
                                    "Writes per group commit",
                                    {1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                     1024, 4096});
  st.flush_ms = &m.get_histogram("butlers_inbox_writer_flush_latency_ms",
                                 "Duration of one group commit");
  st.connections_up = &m.get_gauge("butlers_inbox_writer_connections_up",
                                   "Writer connections that are up");
  auto n = std::max<uint32_t>(1, st.cfg.writer_connections);
  for (uint32_t i = 0; i < n; ++i)
    st.connections.push_back(make(self, i));
  st.up.assign(n, false);
  st.busy.assign(n, false);
  return {
    [self](status_atom) {
      return self->state.status;
    },
    [self](append_atom, inbox_record& rec) -> caf::result<append_result> {
      return submit<append_result>(self, &write_batch::appends,
                                   &batch_waiters::appends, std::move(rec));
    },
    [self](append_atom, std::vector<inbox_record>& recs)
      -> caf::result<std::vector<append_result>> {
      return submit_appends(self, recs);
    },
    [self](claim_atom, inbox_ref& ref) -> caf::result<claim_result> {
      return submit<claim_result>(self, &write_batch::claims,
                                  &batch_waiters::claims, std::move(ref));
    },
    [self](complete_atom, completion& c) -> caf::result<bool> {
      return submit<bool>(self, &write_batch::completions,
                          &batch_waiters::completions, std::move(c));
    },
    [self](work_atom, work_op& op) -> caf::result<work_result> {
      return submit<work_result>(self, &write_batch::work, &batch_waiters::work,
                                 std::move(op));
    },
    [self](exec_atom, named_statement& x) -> caf::result<named_result> {
      return submit<named_result>(self, &write_batch::named,
                                  &batch_waiters::named, std::move(x));
    },
    [self](flush_atom) {
      dispatch(self);
    },
    [self](link_atom, uint32_t index, bool is_up, const std::string& why) {
      auto& st = self->state;
      if (index >= st.up.size())
        return;
      bool was_ready = st.ctx->status.database_ready;
      st.up[index] = is_up;
      if (!is_up)
        st.last_error = why;
      if (index == 0 && is_up)
        st.primed = true;
      auto n_up = st.primed ? std::count(st.up.begin(), st.up.end(), true) : 0;
      st.connections_up->set(n_up);
      st.status.connected = n_up > 0;
      st.status.migrated = st.primed;
      st.status.last_error = n_up > 0 ? std::string{} : st.last_error;
      st.ctx->status.database_ready = n_up > 0;
      st.ctx->status.set_database_error(st.status.last_error);
      if (n_up == 0) {
        // Nothing can write the pending work: fail it now, never hang.
        deliver(st.pending_waiters,
                caf::error{butlers_errc::database_unavailable,
                           "database unavailable: " + st.last_error});
        st.pending = write_batch{};
        st.pending_waiters = batch_waiters{};
      } else if (is_up) {
        if (!was_ready)
          spdlog::info("database ready");
        dispatch(self);
      }
    },
  };
}

} // namespace butlers
