#include "actors/messenger.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/spawn_options.hpp>

#include "actors/delivery_services.hpp"
#include "actors/session.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/delivery.hpp"
#include "runtime/reaction_gate.hpp"

namespace butlers {

namespace {

/// Runs deliveries: without a session where nothing blocks, else as a
/// delivery session.
class delivery_runner final : public work_runner {
 public:
  explicit delivery_runner(const butler_params& bp) {
    auto& cfg = bp.cfg;
    params_.butler = cfg.name;
    params_.runtime = cfg.runtime;
    params_.kind = session_runtime::delivery;
    params_.timeout = std::chrono::seconds{cfg.session_timeout_s};
    params_.adapters = make_delivery_adapters(bp.adapters, bp.connectors);
    // A job per running session, plus room for those of cancelled
    // sessions still finishing.
    params_.pool = std::make_shared<
      blocking_pool>(std::min<uint32_t>(cfg.max_concurrent_sessions, 8),
                     2 * size_t{cfg.max_concurrent_sessions});
  }

  std::optional<route_rejection> admit(
    const route_request& req, const route_envelope& env) const override {
    // spec 001 §10.1, §10.10: only the switchboard, a butler of this node
    // (its session's reply) and the notify tool (which checked the
    // session's token) hand deliveries over; never a route.execute from
    // outside.
    if (req.trigger_source != "switchboard" && req.trigger_source != "tool"
        && req.trigger_source != "butler")
      return route_rejection{"validation_error",
                             "direct delivery rejected: notify.v1 goes "
                             "through the switchboard or the notify tool "
                             "(trigger_source '"
                               + req.trigger_source + "')"};
    if (env.notify_request.empty())
      return route_rejection{"validation_error",
                             "the messenger takes route.v1 with "
                             "input.context.notify_request only"};
    // Reactions take their place in their message's order here, in the
    // order they were handed over; one overtaken already is dropped when
    // its delivery runs (runtime/reaction_gate.hpp).
    if (auto x = reaction_of_segment(env.segment_id))
      gate_->announce(env.request_id, x->rank);
    return std::nullopt;
  }

  session_actor start(butler_ptr self, held_item& held) override {
    auto me = butler_actor{self};
    if (run_without_session(params_, held.item, held.env, me))
      return {};
    // Adapters that block may read the source message and write the
    // outbound ledger (from their delivery threads).
    if (!params_.services)
      params_.services = make_db_delivery_services(self->system(),
                                                   self->state.writer,
                                                   self->state.ctx, gate_);
    return self->spawn<caf::linked>(session, params_, held.item, held.env, me,
                                    std::move(held.steer));
  }

  /// A delivery's result is nobody's reply: a delivery recovered here
  /// ends without telling the switchboard.
  bool answers_switchboard() const override {
    return false;
  }

 private:
  session_params params_;
  std::shared_ptr<reaction_gate> gate_ = std::make_shared<reaction_gate>();
};

} // namespace

butler_actor::behavior_type messenger(butler_ptr self, butler_params params,
                                      inbox_writer_actor writer,
                                      node_context_ptr ctx) {
  auto runner = std::make_unique<delivery_runner>(params);
  return butler_with(self, std::move(params), std::move(writer), std::move(ctx),
                     std::move(runner));
}

butler_config messenger_butler(const messenger_config& m) {
  butler_config c;
  c.name = "messenger";
  c.description = "The only outbound delivery path (notify.v1)";
  c.capabilities = {"route.execute"};
  c.max_concurrent_sessions = m.max_concurrent_sessions;
  c.max_pending = m.max_pending;
  c.session_timeout_s = 300;
  c.runtime.kind = runtime_kind::delivery;
  return c;
}

} // namespace butlers
