#include "actors/supervisor.hpp"

#include "actors/inbox_writer.hpp"

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/spawn_options.hpp>
#include <caf/system_messages.hpp>
#include <random>
#include <spdlog/spdlog.h>

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

} // namespace

supervisor_actor::behavior_type supervisor(
  supervisor_actor::stateful_pointer<supervisor_state> self,
  node_settings settings, node_context_ptr ctx) {
  self->state.settings = std::move(settings);
  self->state.ctx = std::move(ctx);
  auto& restarts = self->state.ctx->metrics
                     .get_counter("butlers_supervisor_restarts_total",
                                  "Children restarted after an abnormal exit",
                                  "child=\"inbox_writer\"");
  auto start_writer = [self] {
    auto& st = self->state;
    if (!st.ctx->status.database_configured)
      return;
    st.writer = self->spawn<caf::detached + caf::linked>(inbox_writer,
                                                         st.settings.database,
                                                         st.ctx);
  };
  start_writer();
  self->set_exit_handler([self, &restarts](const caf::exit_msg& msg) {
    auto& st = self->state;
    if (st.writer && msg.source == st.writer.address()) {
      st.writer = nullptr;
      if (!msg.reason || msg.reason == caf::exit_reason::user_shutdown)
        return;
      restarts.inc();
      auto delay = restart_delay(st.writer_restarts++);
      spdlog::error("inbox_writer died ({}), restarting in {} ms",
                    self->system().render(msg.reason),
                    std::chrono::duration_cast<std::chrono::milliseconds>(delay)
                      .count());
      self->delayed_send(self, delay, restart_atom_v,
                         std::string{"inbox_writer"});
      return;
    }
    // Not a child: our own shutdown (anon_send_exit from the node).
    self->quit(msg.reason);
  });
  return {
    [self](status_atom) {
      return self->state.writer;
    },
    [self, start_writer](restart_atom, const std::string& child) {
      if (child == "inbox_writer" && !self->state.writer)
        start_writer();
    },
  };
}

} // namespace butlers
