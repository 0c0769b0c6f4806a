// Clean shutdown of the switchboard: hands the requests it holds back, so
// that the cold path of a restarted node or a peer claims them at once
// instead of after `lease_s`.

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/switchboard.hpp"

namespace butlers {

caf::result<uint32_t> release_inbox_leases(switchboard_ptr self) {
  auto& st = self->state;
  if (st.released)
    return uint32_t{0};
  st.released = true;
  auto held = st.tracker->leases();
  if (held.empty())
    return uint32_t{0};
  std::string ids = "{";
  std::string times = "{";
  std::string tokens = "{";
  for (auto& [ref, token] : held) {
    if (ids.size() > 1) {
      ids += ',';
      times += ',';
      tokens += ',';
    }
    ids += ref.request_id;
    times += std::to_string(ref.received_at_us);
    tokens += std::to_string(token);
  }
  ids += '}';
  times += '}';
  tokens += '}';
  named_statement stmt{"inbox_release",
                       {std::move(ids), std::move(times), std::move(tokens)},
                       "release:switchboard"};
  auto rp = self->make_response_promise<uint32_t>();
  self->request(st.writer, local_call, exec_atom_v, std::move(stmt))
    .then(
      [rp, n = held.size()](const named_result& r) mutable {
        auto released = static_cast<uint32_t>(r.rows.size());
        spdlog::info("switchboard: released {} of {} request(s) held", released,
                     n);
        rp.deliver(released);
      },
      [self, rp](const caf::error& err) mutable {
        spdlog::warn("switchboard: inbox leases not released ({}): they "
                     "expire after lease_s",
                     self->system().render(err));
        rp.deliver(uint32_t{0});
      });
  return rp;
}

} // namespace butlers
