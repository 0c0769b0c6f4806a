#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "actors/session.hpp"
#include "actors/writer_client.hpp"
#include "runtime/config.hpp"
#include "runtime/cron.hpp"
#include "runtime/session_pool.hpp"
#include "runtime/usage.hpp"
#include "runtime/worker_wire.hpp"

namespace butlers {

/// Everything a butler actor is made from.
struct butler_params {
  butler_config cfg;
  /// The messenger's channel adapters (used by the messenger only).
  std::vector<delivery_adapter_config> adapters;
  /// The connectors, whose tokens and API bases the messenger's adapters
  /// use (the messenger only).
  std::vector<connector_config> connectors;
  /// `[[budget]]`: the token and cost budgets of the node (the butler's
  /// sessions check those that select it).
  std::vector<budget_config> budgets;
  /// Names this node in leases.
  std::string node;
  /// Gets `done_atom, route_response` for every finished work item, after
  /// its result is durable (the switchboard consumes them; tests and
  /// benchmarks observe with it). May be null.
  caf::actor listener;
};

struct butler_state;

/// How the write of a work item's result ended.
enum class outcome_write {
  /// Durable.
  written,
  /// Refused: another holder has the lease now.
  fenced,
  /// The database failed; the item stays open and runs again.
  failed,
};

using butler_ptr = butler_actor::stateful_pointer<butler_state>;

/// How a butler runs the work it admitted: a butler runs sessions of its
/// runtime, the messenger (actors/messenger.hpp) delivers. Everything else
/// (admission, the work items, their leases and results) is the same.
class work_runner {
 public:
  virtual ~work_runner();

  /// Rules of its own for `env` (parsed from `req`), checked after the
  /// butler's: a rejection, or nullopt. None by default.
  virtual std::optional<route_rejection> admit(const route_request& req,
                                               const route_envelope& env) const;

  /// Starts the work of `held` (its steer input may be moved out). Returns
  /// its session, or null when it runs without one; either way
  /// `done_atom, session_outcome` reaches `self` when it ends.
  virtual session_actor start(butler_ptr self, held_item& held) = 0;

  /// The result of an item no dispatcher waits for here (recovered after
  /// its holder died) goes to this node's switchboard. True by default.
  virtual bool answers_switchboard() const;

  /// A worker's recv, ack, nack or extend. Only external butlers take
  /// them (actors/external_runner.hpp); others answer `conflict`.
  virtual caf::result<worker_reply> worker(butler_ptr self, worker_call& call);

  /// The runner's timer (`worker_atom, gen`, sent by the runner itself).
  virtual void worker_timer(butler_ptr self, uint64_t gen);

  /// The result `out` of an item was written, or not (`w`).
  virtual void written(butler_ptr self, const session_outcome& out,
                       outcome_write w);
};

/// A session's result waiting for the delivery of its reply: written
/// once the messenger reports how the delivery ended.
struct pending_reply {
  session_outcome out;
  std::string sender;
};

/// A result whose write failed in a way that may have committed
/// (butler_outcome.cpp): read back until known.
struct in_doubt_result {
  session_outcome out;
  /// Whose daily usage the result adds to.
  std::string sender;
  /// Writes and read-backs so far.
  uint32_t attempts = 0;
  /// A read-back is out.
  bool reading = false;
};

struct butler_state {
  static inline const char* name = "butler";
  butler_params params;
  inbox_writer_actor writer;
  /// Work-item writes go out through this (few requests).
  writer_client writes;
  node_context_ptr ctx;
  /// Runs what the butler admitted.
  std::unique_ptr<work_runner> runner;
  /// Admission, the waiting and running items and their deadlines.
  std::optional<session_pool> pool;
  /// Who gets `done_atom, route_response` when an item's result is durable,
  /// by work id (the dispatchers of its route.execute calls).
  std::unordered_map<std::string, std::vector<caf::actor>> waiters;
  /// Waiters for items held elsewhere (or not yet recovered here), with the
  /// tick count when they were added: dropped after a few ticks unless the
  /// item turns up here.
  std::unordered_map<std::string, uint64_t> foreign_waiters;
  /// Results whose reply the messenger is delivering, by the delivery's
  /// work id (the item's lease is renewed meanwhile: it is finishing).
  std::unordered_map<std::string, pending_reply> replies;
  /// Results whose write may or may not have committed, by work id.
  std::unordered_map<std::string, in_doubt_result> in_doubt;
  /// Results written here lately, by work id, with the tick they were
  /// written at, oldest first in `recent_order`: a duplicate dispatch whose
  /// read of the item raced the write of its result (the item read still
  /// open, then written before the dispatcher could be told) is answered
  /// from here. At most `recent_capacity`, for `recent_ticks` ticks.
  std::unordered_map<std::string, route_response> recent;
  std::deque<std::pair<std::string, uint64_t>> recent_order;
  static constexpr size_t recent_capacity = 1024;
  static constexpr uint64_t recent_ticks = 6;
  /// Ticks so far (the age of foreign waiters and recent results).
  uint64_t ticks = 0;
  /// Holder name in leases: "NODE/INCARNATION", new at every spawn.
  std::string owner;
  /// The first recovery also takes the leases earlier incarnations on this
  /// node held (they are gone: this one replaced them).
  bool recovered_own = false;
  /// A recovery (`lease`) request is out: one at a time.
  bool leasing = false;
  /// Until the first recovery went through, the next tick comes after this
  /// (250 ms, doubling up to the tick interval).
  std::chrono::milliseconds first_recovery_delay{250};
  /// Cron schedules, parallel to cfg.schedules (nullopt for every_s).
  std::vector<std::optional<cron_schedule>> crons;
  /// The fire time each schedule is armed for, parallel to cfg.schedules:
  /// the same on every node, so that the request id derived from it makes
  /// one work item per (butler, schedule, fire time) across the cluster.
  std::vector<std::chrono::system_clock::time_point> next_fire;
  butler_status status;
  // -- metrics (spec 000 §4.2, §4.4) ------------------------------------------
  gauge* active_sessions = nullptr;
  gauge* queued_triggers = nullptr;
  gauge* queue_depth = nullptr;
  histogram* session_duration = nullptr;
  histogram* accept_latency = nullptr;
  histogram* process_latency = nullptr;
  counter* accepted = nullptr;
  counter* overload = nullptr;
  counter* fenced = nullptr;
  counter* recovered = nullptr;
  /// In-doubt results found written when read back.
  counter* confirmed = nullptr;
  /// Tokens, cost and duration of the sessions, and budget decisions.
  std::unique_ptr<usage_meters> usage;
  /// The prompt version of the butler's runtime (`prompt_version_of`),
  /// recorded with each work item's result; "" for none.
  std::string prompt_version;
  /// Clean shutdown: no work starts or is taken any more (`drain`).
  bool draining = false;
  /// The leases held were handed back (or the attempt failed).
  bool released = false;
  /// The drain's answer, until the release is written.
  std::optional<caf::typed_response_promise<uint32_t>> drained;
};

/// A butler (see `butler_actor`) whose work items run as sessions of its
/// runtime.
butler_actor::behavior_type butler(butler_ptr self, butler_params params,
                                   inbox_writer_actor writer,
                                   node_context_ptr ctx);

/// A butler whose work items run through `runner`.
butler_actor::behavior_type butler_with(butler_ptr self, butler_params params,
                                        inbox_writer_actor writer,
                                        node_context_ptr ctx,
                                        std::unique_ptr<work_runner> runner);

/// The built-in butler every node has unless configured: `general` (the
/// router's fallback, scripted).
butler_config default_general();

/// Clean shutdown (`drain_atom`, defined in butler_drain.cpp): stops
/// starting and taking work, waits up to `wait` for running sessions, then
/// releases every lease still held.
caf::result<uint32_t> drain(butler_ptr self, caf::timespan wait);

/// Releases the leases now if the drain waits and no session runs any more
/// (or `deadline`: the wait is over).
void drain_progress(butler_ptr self, bool deadline);

/// Checks a route.execute against the butler's rules (butler.cpp): a
/// rejection, or nullopt with `env` parsed.
std::optional<route_response> admit(butler_ptr self, const route_request& req,
                                    route_envelope& env);

using reply_fn = std::function<void(route_response)>;

/// Stores an admitted item, queues it for a slot, and answers `accepted`
/// once it is durable (butler.cpp).
void store(butler_ptr self, route_request& req, route_envelope env,
           reply_fn reply);

/// Writes the terminal result (fenced), tells the listener and the
/// waiters once it is durable, frees the bookkeeping slot. The session's
/// usage and prompt version go with it, and `sender`'s daily usage is added
/// up in the same statement (butler_outcome.cpp).
void write_outcome(butler_ptr self, session_outcome out,
                   const std::string& sender = {});

/// Remembers the written result of `work_id` for a while (see
/// `butler_state::recent`), forgetting what is old or over capacity.
void remember_written(butler_ptr self, const std::string& work_id,
                      const route_response& response);

/// Forgets recent results older than `butler_state::recent_ticks`.
void age_recent(butler_ptr self);

/// Reads back the result of `work_id` whose write was in doubt (again).
void read_back_in_doubt(butler_ptr self, const std::string& work_id);

/// Parses the schedules and arms each (butler_schedule.cpp).
void init_schedules(butler_ptr self);

/// Schedule `i` is due: fires it for the time it was armed for, re-arms.
void fire(butler_ptr self, uint32_t i);

/// The catch-ups of the schedules with `catch_up = "once"`, run once the
/// database answered (the first recovery).
void catch_up_all(butler_ptr self);

} // namespace butlers
