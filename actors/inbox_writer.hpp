#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"

namespace butlers {

/// The reply to a many-record append: filled in as its records commit
/// (they may span flushes), delivered when the last one has.
struct append_batch_reply {
  caf::typed_response_promise<std::vector<append_result>> rp;
  std::vector<append_result> results;
  size_t left = 0;
};

/// Who waits for one append: a single-record caller, or a slot in a
/// many-record caller's reply.
struct append_waiter {
  caf::typed_response_promise<append_result> one;
  std::shared_ptr<append_batch_reply> batch;
  size_t index = 0;

  append_waiter() = default;
  append_waiter(caf::typed_response_promise<append_result> rp)
    : one(std::move(rp)) {
    // nop
  }
  append_waiter(std::shared_ptr<append_batch_reply> b, size_t i)
    : batch(std::move(b)), index(i) {
    // nop
  }

  void deliver(append_result r);
  void deliver(const caf::error& err);
};

/// The reply to a `write_request`: filled in as its writes commit (they may
/// span lanes and batches), delivered when the last one has.
struct write_request_reply {
  caf::typed_response_promise<write_reply> rp;
  write_reply reply;
  size_t left = 0;

  void settle() {
    if (--left == 0)
      rp.deliver(std::move(reply));
  }
};

/// Who waits for one lifecycle or routing write: a caller of that write
/// alone, or a place in a `write_request`'s reply (`index` in the vector of
/// its kind, `error_index` in `errors`).
template<class T>
struct write_waiter {
  caf::typed_response_promise<T> one;
  std::shared_ptr<write_request_reply> many;
  size_t index = 0;
  size_t error_index = 0;

  write_waiter() = default;
  write_waiter(caf::typed_response_promise<T> rp) : one(std::move(rp)) {
    // nop
  }
  write_waiter(std::shared_ptr<write_request_reply> m, size_t i, size_t e)
    : many(std::move(m)), index(i), error_index(e) {
    // nop
  }

  void deliver(T x) {
    if (!many) {
      one.deliver(std::move(x));
      return;
    }
    if constexpr (std::is_same_v<T, named_result>)
      many->reply.named[index] = std::move(x);
    else if constexpr (std::is_same_v<T, work_result>)
      many->reply.work[index] = std::move(x);
    else
      many->reply.completions[index] = x;
    many->settle();
  }

  void deliver(const caf::error& err) {
    if (!many) {
      one.deliver(err);
      return;
    }
    auto code = static_cast<uint8_t>(code_of(err));
    many->reply.errors[error_index] = code != 0 ? code
                                                : static_cast<uint8_t>(
                                                  butlers_errc::internal_error);
    many->reply.error_messages[error_index] = message_of(err);
    many->settle();
  }
};

/// Who waits for the elements of one batch, in the batch's order.
struct batch_waiters {
  std::vector<append_waiter> appends;
  std::vector<caf::typed_response_promise<claim_result>> claims;
  std::vector<write_waiter<bool>> completions;
  std::vector<write_waiter<work_result>> work;
  std::vector<write_waiter<named_result>> named;
};

/// Lifecycle and routing writes of one lane: those whose key (request,
/// work item, thread) hashes to it. A lane has one batch in flight at a
/// time, so writes with the same key commit in submission order; different
/// lanes commit in parallel, each on a connection of its own.
struct writer_lane {
  /// Writes waiting, in submission order, cut into batches of at most
  /// `max_batch` (each a prefix of what follows, so taking the front one
  /// never lets a later write overtake an earlier one), and their waiters.
  std::deque<write_batch> pending;
  std::deque<batch_waiters> waiters;
  /// A batch of this lane is being written.
  bool in_flight = false;

  /// Writes waiting.
  size_t size() const {
    size_t n = 0;
    for (auto& b : pending)
      n += b.size();
    return n;
  }
};

struct inbox_writer_state {
  static inline const char* name = "inbox_writer";
  /// The connection actors, whether each is up, and whether each is
  /// writing a batch right now. Connection i < lanes.size() is lane i's own;
  /// the others carry appends.
  std::vector<inbox_connection_actor> connections;
  std::vector<bool> up;
  std::vector<bool> busy;
  /// The last reason a connection went down.
  std::string last_error;
  /// Lifecycle and routing writes waiting, per lane.
  std::vector<writer_lane> lanes;
  /// New requests and new work items waiting for an append connection.
  write_batch pending;
  batch_waiters pending_waiters;
  /// Connection 0 has been up at least once: it created the inbox's
  /// partitions when it connected (the others may connect sooner).
  bool primed = false;
  /// A flush_atom is in the mailbox.
  bool flush_scheduled = false;
  /// When the last batch of appends went out, and when the delayed
  /// flush_atom that ends a group_commit_delay_us hold is due (in the past:
  /// none is pending).
  caf::actor_clock::time_point last_append_batch = caf::actor_clock::
    time_point::min();
  caf::actor_clock::time_point hold_flush_at = caf::actor_clock::time_point::
    min();
  /// What status_atom reports.
  db_status status;
  database_config cfg;
  node_context_ptr ctx;
  // -- metrics
  // -----------------------------------------------------------------
  counter* commits = nullptr;
  counter* appended = nullptr;
  counter* claimed = nullptr;
  counter* completed = nullptr;
  counter* worked = nullptr;
  counter* named_rows = nullptr;
  counter* unavailable = nullptr;
  /// Batches a session deadline cancelled (also counted in `unavailable`).
  counter* timeouts = nullptr;
  histogram* batch_sizes = nullptr;
  histogram* flush_ms = nullptr;
  gauge* connections_up = nullptr;
};

/// Spawns connection `index` of `writer`, linked to it.
using connection_factory = std::function<inbox_connection_actor(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> writer,
  uint32_t index)>;

/// The persistence actor (see `inbox_writer_actor`). Spawns its connection
/// actors linked and detached; `owner` names this node in leases, which
/// last `lease_s` seconds.
inbox_writer_actor::behavior_type inbox_writer(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, std::string owner, uint32_t lease_s,
  node_context_ptr ctx);

/// The same with its connections made by `make`: tests pass fakes that
/// implement `inbox_connection_actor`.
inbox_writer_actor::behavior_type inbox_writer_with(
  inbox_writer_actor::stateful_pointer<inbox_writer_state> self,
  database_config cfg, node_context_ptr ctx, connection_factory make);

} // namespace butlers
