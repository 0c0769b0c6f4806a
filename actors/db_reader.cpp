#include "actors/db_reader.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/spawn_options.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace butlers {

db_reader_state::~db_reader_state() = default;

db_reader_actor::behavior_type db_reader(
  db_reader_actor::stateful_pointer<db_reader_state> self, std::string url,
  session_deadlines deadlines) {
  self->state.url = std::move(url);
  self->state.deadlines = deadlines;
  return {
    [self](read_atom, const named_statement& st) -> caf::result<named_result> {
      auto& s = self->state;
      // One reconnect per call at most: a dead connection is noticed on use.
      for (int attempt = 0; attempt < 2; ++attempt) {
        try {
          if (!s.conn) {
            auto conn = std::make_unique<pqxx::connection>(s.url);
            apply_deadlines(*conn, s.deadlines);
            s.conn = std::move(conn);
          }
          pqxx::read_transaction tx{*s.conn};
          return run_named(tx, st);
        } catch (const pqxx::broken_connection& e) {
          s.conn.reset();
          if (attempt == 1)
            return caf::error{butlers_errc::database_unavailable,
                              std::string{e.what()}};
        } catch (const std::exception& e) {
          if (auto kind = deadline_of(e); kind != deadline_kind::none) {
            auto ms = kind == deadline_kind::lock ? s.deadlines.lock_ms
                                                  : s.deadlines.statement_ms;
            spdlog::warn("reader: {} hit the {} ({} ms)", st.query,
                         to_string(kind), ms);
            return caf::error{butlers_errc::timeout,
                              "query " + st.query + " hit the database "
                                + to_string(kind) + " (" + std::to_string(ms)
                                + " ms)"};
          }
          spdlog::warn("reader: {}: {}", st.query, e.what());
          return caf::error{butlers_errc::internal_error,
                            "query " + st.query + " failed"};
        }
      }
      return caf::error{butlers_errc::database_unavailable,
                        std::string{"no connection"}};
    },
  };
}

namespace {

using pool_ptr = db_reader_actor::stateful_pointer<db_reader_pool_state>;

void run_on(pool_ptr self, db_reader_actor conn, named_statement statement,
            caf::typed_response_promise<named_result> promise);

/// `conn` finished a read: it takes the oldest waiting one, or goes idle.
void next_for(pool_ptr self, db_reader_actor conn) {
  auto& st = self->state;
  if (st.queue.empty()) {
    st.idle.push_back(std::move(conn));
    return;
  }
  auto w = std::move(st.queue.front());
  st.queue.pop_front();
  st.queued->set(static_cast<int64_t>(st.queue.size()));
  run_on(self, std::move(conn), std::move(w.statement), std::move(w.promise));
}

void run_on(pool_ptr self, db_reader_actor conn, named_statement statement,
            caf::typed_response_promise<named_result> promise) {
  self->request(conn, caf::infinite, read_atom_v, std::move(statement))
    .then(
      [self, conn, promise](named_result& r) mutable {
        promise.deliver(std::move(r));
        next_for(self, conn);
      },
      [self, conn, promise](caf::error& err) mutable {
        if (code_of(err) == butlers_errc::timeout)
          self->state.timeouts->inc();
        promise.deliver(std::move(err));
        next_for(self, conn);
      });
}

} // namespace

db_reader_actor::behavior_type db_reader_pool(
  db_reader_actor::stateful_pointer<db_reader_pool_state> self,
  database_config cfg, node_context_ptr ctx) {
  auto& st = self->state;
  st.capacity = cfg.reader_queue;
  auto& m = ctx->metrics;
  st.rejected = &m.get_counter("butlers_db_reader_rejected_total",
                               "Reads refused: every reader connection busy "
                               "and reader_queue reads waiting");
  st.timeouts = &m.get_counter("butlers_db_deadline_exceeded_total",
                               "Statements cancelled by a session deadline "
                               "(statement_timeout or lock_timeout)",
                               "session=\"reader\"");
  st.queued = &m.get_gauge("butlers_db_reader_queued",
                           "Reads waiting for an idle reader connection");
  session_deadlines deadlines{cfg.statement_timeout_ms, cfg.lock_timeout_ms};
  for (uint32_t i = 0; i < cfg.pool_size; ++i)
    st.idle.push_back(
      self->spawn<caf::detached + caf::linked>(db_reader, cfg.url, deadlines));
  return {
    [self](read_atom, named_statement& statement) -> caf::result<named_result> {
      auto& st = self->state;
      auto promise = self->make_response_promise<named_result>();
      if (!st.idle.empty()) {
        auto conn = std::move(st.idle.back());
        st.idle.pop_back();
        run_on(self, std::move(conn), std::move(statement), promise);
      } else if (st.queue.size() >= st.capacity) {
        st.rejected->inc();
        promise.deliver(caf::error{butlers_errc::overload_rejected,
                                   "every reader connection is busy and "
                                     + std::to_string(st.capacity)
                                     + " reads wait (database.reader_queue)"});
      } else {
        st.queue.push_back({std::move(statement), promise});
        st.queued->set(static_cast<int64_t>(st.queue.size()));
      }
      return promise;
    },
  };
}

} // namespace butlers
