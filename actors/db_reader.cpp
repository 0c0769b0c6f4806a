#include "actors/db_reader.hpp"

#include <caf/event_based_actor.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "runtime/inbox_store.hpp"

namespace butlers {

db_reader_state::~db_reader_state() = default;

db_reader_actor::behavior_type db_reader(
  db_reader_actor::stateful_pointer<db_reader_state> self, std::string url) {
  self->state.url = std::move(url);
  return {
    [self](read_atom, const named_statement& st) -> caf::result<named_result> {
      auto& s = self->state;
      // One reconnect per call at most: a dead connection is noticed on use.
      for (int attempt = 0; attempt < 2; ++attempt) {
        try {
          if (!s.conn)
            s.conn = std::make_unique<pqxx::connection>(s.url);
          pqxx::read_transaction tx{*s.conn};
          return run_named(tx, st);
        } catch (const pqxx::broken_connection& e) {
          s.conn.reset();
          if (attempt == 1)
            return caf::error{butlers_errc::database_unavailable,
                              std::string{e.what()}};
        } catch (const std::exception& e) {
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

} // namespace butlers
