#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/collect_window.hpp"
#include "runtime/config.hpp"
#include "runtime/event_hub.hpp"
#include "runtime/metrics.hpp"
#include "runtime/thread_list.hpp"
#include "runtime/turn_policy.hpp"

namespace butlers {

/// What every thread actor of a node shares (one instance, read-only once
/// the directory has filled in its own handle).
struct thread_env {
  threads_config cfg;
  inbox_writer_actor writer;
  registry_actor registry;
  /// Reads a thread's open runs when its actor starts (null: nothing to
  /// resume, e.g. in benchmarks).
  db_reader_actor reader;
  thread_directory_actor directory;
  /// May be null (no event streams, e.g. in benchmarks).
  std::shared_ptr<event_hub> hub;
  /// Bound on a round trip to the writer, the registry or a butler.
  std::chrono::milliseconds timeout{10000};
  // -- metrics ---------------------------------------------------------------
  counter* turns = nullptr;
  counter* started = nullptr;
  counter* steered = nullptr;
  counter* steers_applied = nullptr;
  counter* queued = nullptr;
  counter* interrupted = nullptr;
  counter* conflicts = nullptr;
  counter* overload = nullptr;
  counter* cancelled = nullptr;
  counter* duplicates = nullptr;
  counter* collected = nullptr;
  histogram* steer_wait = nullptr;

  /// The turn rules under `cfg` (made on demand: a policy per thread would
  /// make every idle thread bigger).
  turn_policy policy() const {
    return turn_policy{cfg};
  }
};

using thread_env_ptr = std::shared_ptr<const thread_env>;

/// A run of a thread, active or stopping.
struct thread_run {
  std::string run_id;
  std::string butler;
  butler_actor hdl;
  /// The butler's work item, once it stored it ("" before).
  std::string work_id;
  /// Steer input accepted before the butler stored the item.
  std::vector<steer_input> unsent;
  /// Cancel once the work item is known.
  bool cancel = false;
};

/// A run waiting behind the active run of its butler (mode "queue").
struct queued_run {
  std::string run_id;
  std::string butler;
  std::string text;
  run_options options;
  /// The turn's files (references as JSON, "" for none).
  std::string attachments;
};

/// A turn waiting while the thread decides the previous one.
struct pending_turn {
  thread_turn turn;
  caf::typed_response_promise<turn_result> rp;
};

/// Everything a thread holds only while it has something going on; null
/// when idle, so an idle thread is small.
struct thread_activity {
  /// Active runs, at most one per butler.
  std::vector<thread_run> runs;
  /// Runs cancelled or interrupted whose outcome has not arrived.
  std::vector<thread_run> stopping;
  std::deque<queued_run> queued;
  /// Collect mode: the open collect windows, at most one per butler (none
  /// for a butler with an active run).
  std::vector<collect_window> collecting;
  std::deque<pending_turn> turns;
  /// Outcomes that arrived while a turn was being decided (applied after,
  /// so a turn's decision and its effect see the same runs).
  std::vector<route_response> deferred;
  /// A turn is being decided or persisted.
  bool busy = false;
  /// Writes in flight (run replies and state changes).
  uint32_t writes = 0;
  /// The recent message ids answered by this activation and their answers
  /// (bounded): a retry is recognized before the 409 checks.
  std::deque<std::pair<std::string, turn_result>> recent;

  bool empty() const {
    return runs.empty() && stopping.empty() && queued.empty() && turns.empty()
           && collecting.empty() && deferred.empty() && !busy && writes == 0;
  }
};

struct thread_state {
  static inline const char* name = "thread";
  /// The thread id (spec 003).
  std::string id;
  /// Shared by every thread of the node.
  thread_env_ptr env;
  /// Null while the thread is idle.
  std::unique_ptr<thread_activity> act;
  /// Unix ms since which the thread has nothing going on.
  int64_t idle_since_ms = 0;
  /// Title, last message and latest run as this activation saw them (for
  /// the summary events; empty until then).
  thread_digest digest;
};

/// Points the metrics of `env` at the thread metrics of `m`.
void wire_thread_metrics(thread_env& env, metrics_registry& m);

/// A conversation thread (see `thread_actor`).
thread_actor::behavior_type thread(
  thread_actor::stateful_pointer<thread_state> self, std::string id,
  thread_env_ptr env);

} // namespace butlers
