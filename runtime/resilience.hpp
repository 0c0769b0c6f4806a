#pragma once

// The failure policy of spec 001 §10.3 as plain state machines: full-jitter
// exponential backoff between attempts, and a circuit breaker per target
// (closed → open after N consecutive failures → half-open after a pause →
// closed on one success, open again on a failure).

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace butlers {

/// Full jitter: a uniform draw from [0, min(cap, base · 2^attempt)], for
/// the pause before attempt `attempt + 1` (attempt counts from 1).
std::chrono::milliseconds backoff_delay(uint32_t attempt,
                                        std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap,
                                        std::mt19937_64& rng);

class circuit_breaker {
 public:
  using clock = std::chrono::steady_clock;
  enum class state { closed, open, half_open };

  circuit_breaker(uint32_t failure_threshold, std::chrono::milliseconds pause)
    : threshold_(failure_threshold), pause_(pause) {
    // nop
  }

  /// Whether a call may go out now. An open circuit turns half-open once
  /// its pause has passed and then lets exactly one probe through until
  /// that probe reports — or, if its outcome never comes (its request was
  /// abandoned), until another pause has passed.
  bool allow(clock::time_point now);

  /// The outcome of a call that went out. Failures are only those that say
  /// the target is unwell (target_unavailable, timeout), not bad requests.
  void on_success();
  void on_failure(clock::time_point now);

  /// The target has no live host (its node was lost): open, and stay open
  /// (no half-open probes) until `release`.
  void hold_open(clock::time_point now);

  /// A live host is back: closed, with a clean failure count.
  void release();

  bool held() const {
    return held_;
  }

  state current() const {
    return state_;
  }

  /// Set by every transition until read: for logs and metrics.
  bool take_transition(state& from, state& to);

 private:
  void move(state to);

  uint32_t threshold_;
  std::chrono::milliseconds pause_;
  state state_ = state::closed;
  uint32_t failures_ = 0;
  clock::time_point opened_at_{};
  bool probe_out_ = false;
  clock::time_point probe_sent_{};
  bool changed_ = false;
  bool held_ = false;
  state from_ = state::closed;
};

const char* to_string(circuit_breaker::state x);

} // namespace butlers
