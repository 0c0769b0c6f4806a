#pragma once

// Typed fakes of what a conversation thread talks to (the inbox writer, the
// reader, the registry, a butler, the thread directory), for deterministic
// tests of the thread and its directory (CAF's test_coordinator). Each
// implements the real actor's typed interface and records what it saw in a
// shared script the test reads.

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "runtime/error.hpp"
#include "runtime/messages.hpp"
#include "runtime/route.hpp"
#include "runtime/threads.hpp"
#include "test/support/fake_writer.hpp"

namespace butlers::test {

/// The thread tables, as far as the thread's statements touch them.
struct thread_db {
  /// Every statement the writer got, in arrival order.
  std::vector<named_statement> writes;
  /// Every statement the reader got.
  std::vector<named_statement> reads;
  /// Stored user turns: message id → (cursor, run id, kind).
  std::map<std::string, std::vector<std::string>> turns;
  /// The last transcript cursor handed out.
  int64_t cursor = 0;
  /// Thread id → its first user text.
  std::map<std::string, std::string> first_texts;
  /// Every write and read fails with `database_unavailable`.
  bool down = false;
  /// What `thread_open_runs` answers: (run_id, butler, state, texts as a
  /// JSON array[, sender, model, max_steps, files as JSON]) rows.
  std::vector<std::vector<std::string>> open_runs;
  /// What `thread_open_threads` answers: (thread_id) rows.
  std::vector<std::vector<std::string>> open_threads;

  /// The writes of query `query`, in order.
  std::vector<named_statement> writes_of(const std::string& query) const {
    std::vector<named_statement> out;
    for (auto& w : writes)
      if (w.query == query)
        out.push_back(w);
    return out;
  }

  /// One statement, as the real queries answer it: a turn insert returns
  /// (fresh, cursor, run_id, kind, first user text, at_ms) and finds a
  /// stored message id; a reply insert returns (cursor, at_ms, first user
  /// text). A message's time is 1000 + its cursor.
  named_result run(const named_statement& x) {
    named_result r;
    r.ok = true;
    if (x.query == "thread_turn_insert") {
      auto& p = x.params; // thread, message, text, run, kind, butler
      auto i = turns.find(p[1]);
      auto& first = first_texts.emplace(p[0], p[2]).first->second;
      if (i != turns.end()) {
        r.rows.push_back({"f", i->second[0], i->second[1], i->second[2], first,
                          std::to_string(1000 + std::stoll(i->second[0]))});
        return r;
      }
      std::vector<std::string> row{std::to_string(++cursor), p[3], p[4]};
      turns.emplace(p[1], row);
      r.rows.push_back(
        {"t", row[0], row[1], row[2], first, std::to_string(1000 + cursor)});
    } else if (x.query == "thread_reply_insert") {
      ++cursor;
      r.rows.push_back({std::to_string(cursor), std::to_string(1000 + cursor),
                        first_texts[x.params[0]]});
    } else if (x.query == "thread_open_runs") {
      r.rows = open_runs;
    } else if (x.query == "thread_open_threads") {
      r.rows = open_threads;
    }
    return r;
  }
};

inline caf::error unused() {
  return caf::error{butlers_errc::internal_error, "not used"};
}

inline caf::error unavailable() {
  return caf::error{butlers_errc::database_unavailable, "down"};
}

/// The inbox writer (the shared fake): runs the thread's named statements
/// against `db`, recording in `db->writes` those that reached it while up.
inline inbox_writer_actor::behavior_type thread_writer(
  inbox_writer_actor::pointer self, std::shared_ptr<thread_db> db) {
  auto script = std::make_shared<writer_script>();
  script->on_named = [db](named_statement& x) -> caf::expected<named_result> {
    if (db->down)
      return unavailable();
    db->writes.push_back(x);
    return db->run(x);
  };
  return fake_writer(self, std::move(script));
}

/// The reader: answers the open runs and threads of `db`.
inline db_reader_actor::behavior_type thread_reader(
  db_reader_actor::pointer, std::shared_ptr<thread_db> db) {
  return {
    [db](read_atom, named_statement& x) -> caf::result<named_result> {
      if (db->down)
        return unavailable();
      db->reads.push_back(x);
      return db->run(x);
    },
  };
}

/// What a fake butler saw, and how it answers.
struct butler_script {
  /// Every route.execute, in arrival order.
  std::vector<route_request> routes;
  /// The run ids (request ids) of those routes.
  std::vector<std::string> run_ids;
  /// Cancelled work ids.
  std::vector<std::string> cancels;
  /// Steer input per work id, in arrival order.
  std::vector<std::pair<std::string, steer_input>> steers;
  /// When set, route.execute is answered `error` with this class.
  std::string refuse;
  /// When true, route.execute is answered only when the butler gets
  /// `tick_atom` (in the actor: a promise delivered from outside it would
  /// use a scheduler context the test coordinator has discarded).
  bool hold = false;
  std::vector<caf::typed_response_promise<route_response>> held;

  /// The answer to the n-th route (work id "w<n>", counted from 1).
  route_response accepted(size_t n) const {
    route_response r;
    r.status = "accepted";
    r.work_id = "w" + std::to_string(n);
    return r;
  }

  /// Answers the held routes (accepted); called by the fake butler.
  void release() {
    auto xs = std::move(held);
    held.clear();
    auto first = routes.size() - xs.size() + 1;
    for (size_t i = 0; i < xs.size(); ++i)
      xs[i].deliver(accepted(first + i));
  }
};

/// A butler that stores every run it is given as work item w1, w2, ...
inline butler_actor::behavior_type fake_butler(
  butler_actor::pointer self, std::shared_ptr<butler_script> s) {
  return {
    [self, s](route_atom, route_request& req) -> caf::result<route_response> {
      route_envelope env;
      parse_route(req.envelope, env);
      s->run_ids.push_back(env.request_id);
      s->routes.push_back(std::move(req));
      if (!s->refuse.empty()) {
        route_response r;
        r.status = "error";
        r.error_class = s->refuse;
        r.error_message = "refused";
        return r;
      }
      if (s->hold) {
        auto rp = self->make_response_promise<route_response>();
        s->held.push_back(rp);
        return rp;
      }
      return s->accepted(s->routes.size());
    },
    [s](cancel_atom, std::string& work_id) {
      s->cancels.push_back(work_id);
      return true;
    },
    [s](steer_atom, std::string& work_id, steer_input& in) {
      s->steers.emplace_back(work_id, std::move(in));
      return true;
    },
    [](status_atom) {
      return butler_status{};
    },
    [](done_atom, session_outcome&) {},
    [s](caf::tick_atom) {
      s->release();
    },
    [](caf::tick_atom, const std::string&) {},
    [](schedule_atom, uint32_t) {},
    [](caf::timeout_atom) {},
    [](worker_atom, worker_call&) {
      return worker_reply{};
    },
    [](worker_atom, uint64_t) {},
    [](drain_atom, caf::timespan) {
      return uint32_t{0};
    },
    [](drain_atom) {},
    [](done_atom, route_response&) {},
  };
}

/// A registry that knows the butlers of `butlers` by name.
inline registry_actor::behavior_type registry_of_butlers(
  registry_actor::pointer,
  std::shared_ptr<std::map<std::string, butler_actor>> butlers) {
  return {
    [butlers](lookup_atom, std::string& name) -> caf::result<butler_actor> {
      auto i = butlers->find(name);
      if (i == butlers->end())
        return caf::error{butlers_errc::target_unavailable, "no " + name};
      return i->second;
    },
    [](lookup_atom, std::string&, butler_actor&) -> caf::result<butler_actor> {
      return unused();
    },
    [](list_atom) {
      return std::vector<registry_entry>{};
    },
    [](hosts_atom) {
      return std::vector<registry_entry>{};
    },
    [](register_atom, registry_entry&, butler_actor&) {},
    [](register_atom, std::string&, std::vector<registry_entry>&,
       std::vector<butler_actor>&) {
      return std::vector<registry_entry>{};
    },
    [](mark_atom, std::string&, std::string&) {
      return std::vector<registry_entry>{};
    },
  };
}

/// (run_id, thread_id, active) as a thread reported it to its directory.
using run_note = std::tuple<std::string, std::string, bool>;

/// A directory that records what its threads report about their runs.
inline thread_directory_actor::behavior_type fake_directory(
  thread_directory_actor::pointer,
  std::shared_ptr<std::vector<run_note>> notes) {
  return {
    [](turn_atom, thread_turn&) -> caf::result<turn_result> {
      return unused();
    },
    [](cancel_atom, std::string&, std::string&) -> caf::result<uint32_t> {
      return unused();
    },
    [](touch_atom, std::string&) {
      return uint64_t{0};
    },
    [](status_atom) {
      return uint64_t{0};
    },
    [](snapshot_atom, std::string&) -> caf::result<thread_live> {
      return unused();
    },
    [notes](run_atom, std::string& run_id, std::string& thread_id,
            bool active) {
      notes->emplace_back(run_id, thread_id, active);
    },
    [](caf::tick_atom) {},
    [](resume_atom) {},
  };
}

} // namespace butlers::test
