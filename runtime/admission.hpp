#pragma once

// Admission at the ingest boundary (spec 002 §1): at most `max_in_flight`
// requests awaiting their commit, none while the node drains. A refused
// record gets its error in the batch's answer; an admitted one keeps what
// the hot path needs of it once stored.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/hot_queue.hpp"
#include "runtime/messages.hpp"

namespace butlers {

/// A batch of records at the ingest boundary: the answer for each, and for
/// each admitted one where it goes in the answer and what the hot path
/// needs of it.
struct ingest_batch {
  struct admitted_record {
    inbox_ref ref;
    std::string dedupe_key;
    std::string order_key;
    /// Context, text and tier (not the raw payload).
    std::shared_ptr<const inbox_record> record;
  };
  std::function<void(std::vector<append_result>&)> done;
  std::vector<append_result> out;
  /// Per admitted record, its index in `out`.
  std::vector<size_t> slots;
  std::vector<admitted_record> admitted;
  /// When the switchboard got the batch (Unix ns; set only while tracing).
  uint64_t handed_ns = 0;
};

class ingest_admission {
 public:
  explicit ingest_admission(uint32_t max_in_flight)
    : max_in_flight_(max_in_flight) {
    // nop
  }

  /// Admits each record of `recs` in order into `b` (whose `out` has one
  /// slot per record; a slot that carries an error already is skipped,
  /// e.g. a rate-limit refusal): refused ones get `draining` or
  /// `overload_rejected` in `b.out`, admitted ones are moved to the result.
  /// Returns how many were refused for want of room in `*overloaded`.
  std::vector<inbox_record> admit(ingest_batch& b,
                                  std::vector<inbox_record>& recs,
                                  bool draining, uint64_t* overloaded);

  /// `n` admitted requests got their answer.
  void leave(size_t n) {
    in_flight_ -= static_cast<uint32_t>(n);
  }

  uint32_t in_flight() const {
    return in_flight_;
  }

 private:
  uint32_t max_in_flight_;
  uint32_t in_flight_ = 0;
};

} // namespace butlers
