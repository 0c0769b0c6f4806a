#include "runtime/resilience.hpp"

#include <algorithm>

namespace butlers {

std::chrono::milliseconds backoff_delay(uint32_t attempt,
                                        std::chrono::milliseconds base,
                                        std::chrono::milliseconds cap,
                                        std::mt19937_64& rng) {
  auto shift = std::min<uint32_t>(attempt, 30);
  auto ceiling = std::min<int64_t>(cap.count(),
                                   base.count() * (int64_t{1} << shift));
  if (ceiling <= 0)
    return std::chrono::milliseconds{0};
  std::uniform_int_distribution<int64_t> dist{0, ceiling};
  return std::chrono::milliseconds{dist(rng)};
}

bool circuit_breaker::allow(clock::time_point now) {
  if (held_)
    return false;
  switch (state_) {
    case state::closed: return true;
    case state::open:
      if (now - opened_at_ < pause_)
        return false;
      move(state::half_open);
      probe_out_ = true;
      probe_sent_ = now;
      return true;
    case state::half_open:
      if (probe_out_ && now - probe_sent_ < pause_)
        return false;
      probe_out_ = true;
      probe_sent_ = now;
      return true;
  }
  return false;
}

void circuit_breaker::on_success() {
  failures_ = 0;
  probe_out_ = false;
  if (held_)
    return; // a late answer; the host is still gone
  if (state_ != state::closed)
    move(state::closed);
}

void circuit_breaker::on_failure(clock::time_point now) {
  probe_out_ = false;
  if (held_)
    return;
  ++failures_;
  if (state_ == state::half_open
      || (state_ == state::closed && failures_ >= threshold_)) {
    opened_at_ = now;
    move(state::open);
  }
}

void circuit_breaker::hold_open(clock::time_point now) {
  held_ = true;
  probe_out_ = false;
  opened_at_ = now;
  if (state_ != state::open)
    move(state::open);
}

void circuit_breaker::release() {
  if (!held_)
    return;
  held_ = false;
  failures_ = 0;
  probe_out_ = false;
  if (state_ != state::closed)
    move(state::closed);
}

bool circuit_breaker::take_transition(state& from, state& to) {
  if (!changed_)
    return false;
  changed_ = false;
  from = from_;
  to = state_;
  return true;
}

void circuit_breaker::move(state to) {
  if (!changed_)
    from_ = state_;
  state_ = to;
  changed_ = true;
}

const char* to_string(circuit_breaker::state x) {
  switch (x) {
    case circuit_breaker::state::closed: return "closed";
    case circuit_breaker::state::open: return "open";
    case circuit_breaker::state::half_open: return "half_open";
  }
  return "?";
}

} // namespace butlers
