#include "actors/http_ingest_bridge.hpp"

#include <memory>

namespace butlers {

http_ingest_bridge_actor::behavior_type http_ingest_bridge(
  http_ingest_bridge_actor::pointer self, http_ingest_hooks hooks) {
  auto h = std::make_shared<http_ingest_hooks>(std::move(hooks));
  self->delayed_send(self, h->sweep_interval, caf::tick_atom_v);
  return {
    [self, h](ingest_atom, std::vector<inbox_record>& batch,
              std::vector<uint64_t>& tokens) {
      auto sb = h->switchboard();
      if (!sb) {
        h->failed(tokens, no_switchboard_reply());
        return;
      }
      self->request(sb, caf::infinite, ingest_atom_v, std::move(batch))
        .then(
          [h, tokens](std::vector<append_result>& res) mutable {
            h->done(std::move(tokens), std::move(res));
          },
          [h, tokens](const caf::error& err) {
            h->failed(tokens, failure_reply(err));
          });
    },
    [self, h](caf::tick_atom) {
      h->sweep();
      self->delayed_send(self, h->sweep_interval, caf::tick_atom_v);
    },
  };
}

} // namespace butlers
