#include "actors/lifecycle.hpp"

#include <memory>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "runtime/uuid.hpp"

namespace butlers {

// -- the switchboard ----------------------------------------------------------

void hand_to_messenger(switchboard_ptr self, std::string notify,
                       std::function<void(route_response)> done) {
  auto& st = self->state;
  std::string envelope;
  auto parsed = std::make_shared<route_envelope>();
  auto fresh = make_uuid_v7().to_string();
  if (auto bad = make_delivery_route(notify, fresh, unix_now_us(), envelope,
                                     parsed.get())) {
    st.metrics.notify_rejected->inc();
    done(make_error_response({}, bad->error_class, bad->message, false));
    return;
  }
  auto messenger = st.ctx->messenger();
  if (!messenger) {
    st.metrics.notify_rejected->inc();
    done(make_error_response({}, "target_unavailable",
                             "no messenger on this node", true));
    return;
  }
  route_request req{std::move(envelope),
                    "switchboard",
                    {},
                    {},
                    std::move(parsed)};
  self->request(messenger, local_call, route_atom_v, std::move(req))
    .then(
      [self, done](route_response& r) {
        if (r.status == "error")
          self->state.metrics.notify_rejected->inc();
        else
          self->state.metrics.notify_handed->inc();
        done(std::move(r));
      },
      [self, done](const caf::error& err) {
        self->state.metrics.notify_rejected->inc();
        done(make_error_response({}, "target_unavailable",
                                 "messenger unreachable: "
                                   + self->system().render(err),
                                 true));
      });
}

void show_lifecycle(switchboard_ptr self, const request_context& ctx,
                    lifecycle_state x) {
  if (!self->state.ctx->lifecycle.reacts(ctx.source_channel))
    return;
  auto notify = make_react_notify(envelope_for(ctx), x, unix_now_us());
  hand_to_messenger(self, std::move(notify),
                    [id = ctx.request_id, x](const route_response& r) {
                      if (r.status == "error")
                        spdlog::warn("request {}: {} reaction not handed to "
                                     "the messenger: {}: {}",
                                     id, to_string(x), r.error_class,
                                     r.error_message);
                    });
}

void hand_over_owed(switchboard_ptr self, finished_request f,
                    std::function<void(completion, bool)> then) {
  std::vector<std::string> owed;
  auto& ctx = f.context;
  if (self->state.ctx->lifecycle.reacts(ctx.source_channel)) {
    auto x = f.done.state == "parsed" ? lifecycle_state::parsed
                                      : lifecycle_state::errored;
    owed.push_back(make_react_notify(envelope_for(ctx), x, unix_now_us()));
  }
  if (!f.notify.empty())
    owed.push_back(std::move(f.notify));
  if (owed.empty()) {
    then(std::move(f.done), true);
    return;
  }
  struct pending {
    size_t left = 0;
    bool ok = true;
    completion done;
    std::function<void(completion, bool)> then;
  };
  auto p = std::make_shared<pending>();
  p->left = owed.size();
  p->done = std::move(f.done);
  p->then = std::move(then);
  for (auto& notify : owed)
    hand_to_messenger(self, std::move(notify),
                      [p, id = ctx.request_id](const route_response& r) {
                        if (r.status == "error") {
                          spdlog::warn("request {}: what it owes its sender "
                                       "was not handed "
                                       "to the messenger: {}: {}",
                                       id, r.error_class, r.error_message);
                          // A notify the messenger refuses for good would be
                          // refused again: only a hand-over that may work later
                          // holds the transition back.
                          if (r.retryable)
                            p->ok = false;
                        }
                        if (--p->left == 0)
                          p->then(std::move(p->done), p->ok);
                      });
}

// -- butlers ------------------------------------------------------------------

namespace {

/// Hands `x` for the request of `env` to this node's switchboard.
void signal(butler_ptr self, const route_envelope& env, lifecycle_state x) {
  auto sb = self->state.ctx->switchboard();
  if (!sb)
    return;
  auto notify = make_react_notify(env, x, unix_now_us());
  self->request(sb, local_call, deliver_atom_v, std::move(notify))
    .then(
      [id = env.request_id, x](const route_response& r) {
        if (r.status == "error")
          spdlog::warn("request {}: {} reaction not handed over: {}: {}", id,
                       to_string(x), r.error_class, r.error_message);
      },
      [](const caf::error&) {
        // The switchboard is restarting: a reaction that is not terminal
        // is not owed.
      });
}

/// Whether items like `held` show lifecycle reactions.
bool shows(butler_ptr self, const held_item& held) {
  return self->state.ctx->lifecycle.reacts(held.env.source_channel)
         && held.env.notify_request.empty()
         && held.item.trigger_source != "thread";
}

} // namespace

void show_waiting(butler_ptr self, const std::string& work_id) {
  auto* held = self->state.pool->waiting(work_id);
  if (held == nullptr || held->queued_shown || !shows(self, *held))
    return;
  held->queued_shown = true;
  signal(self, held->env, lifecycle_state::queued);
}

void show_started(butler_ptr self, const held_item& held) {
  if (held.queued_shown)
    signal(self, held.env, lifecycle_state::progress);
}

} // namespace butlers
