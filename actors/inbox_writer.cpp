#include "actors/inbox_writer.hpp"

#include <algorithm>
#include <tuple>

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

/// No connection of a kind is up (see `spill_connection`).
constexpr int none_up = -2;

/// Of connections [first, last): the first that is up takes every batch;
/// the others only spill over, taking one while it is busy and at least a
/// quarter of `max_batch` writes wait (`waiting`). At moderate load writes
/// keep to one connection in batches that grow while it commits (every
/// commit costs the database and the node CPU of its own); under load one
/// batch commits while the next is written. Returns the connection, -1 to
/// wait, or `none_up`.
int spill_connection(writer_ptr self, size_t first, size_t last,
                     size_t waiting) {
  auto& st = self->state;
  size_t spill = std::max<size_t>(1, st.cfg.max_batch / 4);
  bool own_up = false;
  for (size_t i = first; i < last; ++i) {
    if (!st.up[i])
      continue;
    if (usable(self, i) && (!own_up || waiting >= spill))
      return static_cast<int>(i);
    own_up = true;
  }
  return own_up ? -1 : none_up;
}

/// A connection for the next batch of lifecycle and routing writes
/// (`ready` of them wait in lanes with no batch in flight): one of the
/// lanes' connections, or any idle one while all of those are down. -1:
/// wait.
int lane_connection(writer_ptr self, size_t ready) {
  auto i = spill_connection(self, 0, self->state.lanes.size(), ready);
  return i == none_up ? idle_connection(self) : i;
}

/// The connections after the lanes' carry appends alone (with a single
/// connection there are none, and lane 0 takes appends along).
bool has_append_connections(writer_ptr self) {
  auto& st = self->state;
  return st.connections.size() > st.lanes.size();
}

/// The connection for the next batch of appends alone, or -1 to wait: the
/// append connections have them to themselves, so group commit of new
/// requests never queues behind routing writes; while all of those are
/// down, an idle lane connection.
int append_connection(writer_ptr self) {
  auto& st = self->state;
  auto i = spill_connection(self, st.lanes.size(), st.connections.size(),
                            st.pending.appends.size());
  if (i != none_up)
    return i;
  for (size_t j = 0; j < st.lanes.size(); ++j)
    if (usable(self, j))
      return static_cast<int>(j);
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

/// A butler storing a new work item (its route.execute accept) is an
/// independent insert, like a new request: it rides an append connection
/// (when there is one), and waits for one flush, not for the routing
/// writes ahead of it as well. Its butler's accepts then all take the
/// append connections, so they commit in arrival order.
bool is_work_append(const work_op& op) {
  return op.kind == work_op_kind::append;
}

/// The lane of a write with ordering key `key`.
size_t lane_of(writer_ptr self, std::string_view key) {
  auto n = self->state.lanes.size();
  return n == 1 ? 0 : std::hash<std::string_view>{}(key) % n;
}

/// What orders each kind of write: its request, its work item (recovery
/// leases: their butler), or a named statement's key.
std::string_view key_of(const inbox_ref& x) {
  return x.request_id;
}
std::string_view key_of(const completion& x) {
  return x.ref.request_id;
}
std::string_view key_of(const work_op& x) {
  return x.kind == work_op_kind::lease ? x.item.butler : x.item.work_id;
}
std::string_view key_of(const named_statement& x) {
  if (!x.key.empty() || x.params.empty())
    return x.key;
  return x.params.front();
}

/// Whether a batch may take `n` more writes.
size_t room_in(const write_batch& b, size_t max_batch) {
  return b.size() >= max_batch ? 0 : max_batch - b.size();
}

void send_batch(writer_ptr self, int idx, write_batch batch,
                batch_waiters waiters, std::vector<size_t> lanes);

/// Moves everything of `from` (and its waiters) to the end of `to`.
void append_to(write_batch& to, batch_waiters& to_waiting, write_batch& from,
               batch_waiters& from_waiting) {
  take(from.appends, to.appends, from.appends.size());
  take(from.claims, to.claims, from.claims.size());
  take(from.completions, to.completions, from.completions.size());
  take(from.work, to.work, from.work.size());
  take(from.named, to.named, from.named.size());
  take(from_waiting.appends, to_waiting.appends, from_waiting.appends.size());
  take(from_waiting.claims, to_waiting.claims, from_waiting.claims.size());
  take(from_waiting.completions, to_waiting.completions,
       from_waiting.completions.size());
  take(from_waiting.work, to_waiting.work, from_waiting.work.size());
  take(from_waiting.named, to_waiting.named, from_waiting.named.size());
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

/// Moves up to `room` waiting appends (new requests first, then new work
/// items) into `batch`.
void take_appends(writer_ptr self, write_batch& batch, batch_waiters& waiters,
                  size_t room) {
  auto& st = self->state;
  auto n = std::min(room, st.pending.appends.size());
  take(st.pending.appends, batch.appends, n);
  take(st.pending_waiters.appends, waiters.appends, n);
  n = std::min(room - n, st.pending.work.size());
  take(st.pending.work, batch.work, n);
  take(st.pending_waiters.work, waiters.work, n);
}

/// Hands waiting work to free connections: each lane's next batch to its
/// connection, appends to theirs.
void dispatch(writer_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  for (bool sent = true; sent;) {
    sent = false;
    // A free connection takes every lane that has writes waiting and no
    // batch in flight, as one batch: at low load a write goes out at once
    // beside another lane's commit; under load the batches grow instead of
    // multiplying (each commit costs both sides CPU of its own).
    int idx = -1;
    std::vector<size_t> ready;
    size_t waiting = 0;
    for (size_t i = 0; i < st.lanes.size(); ++i)
      if (!st.lanes[i].pending.empty() && !st.lanes[i].in_flight) {
        ready.push_back(i);
        waiting += st.lanes[i].size();
      }
    if (!ready.empty() && (idx = lane_connection(self, waiting)) >= 0) {
      write_batch batch;
      batch_waiters waiters;
      std::vector<size_t> taken;
      for (auto i : ready) {
        auto& lane = st.lanes[i];
        if (batch.size() > 0
            && batch.size() + lane.pending.front().size() > st.cfg.max_batch)
          continue;
        append_to(batch, waiters, lane.pending.front(), lane.waiters.front());
        lane.pending.pop_front();
        lane.waiters.pop_front();
        taken.push_back(i);
      }
      // Without append connections, appends ride along.
      if (!has_append_connections(self))
        take_appends(self, batch, waiters, room_in(batch, st.cfg.max_batch));
      send_batch(self, idx, std::move(batch), std::move(waiters),
                 std::move(taken));
      sent = true;
    }
    if (st.pending.size() == 0)
      continue;
    // Appends: on their own connections; without any, on a lane's
    // connection as lane 0's turn (the one connection carries everything).
    std::vector<size_t> turn;
    if (has_append_connections(self)) {
      idx = append_connection(self);
    } else if (!st.lanes[0].in_flight) {
      idx = lane_connection(self, st.pending.size());
      turn.push_back(0);
    } else {
      idx = -1;
    }
    if (idx < 0 || hold_appends(self))
      continue;
    write_batch batch;
    batch_waiters waiters;
    take_appends(self, batch, waiters, st.cfg.max_batch);
    st.last_append_batch = self->clock().now();
    send_batch(self, idx, std::move(batch), std::move(waiters),
               std::move(turn));
    sent = true;
  }
}

void send_batch(writer_ptr self, int idx, write_batch batch,
                batch_waiters waiters, std::vector<size_t> lanes) {
  auto& st = self->state;
  st.busy[idx] = true;
  for (auto i : lanes)
    st.lanes[i].in_flight = true;
  auto size = batch.size();
  auto appends = batch.appends.size();
  auto claims = batch.claims.size();
  auto completions = batch.completions.size();
  auto work = batch.work.size();
  auto named = batch.named.size();
  auto started = std::chrono::steady_clock::now();
  auto release = [self, idx, lanes] {
    auto& st = self->state;
    st.busy[idx] = false;
    for (auto i : lanes)
      st.lanes[i].in_flight = false;
  };
  self
    ->request(st.connections[idx], caf::infinite, write_atom_v,
              std::move(batch))
    .then(
      [self, release, waiters, size, appends, claims, completions, work, named,
       started](write_result& r) mutable {
        auto& st = self->state;
        release();
        st.commits->inc();
        st.status.commits += 1;
        st.status.rows += size;
        st.appended->inc(appends);
        st.claimed->inc(claims);
        st.completed->inc(completions);
        st.worked->inc(work);
        st.named_rows->inc(named);
        st.batch_sizes->observe(static_cast<double>(size));
        using ms = std::chrono::duration<double, std::milli>;
        st.flush_ms->observe(
          ms{std::chrono::steady_clock::now() - started}.count());
        deliver(waiters, r);
        dispatch(self);
      },
      [self, release, waiters, size](caf::error& err) mutable {
        auto& st = self->state;
        release();
        st.unavailable->inc(size);
        if (code_of(err) == butlers_errc::timeout) {
          // A session deadline, not an outage: the connection is up and
          // the next batch may pass. To its writers it is the same
          // transient refusal (retry; an ingest client gets 503).
          st.timeouts->inc();
          err = caf::error{butlers_errc::database_unavailable,
                           "database busy: " + message_of(err)};
        }
        deliver(waiters, err);
        dispatch(self);
      });
}

/// Flushes now when a batch is full, else once the mailbox has run empty
/// (a flush message queued behind the requests already there).
void schedule_flush(writer_ptr self, const write_batch& grown) {
  auto& st = self->state;
  if (grown.size() >= st.cfg.max_batch) {
    dispatch(self);
  } else if (!st.flush_scheduled && idle_connection(self) >= 0) {
    st.flush_scheduled = true;
    self->send(self, flush_atom_v);
  }
}

caf::error unavailable(writer_ptr self, size_t n) {
  auto& st = self->state;
  st.unavailable->inc(n);
  return caf::error{butlers_errc::database_unavailable,
                    "database unavailable: " + st.last_error};
}

/// The batch (and its waiters) that a write with ordering key `key` joins:
/// the last of its lane, or a new one when that is full.
std::pair<write_batch*, batch_waiters*> lane_tail(writer_ptr self,
                                                  std::string_view key) {
  auto& st = self->state;
  auto& lane = st.lanes[lane_of(self, key)];
  if (lane.pending.empty() || lane.pending.back().size() >= st.cfg.max_batch) {
    lane.pending.emplace_back();
    lane.waiters.emplace_back();
  }
  return {&lane.pending.back(), &lane.waiters.back()};
}

/// Queues `item` where it goes (a work-item append with the appends, every
/// other write at the tail of its key's lane) with `waiter` to answer.
template<class Item, class Waiter>
void place(writer_ptr self, std::vector<Item> write_batch::*items,
           std::vector<Waiter> batch_waiters::*waiters, Item item,
           Waiter waiter) {
  auto& st = self->state;
  write_batch* batch;
  batch_waiters* waiting;
  if constexpr (std::is_same_v<Item, work_op>) {
    if (is_work_append(item)) {
      batch = &st.pending;
      waiting = &st.pending_waiters;
    } else {
      std::tie(batch, waiting) = lane_tail(self, key_of(item));
    }
  } else {
    std::tie(batch, waiting) = lane_tail(self, key_of(item));
  }
  (batch->*items).push_back(std::move(item));
  (waiting->*waiters).push_back(std::move(waiter));
  schedule_flush(self, *batch);
}

template<class Reply, class Item, class Waiter>
caf::result<Reply> submit(writer_ptr self,
                          std::vector<Item> write_batch::*items,
                          std::vector<Waiter> batch_waiters::*waiters,
                          Item item) {
  if (!any_up(self))
    return unavailable(self, 1);
  auto rp = self->make_response_promise<Reply>();
  place(self, items, waiters, std::move(item), Waiter{rp});
  return rp;
}

/// Every write of `req` placed as it would be alone; one reply for all.
caf::result<write_reply> submit_request(writer_ptr self, write_request& req) {
  auto total = req.named.size() + req.work.size() + req.completions.size();
  if (!any_up(self))
    return unavailable(self, total);
  auto many = std::make_shared<write_request_reply>();
  many->rp = self->make_response_promise<write_reply>();
  auto& r = many->reply;
  r.named.resize(req.named.size());
  r.work.resize(req.work.size());
  r.completions.resize(req.completions.size());
  r.errors.assign(total, 0);
  r.error_messages.resize(total);
  many->left = total;
  if (total == 0) {
    many->rp.deliver(std::move(r));
    return many->rp;
  }
  auto rp = many->rp;
  size_t e = 0;
  for (size_t i = 0; i < req.named.size(); ++i)
    place(self, &write_batch::named, &batch_waiters::named,
          std::move(req.named[i]), write_waiter<named_result>{many, i, e++});
  for (size_t i = 0; i < req.work.size(); ++i)
    place(self, &write_batch::work, &batch_waiters::work,
          std::move(req.work[i]), write_waiter<work_result>{many, i, e++});
  for (size_t i = 0; i < req.completions.size(); ++i)
    place(self, &write_batch::completions, &batch_waiters::completions,
          std::move(req.completions[i]), write_waiter<bool>{many, i, e++});
  return rp;
}

caf::result<append_result> submit_append(writer_ptr self, inbox_record rec) {
  auto& st = self->state;
  if (!any_up(self))
    return unavailable(self, 1);
  auto rp = self->make_response_promise<append_result>();
  st.pending.appends.push_back(std::move(rec));
  st.pending_waiters.appends.emplace_back(rp);
  schedule_flush(self, st.pending);
  return rp;
}

caf::result<std::vector<append_result>> submit_appends(
  writer_ptr self, std::vector<inbox_record>& recs) {
  auto& st = self->state;
  if (!any_up(self))
    return unavailable(self, recs.size());
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
  schedule_flush(self, st.pending);
  return reply->rp;
}

/// The writer's metrics, registered once.
void register_metrics(inbox_writer_state& st) {
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
  st.named_rows = &m.get_counter("butlers_inbox_writer_rows_total",
                                 "Batched writes by kind", "op=\"named\"");
  st.unavailable = &m.get_counter("butlers_inbox_writer_unavailable_total",
                                  "Writes answered database_unavailable");
  st.timeouts = &m.get_counter("butlers_db_deadline_exceeded_total",
                               "Statements cancelled by a session deadline "
                               "(statement_timeout or lock_timeout)",
                               "session=\"writer\"");
  st.batch_sizes = &m.get_histogram("butlers_inbox_writer_batch_size",
                                    "Writes per group commit",
                                    {1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                     1024, 4096});
  st.flush_ms = &m.get_histogram("butlers_inbox_writer_flush_latency_ms",
                                 "Duration of one group commit");
  st.connections_up = &m.get_gauge("butlers_inbox_writer_connections_up",
                                   "Writer connections that are up");
}

/// Fails every write that waits: with no connection up, nothing can write
/// it, and a caller must never hang.
void fail_waiting(inbox_writer_state& st, const caf::error& err) {
  deliver(st.pending_waiters, err);
  st.pending = write_batch{};
  st.pending_waiters = batch_waiters{};
  for (auto& lane : st.lanes) {
    for (auto& w : lane.waiters)
      deliver(w, err);
    lane.pending.clear();
    lane.waiters.clear();
  }
}

/// Connection `index` went up or down (`why`): updates the status the node
/// reports, and fails the waiting writes when none is left or dispatches
/// them when one came up.
void connection_changed(writer_ptr self, uint32_t index, bool is_up,
                        const std::string& why) {
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
    fail_waiting(st, caf::error{butlers_errc::database_unavailable,
                                "database unavailable: " + st.last_error});
  } else if (is_up) {
    if (!was_ready)
      spdlog::info("database ready");
    dispatch(self);
  }
}

} // namespace

inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, std::string owner, uint32_t lease_s,
  node_context_ptr ctx) {
  auto db = cfg;
  auto make = [db, owner, lease_s](writer_ptr writer, uint32_t index) {
    return writer->spawn<caf::detached + caf::linked>(inbox_connection, index,
                                                      db, owner, lease_s,
                                                      inbox_writer_actor{
                                                        writer});
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
  register_metrics(st);
  auto n = std::max<uint32_t>(1, st.cfg.writer_connections);
  // With two or more connections, at least one carries appends alone.
  auto lanes = n == 1 ? 1 : std::clamp<uint32_t>(st.cfg.lanes, 1, n - 1);
  st.lanes.resize(lanes);
  for (uint32_t i = 0; i < n; ++i)
    st.connections.push_back(make(self, i));
  st.up.assign(n, false);
  st.busy.assign(n, false);
  return {
    [self](status_atom) {
      return self->state.status;
    },
    [self](append_atom, inbox_record& rec) -> caf::result<append_result> {
      return submit_append(self, std::move(rec));
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
    [self](exec_atom, write_request& req) -> caf::result<write_reply> {
      return submit_request(self, req);
    },
    [self](flush_atom) {
      dispatch(self);
    },
    [self](link_atom, uint32_t index, bool is_up, const std::string& why) {
      connection_changed(self, index, is_up, why);
    },
  };
}

} // namespace butlers
