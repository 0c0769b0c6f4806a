#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/http_render.hpp"

namespace butlers {

/// Carries the ingest batches of one HTTP thread to the switchboard and the
/// answers back: one long-lived actor per thread instead of one per
/// request. No request to the switchboard carries a CAF timeout (each would
/// wake CAF's clock thread twice); the HTTP thread keeps the deadlines, and
/// this actor's periodic tick has them swept.
using http_ingest_bridge_actor = caf::typed_actor<
  /// A batch of validated records and the tokens of their requests, in the
  /// same order: one request to the switchboard for all.
  caf::reacts_to<ingest_atom, std::vector<inbox_record>, std::vector<uint64_t>>,
  /// INTERNAL: time to sweep the deadlines.
  caf::reacts_to<caf::tick_atom>>;

/// What the bridge calls, on its CAF thread.
struct http_ingest_hooks {
  /// The switchboard now; null while it restarts.
  std::function<switchboard_actor()> switchboard;
  /// The switchboard's results of a batch, in the order of its tokens.
  std::function<void(std::vector<uint64_t>, std::vector<append_result>)> done;
  /// Every request of a batch fails with the same answer.
  std::function<void(const std::vector<uint64_t>&, http_reply)> failed;
  /// Answers the requests past their deadline.
  std::function<void()> sweep;
  /// How often `sweep` runs.
  std::chrono::milliseconds sweep_interval{100};
};

http_ingest_bridge_actor::behavior_type http_ingest_bridge(
  http_ingest_bridge_actor::pointer self, http_ingest_hooks hooks);

} // namespace butlers
