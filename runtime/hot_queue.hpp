#pragma once

// The switchboard's hot path (spec 001 §10.9): stored requests waiting for
// a worker, in arrival order, with causal order per source thread. A plain
// class: the switchboard offers what it stored, takes what may start, and
// reports when a worker is done.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/fair_queue.hpp"
#include "runtime/messages.hpp"
#include "runtime/request_context.hpp"

namespace butlers {

/// A stored request on the hot path. `record` is what this node stored at
/// ingest (context, text and tier, no raw payload); with it, the request is
/// planned before it is claimed and the plan commits with the claim. From
/// the cold path it is null: claimed first, then planned.
struct queued_request {
  inbox_ref ref;
  std::shared_ptr<const inbox_record> record;
  /// Its source thread (see `order_key_of`).
  std::string order_key;
};

/// The causal-order key of a request: channel, endpoint and source thread,
/// or "" when the channel names no thread.
std::string order_key_of(const request_context& ctx);

class hot_queue {
 public:
  /// Serves sources in turn as `fairness` says (see runtime/fair_queue.hpp),
  /// at most `source_capacity` requests of one (0: `capacity`).
  explicit hot_queue(size_t capacity,
                     fairness_mode fairness = fairness_mode::off,
                     size_t source_capacity = 0,
                     fair_queue_metrics metrics = {})
    : capacity_(capacity),
      queue_(fairness, capacity, source_capacity, metrics) {
    // nop
  }

  /// Offers a stored request; false when there is no room for it (its
  /// source is full, or the queue is and it may not shed another's newest
  /// request, see runtime/fair_queue.hpp). `order_key`
  /// names its source thread ("" = none): requests with the same key are
  /// taken one at a time, in the order offered, while other keys proceed
  /// in parallel. A request held here already (queued, or with a worker)
  /// counts as taken: running it twice, or holding its thread twice, would
  /// be wrong.
  bool offer(inbox_ref ref, std::string order_key = {},
             std::shared_ptr<const inbox_record> record = nullptr);

  /// Takes up to `n` requests that may start, in the fair queue's order
  /// (oldest first with fairness "off"), skipping those whose source thread
  /// has one with a worker; each now has a worker.
  std::vector<queued_request> take(size_t n);

  /// The worker of `request_id` is done (or gave up): frees it and the hold
  /// on its source thread.
  void done(const std::string& request_id);

  /// The worker of `request_id` is free for the next request while its
  /// claim and plan commit; the request counts as committing, and holds its
  /// source thread, until `done`. False when it was freed already.
  bool free_worker(const std::string& request_id);

  /// Queued, with a worker, or committing.
  bool holds(const std::string& request_id) const;

  size_t size() const {
    return queue_.size();
  }

  /// Sources with queued requests.
  size_t sources() const {
    return queue_.sources();
  }

  /// Requests shed from the queue to make room for another source's (they
  /// stay `accepted` in the inbox for the cold path), since the last call.
  uint64_t take_shed() {
    return std::exchange(shed_, 0);
  }

  size_t capacity() const {
    return capacity_;
  }

  /// Requests with a worker.
  uint32_t active() const {
    return active_;
  }

  /// Requests whose worker was freed while their claim and plan commit.
  size_t committing() const {
    return committing_.size();
  }

 private:
  size_t capacity_;
  fair_queue<queued_request> queue_;
  /// The request ids in `queue_`.
  std::unordered_set<std::string> queued_ids_;
  uint64_t shed_ = 0;
  /// The key each request with a worker (or committing) holds, and how many
  /// hold each key.
  std::unordered_map<std::string, std::string> classifying_;
  std::unordered_map<std::string, uint32_t> held_keys_;
  std::unordered_set<std::string> committing_;
  uint32_t active_ = 0;
};

} // namespace butlers
