#include "actors/inbox_writer.hpp"

#include "runtime/migrations.hpp"

#include <caf/event_based_actor.hpp>
#include <pqxx/pqxx>
#include <random>
#include <spdlog/spdlog.h>

namespace butlers {

namespace {

using namespace std::chrono_literals;

/// How often a connected writer probes the database and maintains
/// partitions.
constexpr auto probe_interval = 2s;

/// Longest delay between connection attempts.
constexpr caf::timespan max_backoff = 5s;

caf::timespan jittered(caf::timespan x) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist{0.5, 1.0};
  return std::chrono::duration_cast<caf::timespan>(x * dist(rng));
}

} // namespace

inbox_writer_state::~inbox_writer_state() = default;

inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, node_context_ptr ctx) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.ctx = std::move(ctx);
  auto disconnect = [self](const std::string& why) {
    auto& st = self->state;
    st.conn.reset();
    st.status.connected = false;
    st.status.last_error = why;
    st.ctx->status.database_ready = false;
    st.ctx->status.set_database_error(why);
    if (!st.connect_scheduled) {
      st.connect_scheduled = true;
      self->delayed_send(self, jittered(st.backoff), connect_atom_v);
      st.backoff = std::min(st.backoff * 2, max_backoff);
    }
  };
  self->send(self, connect_atom_v);
  st.connect_scheduled = true;
  return {
    [self](status_atom) {
      return self->state.status;
    },
    [self, disconnect](connect_atom) {
      auto& st = self->state;
      st.connect_scheduled = false;
      try {
        st.conn = std::make_unique<pqxx::connection>(st.cfg.url);
        auto applied = apply_migrations(*st.conn);
        for (auto& name : applied)
          spdlog::info("applied migration {}", name);
        auto created = pqxx::nontransaction{*st.conn}
                         .exec_params1("SELECT butlers_ensure_inbox_partitions"
                                       "($1)",
                                       static_cast<int>(
                                         st.cfg.partitions_ahead))[0]
                         .as<int>();
        if (created > 0)
          spdlog::info("created {} message_inbox partition(s)", created);
        st.status.connected = true;
        st.status.migrated = true;
        st.status.last_error.clear();
        st.backoff = 100ms;
        st.ctx->status.set_database_error({});
        st.ctx->status.database_ready = true;
        spdlog::info("database ready");
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database unavailable: {}", e.what());
        disconnect(e.what());
      }
    },
    [self, disconnect](caf::tick_atom) {
      auto& st = self->state;
      if (!st.conn)
        return;
      try {
        pqxx::nontransaction{*st.conn}.exec("SELECT 1");
        self->delayed_send(self, probe_interval, caf::tick_atom_v);
      } catch (const std::exception& e) {
        spdlog::warn("database probe failed: {}", e.what());
        disconnect(e.what());
      }
    },
  };
}

} // namespace butlers
