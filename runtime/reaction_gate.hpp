#pragma once

// The order of the lifecycle reactions on one message, inside one messenger
// (spec 001 §8; runtime/lifecycle.hpp): the reaction a person sees never goes
// backwards. Each reaction is a messenger work item of its own, and the
// messenger runs several deliveries at once, so without an order a fast
// request's 👀 could go out after its 👍 (and be corrected by a third send).
//
// The gate orders them by their rank (`reaction_rank`: the time the state was
// reached, terminal states above all) and by the order the messenger took
// them in:
//
// * `announce`, in the messenger's mailbox order (the order the switchboard
//   and the butlers handed them over): a reaction at or below the highest
//   one already queued or sent for its message is overtaken; every other
//   becomes the message's highest and joins its queue.
// * `begin`, on a delivery thread, before anything is sent: waits (at most
//   `turn_wait`) until the reactions announced before it for the message
//   have ended, then answers whether it may go out: an overtaken reaction
//   (announced so, or outranked by one sent meanwhile) is dropped, never
//   sent and then corrected.
// * `end`, after the send (or its failure).
//
// So 👀 handed over before 👍 is sent before it, and a 👀 or 😴 that
// arrives after the 👍 was queued is not sent at all. The outbound ledger
// still orders reactions across nodes and restarts (a reaction the gate
// never saw passes it). Bounded: at most `capacity` messages are
// remembered; the least recently used one without a reaction in flight is
// forgotten first. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/lifecycle.hpp"

namespace butlers {

class reaction_gate {
 public:
  struct options {
    /// Messages remembered at most.
    size_t capacity = 8192;
    /// How long `begin` waits for the reactions announced before it.
    std::chrono::milliseconds turn_wait{3000};
  };

  reaction_gate();
  explicit reaction_gate(options opts);

  /// Reaction of `rank` for the message of request `request_id`, in the
  /// order the messenger took it: false when it is overtaken (counted in
  /// `overtaken()`; its `begin` will drop it).
  bool announce(const std::string& request_id, int64_t rank);

  /// Before sending reaction `rank` for `request_id` (blocks, at most
  /// `turn_wait`): true when it may go out now; false when it was overtaken
  /// (counted). Every `begin` that answers true must be followed by `end`.
  bool begin(const std::string& request_id, int64_t rank);

  /// Reaction `rank` for `request_id` ended: `sent` when it went out.
  void end(const std::string& request_id, int64_t rank, bool sent);

  /// Whether `rank` is the highest reaction known for `request_id` (none
  /// later was announced or sent).
  bool latest(const std::string& request_id, int64_t rank) const;

  /// Reactions dropped as overtaken, at `begin` (each counted once).
  uint64_t overtaken() const;

  /// Messages remembered now.
  size_t size() const;

 private:
  struct entry {
    /// The highest rank announced, begun or sent.
    int64_t highest = INT64_MIN;
    /// The highest rank sent.
    int64_t sent = INT64_MIN;
    /// Announced or begun and not ended, in announcement order.
    std::vector<int64_t> pending;
  };

  entry& touch(const std::string& request_id);
  bool earlier_pending(const entry& e, int64_t rank) const;
  /// Forgets entries, oldest first and sparing those with a reaction in
  /// flight while it can, until at most `keep` remain.
  void evict(size_t keep);

  options opts_;
  mutable std::mutex mtx_;
  std::condition_variable ended_;
  std::unordered_map<std::string, entry> entries_;
  /// Keys in first-seen order (eviction order).
  std::deque<std::string> order_;
  uint64_t overtaken_ = 0;
};

/// One reaction's turn at `gate` (may be null: always its turn): `begin`
/// at construction, `end` at destruction.
class reaction_turn {
 public:
  reaction_turn(reaction_gate* gate, std::string request_id, int64_t rank);
  ~reaction_turn();

  reaction_turn(const reaction_turn&) = delete;
  reaction_turn& operator=(const reaction_turn&) = delete;

  /// Dropped: a later state of the message was queued or sent first.
  bool overtaken() const {
    return overtaken_;
  }

  /// The reaction went out.
  void sent() {
    sent_ = true;
  }

 private:
  reaction_gate* gate_;
  std::string request_id_;
  int64_t rank_;
  bool overtaken_ = false;
  bool sent_ = false;
};

/// The reaction a messenger work item carries, read from its segment
/// ("notify:react:<state>:<at_us>", see `make_react_notify`): its state and
/// rank. Nullopt for every other delivery.
struct segment_reaction {
  lifecycle_state state;
  int64_t rank;
};
std::optional<segment_reaction> reaction_of_segment(std::string_view segment);

} // namespace butlers
