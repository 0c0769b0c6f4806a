// Clean shutdown of a butler: hands its work back so that another holder
// (the restarted node or a peer) takes it over at once instead of waiting
// for the leases to expire.

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/butler.hpp"

namespace butlers {

namespace {

void answer(butler_ptr self, uint32_t released) {
  auto& st = self->state;
  if (st.drained) {
    st.drained->deliver(released);
    st.drained.reset();
  }
}

/// Releases every lease the pool still holds (waiting, running and
/// finishing items) in one fenced statement; a finishing item's result is
/// written first (writes leave in order), so its row is terminal by then.
void release(butler_ptr self) {
  auto& st = self->state;
  if (st.released)
    return;
  st.released = true;
  auto items = st.pool->leases();
  if (items.empty()) {
    answer(self, 0);
    return;
  }
  std::string ids = "{";
  std::string tokens = "{";
  for (auto& item : items) {
    if (ids.size() > 1) {
      ids += ',';
      tokens += ',';
    }
    ids += item.work_id;
    tokens += std::to_string(item.lease_token);
  }
  ids += '}';
  tokens += '}';
  named_statement stmt{"work_release",
                       {std::move(ids), std::move(tokens)},
                       "release:" + st.owner};
  st.writes.exec(
    self, std::move(stmt),
    [self, held = items.size()](named_result& r) {
      auto n = static_cast<uint32_t>(r.rows.size());
      spdlog::info("butler {}: released {} of {} work item(s) held",
                   self->state.params.cfg.name, n, held);
      answer(self, n);
    },
    [self](const caf::error& err) {
      spdlog::warn("butler {}: work leases not released ({}): they expire "
                   "after lease_s",
                   self->state.params.cfg.name, self->system().render(err));
      answer(self, 0);
    });
}

} // namespace

caf::result<uint32_t> drain(butler_ptr self, caf::timespan wait) {
  auto& st = self->state;
  if (st.draining)
    return uint32_t{0};
  st.draining = true;
  st.drained = self->make_response_promise<uint32_t>();
  auto rp = *st.drained;
  spdlog::info("butler {}: draining, {} session(s) running, {} waiting",
               st.params.cfg.name, st.pool->active(), st.pool->queued());
  if (st.pool->active() == 0)
    release(self);
  else
    self->delayed_send(self, wait, drain_atom_v);
  return rp;
}

void drain_progress(butler_ptr self, bool deadline) {
  auto& st = self->state;
  if (!st.draining || st.released)
    return;
  if (deadline || st.pool->active() == 0)
    release(self);
}

} // namespace butlers
