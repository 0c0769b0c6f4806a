// The write of a work item's terminal result, and what a butler does when
// that write's outcome is in doubt: the connection broke or the server
// failed over while the commit was on its way, so the result may be
// durable although the writer reported an error. The butler reads the
// item back. Terminal under its own lease token: the result is durable,
// and whoever waits for it is told (else the request would wait for its
// route timeout). Still open under its token: not written, so it is
// written again (the session does not run twice, nor does its reply go
// out twice). Taken by another holder: void. While the database cannot be
// read, it reads again after 250 ms, doubling up to 5 s, up to
// `max_attempts`; then lease recovery runs the item again.

#include <algorithm>
#include <string>
#include <utility>

#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/butler.hpp"

namespace butlers {

namespace {

/// The result is durable: the listener, the waiters (or, for an item
/// recovered here, this node's switchboard) hear it.
void outcome_written(butler_ptr self, const session_outcome& out) {
  auto& st = self->state;
  remember_written(self, out.work_id, out.response);
  st.runner->written(self, out, outcome_write::written);
  if (out.response.status == "ok")
    ++st.status.succeeded;
  else
    ++st.status.failed;
  if (st.params.listener)
    caf::anon_send(st.params.listener, done_atom_v, out.response);
  auto w = st.waiters.find(out.work_id);
  if (w != st.waiters.end()) {
    for (auto& hdl : w->second)
      caf::anon_send(hdl, done_atom_v, out.response);
    st.waiters.erase(w);
  } else if (st.runner->answers_switchboard()) {
    // Recovered here after its holder died: whoever dispatched it is not
    // known, so tell this node's switchboard (it ignores requests it does
    // not track).
    if (auto sb = st.ctx->switchboard())
      caf::anon_send(sb, done_atom_v, out.response);
  }
}

/// Someone else holds the lease now: the result is void.
void outcome_fenced(butler_ptr self, const session_outcome& out) {
  auto& st = self->state;
  st.runner->written(self, out, outcome_write::fenced);
  st.waiters.erase(out.work_id);
  ++st.status.fenced;
  st.fenced->inc();
  spdlog::warn("butler {}: work {} result not written: lease lost",
               st.params.cfg.name, out.work_id);
}

/// Not written: the item is still open in the database, its lease expires
/// and recovery runs it again.
void outcome_failed(butler_ptr self, const session_outcome& out) {
  self->state.runner->written(self, out, outcome_write::failed);
}

/// Attempts at writing one result, or at reading it back, before the
/// butler gives up and leaves the item to lease recovery.
constexpr uint32_t max_attempts = 40;

/// The wait before reading back again: 250 ms doubling up to 5 s.
caf::timespan backoff(uint32_t attempt) {
  auto ms = std::min<int64_t>(5000, int64_t{250} << std::min(attempt, 5u));
  return std::chrono::milliseconds{ms};
}

void submit(butler_ptr self, session_outcome out, std::string sender,
            uint32_t attempt);

/// Gives up on knowing: lease recovery runs the item again if it is open.
void give_up(butler_ptr self, const std::string& work_id) {
  auto& st = self->state;
  auto i = st.in_doubt.find(work_id);
  if (i == st.in_doubt.end())
    return;
  spdlog::warn("butler {}: work {}: whether its result was written is "
               "still unknown after {} attempts; left to lease recovery",
               st.params.cfg.name, work_id, i->second.attempts);
  auto out = std::move(i->second.out);
  st.in_doubt.erase(i);
  outcome_failed(self, out);
}

/// The read-back of `work_id` answered `r`.
void read_back_answered(butler_ptr self, const std::string& work_id,
                        const named_result& r) {
  auto& st = self->state;
  auto i = st.in_doubt.find(work_id);
  if (i == st.in_doubt.end())
    return;
  auto d = std::move(i->second);
  st.in_doubt.erase(i);
  auto& out = d.out;
  bool found = !r.rows.empty() && r.rows[0].size() >= 2;
  bool mine = found && r.rows[0][1] == std::to_string(out.lease_token);
  bool open = found && (r.rows[0][0] == "queued" || r.rows[0][0] == "running");
  if (mine && open) {
    // Not written, and the lease is still ours: write it again (the write
    // is fenced by the token), rather than run the session twice.
    spdlog::info("butler {}: work {}: its result was not written; writing "
                 "it again",
                 st.params.cfg.name, work_id);
    submit(self, std::move(out), std::move(d.sender), d.attempts + 1);
  } else if (mine && r.rows[0][0] == out.state) {
    spdlog::info("butler {}: work {}: its result was written after all "
                 "(the commit was in doubt)",
                 st.params.cfg.name, work_id);
    st.confirmed->inc();
    outcome_written(self, out);
  } else {
    outcome_fenced(self, out);
  }
}

/// The write of `out` failed, perhaps after it committed: reads it back.
void doubt(butler_ptr self, session_outcome out, std::string sender,
           uint32_t attempt, const caf::error& err) {
  auto& st = self->state;
  spdlog::warn("butler {}: work {}: the write of its result failed ({}); "
               "reading it back",
               st.params.cfg.name, out.work_id, self->system().render(err));
  auto id = out.work_id;
  st.in_doubt[id] = in_doubt_result{std::move(out), std::move(sender), attempt,
                                    false};
  read_back_in_doubt(self, id);
}

void submit(butler_ptr self, session_outcome out, std::string sender,
            uint32_t attempt) {
  auto& st = self->state;
  work_op op;
  op.kind = work_op_kind::finish;
  op.item.work_id = out.work_id;
  op.item.butler = st.params.cfg.name;
  op.item.lease_token = out.lease_token;
  op.lease_s = st.params.cfg.lease_s;
  op.state = out.state;
  op.usage = out.usage;
  op.prompt_version = st.prompt_version;
  op.sender = sender;
  op.response = to_json(out.response);
  op.error_class = out.response.status == "error" ? out.response.error_class
                                                  : std::string{};
  st.writes.work(
    self, std::move(op),
    [self, out](const work_result& r) {
      self->state.pool->written(out.work_id);
      if (r.ok)
        outcome_written(self, out);
      else
        outcome_fenced(self, out);
    },
    [self, out, sender, attempt](const caf::error& err) {
      // The lease is no longer renewed: if the result stays unknown, the
      // lease expires and recovery runs the item again (at-least-once).
      self->state.pool->written(out.work_id);
      doubt(self, out, sender, attempt, err);
    });
}

} // namespace

void remember_written(butler_ptr self, const std::string& work_id,
                      const route_response& response) {
  auto& st = self->state;
  if (!st.recent.insert_or_assign(work_id, response).second)
    return;
  st.recent_order.emplace_back(work_id, st.ticks);
  while (st.recent_order.size() > butler_state::recent_capacity) {
    st.recent.erase(st.recent_order.front().first);
    st.recent_order.pop_front();
  }
}

void age_recent(butler_ptr self) {
  auto& st = self->state;
  while (!st.recent_order.empty()
         && st.ticks - st.recent_order.front().second
              > butler_state::recent_ticks) {
    st.recent.erase(st.recent_order.front().first);
    st.recent_order.pop_front();
  }
}

void write_outcome(butler_ptr self, session_outcome out,
                   const std::string& sender) {
  submit(self, std::move(out), sender, 0);
}

void read_back_in_doubt(butler_ptr self, const std::string& work_id) {
  auto& st = self->state;
  auto i = st.in_doubt.find(work_id);
  auto reader = st.ctx->reader();
  if (i == st.in_doubt.end() || i->second.reading)
    return;
  if (!reader || i->second.attempts >= max_attempts) {
    give_up(self, work_id);
    return;
  }
  i->second.reading = true;
  auto again = [self, work_id] {
    auto& st = self->state;
    auto j = st.in_doubt.find(work_id);
    if (j == st.in_doubt.end())
      return;
    j->second.reading = false;
    self->delayed_send(self, backoff(j->second.attempts++), caf::tick_atom_v,
                       work_id);
  };
  self
    ->request(reader, std::chrono::seconds{10}, read_atom_v,
              named_statement{"work_outcome", {work_id}})
    .then(
      [self, work_id, again](named_result& r) {
        if (r.ok)
          read_back_answered(self, work_id, r);
        else
          again();
      },
      [again](const caf::error&) {
        again();
      });
}

} // namespace butlers
