#pragma once

// A request's fanout as a state machine (spec 001 §15.4, §15.5, §8): which
// segments may be dispatched now under the plan's mode, what a terminal
// segment rules out, and the request's verdict. Pure logic; the switchboard
// drives it with dispatches and downstream outcomes.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace butlers {

/// One planned subrequest and where it stands.
struct fanout_segment {
  std::string segment_id;
  std::string butler;
  std::string prompt;
  int32_t ordinal = 0;
  /// pending → dispatched → ok | error | skipped.
  std::string state = "pending";
  /// Dispatches so far (each attempt is its own work item downstream).
  uint32_t attempts = 0;
  /// Dispatches in the current round (a replay starts a new round).
  uint32_t round_attempts = 0;
  std::string work_id;
  std::string error_class;
  std::string error_message;
  /// Send the current attempt again (same work item downstream) instead of
  /// a new one: set for a dispatch that was out when the request was last
  /// processed by a switchboard that is gone.
  bool redeliver = false;
  /// Waiting for room at a full butler (state "backoff"): its last dispatch
  /// was refused with `overload_rejected` and will be sent again, as the
  /// same attempt, once the butler reports an outcome or the wait's timer
  /// fires, whichever is first.
  bool waiting = false;
  /// The store already holds this segment's first dispatch ('dispatched',
  /// attempt 1): the plan store records the dispatches that start the
  /// fanout, so the first one needs no write of its own.
  bool first_dispatch_stored = false;
  /// Waits so far (each refusal), and when the current one's timer fires
  /// (steady clock, ns): an earlier wait's timer arriving late is ignored.
  uint32_t waits = 0;
  int64_t wait_until_ns = 0;

  bool terminal() const {
    return state == "ok" || state == "error" || state == "skipped";
  }
};

/// The segment id a dispatch attempt carries downstream: the plan's id for
/// the first attempt, "<id>:a<n>" after that, so a deliberate retry is a new
/// work item while a redelivery of the same attempt dedupes.
std::string attempt_segment_id(const std::string& segment_id, uint32_t attempt);

/// The inverse: the plan's segment id and the attempt (1 when unsuffixed).
std::pair<std::string, uint32_t> split_attempt(const std::string& id);

struct fanout {
  /// "parallel", "ordered" or "conditional".
  std::string mode = "parallel";
  std::vector<fanout_segment> segments;

  /// "continue" for parallel and ordered, "skip_dependents" for
  /// conditional (persisted with the plan).
  const char* abort_policy() const;

  /// Segments to dispatch now: every pending one (parallel), or the first
  /// not yet terminal one when it is pending and everything before it is
  /// terminal (ordered, conditional).
  std::vector<size_t> ready() const;

  /// The segments a new fanout dispatches before any outcome arrives (what
  /// `ready` yields, again and again, as each is dispatched).
  std::vector<size_t> first_dispatches() const;

  /// Records that segment `i` became terminal; under `conditional` a
  /// failure skips every later segment (their error says which upstream
  /// failed). Returns the indices it skipped.
  std::vector<size_t> settle(size_t i);

  /// Every segment has an outcome.
  bool done() const;

  /// "parsed" when every segment succeeded, else "errored" with the class
  /// and message of the first failed segment (by ordinal).
  struct verdict_t {
    std::string state;
    std::string error_class;
    std::string error_message;
  };
  verdict_t verdict() const;

  /// Index of the segment with plan id `segment_id`, or -1.
  int find(const std::string& segment_id) const;
};

} // namespace butlers
