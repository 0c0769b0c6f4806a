#include "actors/supervisor.hpp"

#include <random>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/spawn_options.hpp>
#include <caf/system_messages.hpp>
#include <spdlog/spdlog.h>

#include "actors/inbox_scanner.hpp"
#include "actors/inbox_writer.hpp"
#include "actors/switchboard.hpp"

namespace butlers {

namespace {

caf::timespan restart_delay(uint32_t attempt) {
  using namespace std::chrono;
  auto base = milliseconds{100} * (1u << std::min<uint32_t>(attempt, 7));
  auto capped = std::min<milliseconds>(base, seconds{10});
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist{0.5, 1.5};
  return duration_cast<caf::timespan>(capped * dist(rng));
}

using supervisor_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

void start_group(supervisor_ptr self) {
  auto& st = self->state;
  st.restarting = false;
  if (!st.ctx->status.database_configured)
    return;
  auto& s = st.settings;
  st.writer = self->spawn<caf::linked>(inbox_writer, s.database, s.node.name,
                                       s.switchboard.lease_s, st.ctx);
  st.switchboard = self->spawn<caf::linked>(switchboard, s.switchboard,
                                            st.writer, st.ctx);
  st.scanner = self->spawn<caf::detached + caf::linked>(inbox_scanner,
                                                        s.database.url,
                                                        s.switchboard,
                                                        st.switchboard, st.ctx);
  st.ctx->set_switchboard(caf::actor_cast<caf::actor>(st.switchboard));
}

bool is_child(supervisor_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  return (st.writer && addr == st.writer.address())
         || (st.switchboard && addr == st.switchboard.address())
         || (st.scanner && addr == st.scanner.address());
}

} // namespace

supervisor_actor::behavior_type supervisor(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  node_settings settings, node_context_ptr ctx) {
  self->state.settings = std::move(settings);
  self->state.ctx = std::move(ctx);
  auto& restarts = self->state.ctx->metrics.get_counter(
    "butlers_supervisor_restarts_total",
    "Actor groups restarted after an abnormal exit");
  start_group(self);
  self->set_exit_handler([self, &restarts](const caf::exit_msg& msg) {
    auto& st = self->state;
    if (!is_child(self, msg.source)) {
      // Not a current child: our own shutdown (anon_send_exit from the
      // node), or a late exit of a group already being restarted.
      if (!st.restarting)
        self->quit(msg.reason);
      return;
    }
    if (!msg.reason || msg.reason == caf::exit_reason::user_shutdown)
      return;
    // One child failed: the others hold its handle, so the group restarts.
    restarts.inc();
    auto delay = restart_delay(st.restarts++);
    spdlog::error("a node actor died ({}), restarting its group in {} ms",
                  self->system().render(msg.reason),
                  std::chrono::duration_cast<std::chrono::milliseconds>(delay)
                    .count());
    st.ctx->set_switchboard(nullptr);
    self->send_exit(st.writer, caf::exit_reason::kill);
    self->send_exit(st.switchboard, caf::exit_reason::kill);
    self->send_exit(st.scanner, caf::exit_reason::kill);
    st.writer = nullptr;
    st.switchboard = nullptr;
    st.scanner = nullptr;
    st.restarting = true;
    self->delayed_send(self, delay, restart_atom_v);
  });
  return {
    [self](restart_atom) {
      if (self->state.restarting)
        start_group(self);
    },
  };
}

} // namespace butlers
