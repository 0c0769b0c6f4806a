#include "actors/thread_directory.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "runtime/threads.hpp"

namespace butlers {

namespace {

using directory_ptr = thread_directory_actor::stateful_pointer<
  thread_directory_state>;

/// The entry of thread `id`, spawning its actor when absent; counts a
/// forward to it.
directory_entry& entry_for(directory_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.threads.find(id);
  if (i == st.threads.end()) {
    // Linked: when the directory goes (the supervisor restarts the group),
    // its threads go with it; the new ones resume from the database.
    auto hdl = self->spawn<caf::linked>(thread, id, thread_env_ptr{st.env});
    i = st.threads.emplace(id, directory_entry{hdl, 0, unix_now_ms(), false})
          .first;
    st.spawned->inc();
    st.live->set(static_cast<int64_t>(st.threads.size()));
  }
  auto& e = i->second;
  ++e.seq;
  e.last_ms = unix_now_ms();
  return e;
}

std::chrono::milliseconds sweep_interval(const threads_config& cfg) {
  return std::chrono::milliseconds{
    std::max<int64_t>(100, int64_t{cfg.idle_timeout_s} * 1000 / 4)};
}

/// Thread `key`, asked while its forward count was `seq`, answered that it
/// has been idle since `idle_since` (-1: busy): retire it if that is longer
/// than `limit` ms and nothing was forwarded to it since it was asked.
void on_idle_answer(directory_ptr self, const std::string& key, uint64_t seq,
                    int64_t limit, int64_t idle_since) {
  auto& st = self->state;
  auto i = st.threads.find(key);
  if (i == st.threads.end())
    return;
  auto& e = i->second;
  e.asking = false;
  if (idle_since < 0 || e.seq != seq) {
    e.last_ms = unix_now_ms();
    return;
  }
  if (unix_now_ms() - idle_since < limit) {
    e.last_ms = std::max(e.last_ms, idle_since);
    return;
  }
  // Nothing was forwarded since we asked, and nothing can be now: the
  // entry goes first, then the actor.
  self->send(e.hdl, retire_atom_v);
  st.threads.erase(i);
  st.retired->inc();
  st.live->set(static_cast<int64_t>(st.threads.size()));
}

/// Asks threads idle for longer than the timeout whether they still are,
/// and retires those that are and got nothing since they were asked.
void sweep(directory_ptr self) {
  auto& st = self->state;
  auto limit = int64_t{st.env->cfg.idle_timeout_s} * 1000;
  auto now = unix_now_ms();
  for (auto& [id, e] : st.threads) {
    if (e.asking || now - e.last_ms < limit)
      continue;
    e.asking = true;
    auto seq = e.seq;
    auto key = id;
    self->request(e.hdl, st.env->timeout, idle_atom_v)
      .then(
        [self, key, seq, limit](int64_t idle_since) {
          on_idle_answer(self, key, seq, limit, idle_since);
        },
        [self, key](const caf::error&) {
          auto& st = self->state;
          auto i = st.threads.find(key);
          if (i != st.threads.end())
            i->second.asking = false;
        });
  }
}

/// Wakes the threads that have runs left open by a previous run of the
/// node (each resumes them as it starts); retried every second until the
/// database answered once.
void resume_open(directory_ptr self) {
  auto& st = self->state;
  if (st.resumed || !st.env->reader)
    return;
  if (st.ctx && !st.ctx->status.database_ready) {
    // Resumed runs go to their butlers, which store work through the
    // writer: wait until it is up.
    self->delayed_send(self, std::chrono::milliseconds{200}, resume_atom_v);
    return;
  }
  self
    ->request(st.env->reader, st.env->timeout, read_atom_v,
              named_statement{"thread_open_threads", {}})
    .then(
      [self](const named_result& r) {
        auto& st = self->state;
        if (!r.ok || st.resumed)
          return;
        st.resumed = true;
        for (auto& row : r.rows)
          if (!row.empty())
            entry_for(self, row[0]);
        if (!r.rows.empty())
          spdlog::info("threads: woke {} thread(s) with open runs",
                       r.rows.size());
      },
      [self](const caf::error&) {
        // The reader (or the schema) is not up yet: ask again shortly.
        self->delayed_send(self, std::chrono::seconds{1}, resume_atom_v);
      });
}

/// A linked actor ended. A thread that ends (retired, or failed) does not
/// take the directory with it; one that failed is dropped and resumes on
/// its next turn. Anything else linked to the directory takes it down.
void on_exit(directory_ptr self, caf::exit_msg& msg) {
  auto& st = self->state;
  if (!msg.reason)
    return; // a retired thread
  for (auto i = st.threads.begin(); i != st.threads.end(); ++i) {
    if (i->second.hdl.address() == msg.source) {
      spdlog::warn("thread {} ended: {}", i->first,
                   self->system().render(msg.reason));
      st.threads.erase(i);
      st.live->set(static_cast<int64_t>(st.threads.size()));
      return;
    }
  }
  self->quit(msg.reason);
}

/// Forwards a cancel to the thread named, or to the thread holding
/// `run_id` when no thread is named.
caf::result<uint32_t> cancel(directory_ptr self, const std::string& thread_id,
                             const std::string& run_id) {
  auto& st = self->state;
  auto id = thread_id;
  if (id.empty()) {
    auto i = st.runs.find(run_id);
    if (i == st.runs.end())
      return caf::error{butlers_errc::not_found,
                        "no active or queued run " + run_id};
    id = i->second;
  }
  if (st.threads.count(id) == 0)
    return uint32_t{0};
  auto& e = entry_for(self, id);
  return self->delegate(e.hdl, cancel_atom_v, run_id);
}

} // namespace

thread_directory_actor::behavior_type thread_directory(
  thread_directory_actor::stateful_pointer<thread_directory_state> self,
  thread_env env, node_context_ptr ctx) {
  auto& st = self->state;
  st.ctx = ctx;
  auto& m = ctx->metrics;
  env.directory = thread_directory_actor{self};
  wire_thread_metrics(env, m);
  st.live = &m.get_gauge("butlers_threads_live", "Thread actors in memory");
  st.spawned = &m.get_counter("butlers_threads_spawned_total",
                              "Thread actors created");
  st.retired = &m.get_counter("butlers_threads_retired_total",
                              "Idle thread actors retired");
  st.env = std::make_shared<thread_env>(std::move(env));
  self->set_exit_handler([self](caf::exit_msg& msg) {
    on_exit(self, msg);
  });
  self->delayed_send(self, sweep_interval(st.env->cfg), caf::tick_atom_v);
  resume_open(self);
  return {
    [self](turn_atom a, thread_turn& t) {
      auto& e = entry_for(self, t.thread_id);
      return self->delegate(e.hdl, a, std::move(t));
    },
    [self](cancel_atom, const std::string& thread_id,
           const std::string& run_id) -> caf::result<uint32_t> {
      return cancel(self, thread_id, run_id);
    },
    [self](touch_atom, const std::string& thread_id) -> uint64_t {
      entry_for(self, thread_id);
      return self->state.threads.size();
    },
    [self](status_atom) -> uint64_t {
      return self->state.threads.size();
    },
    [self](snapshot_atom a,
           const std::string& thread_id) -> caf::result<thread_live> {
      // Not counted as a forward: a read keeps no thread alive. Should the
      // thread retire before it answers, the caller reads the database.
      auto i = self->state.threads.find(thread_id);
      if (i == self->state.threads.end())
        return caf::error{butlers_errc::not_found,
                          "thread " + thread_id + " has no live actor"};
      return self->delegate(i->second.hdl, a);
    },
    [self](run_atom, const std::string& run_id, const std::string& thread_id,
           bool active) {
      auto& runs = self->state.runs;
      if (active)
        runs[run_id] = thread_id;
      else
        runs.erase(run_id);
    },
    [self](resume_atom) {
      resume_open(self);
    },
    [self](caf::tick_atom) {
      sweep(self);
      self->delayed_send(self, sweep_interval(self->state.env->cfg),
                         caf::tick_atom_v);
    },
  };
}

} // namespace butlers
