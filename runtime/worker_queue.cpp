#include "runtime/worker_queue.hpp"

#include <algorithm>

namespace butlers {

worker_queue::worker_queue(worker_limits limits,
                           std::function<std::string()> make_token)
  : limits_(limits), make_token_(std::move(make_token)) {
  // nop
}

void worker_queue::add(const std::string& work_id) {
  if (!items_.emplace(work_id, entry{}).second)
    return;
  waiting_.push_back(work_id);
}

void worker_queue::remove(const std::string& work_id) {
  // Its name in `waiting_` is skipped from now on.
  items_.erase(work_id);
}

bool worker_queue::contains(const std::string& work_id) const {
  return items_.count(work_id) > 0;
}

std::chrono::milliseconds worker_queue::clamp(
  std::chrono::milliseconds visibility) const {
  if (visibility.count() <= 0)
    return limits_.default_visibility;
  return std::clamp(visibility, limits_.min_visibility, limits_.max_visibility);
}

std::vector<worker_handout> worker_queue::take(
  uint32_t max, std::chrono::milliseconds visibility, time_point now) {
  std::vector<worker_handout> out;
  auto until = now + clamp(visibility);
  for (auto i = waiting_.begin(); i != waiting_.end() && out.size() < max;) {
    auto e = items_.find(*i);
    if (e == items_.end() || e->second.held) {
      i = waiting_.erase(i);
      continue;
    }
    if (e->second.until > now) {
      ++i; // nacked with a delay that has not passed
      continue;
    }
    auto& en = e->second;
    en.held = true;
    en.token = make_token_();
    en.until = until;
    ++en.deliveries;
    out.push_back(worker_handout{e->first, en.token, en.deliveries});
    i = waiting_.erase(i);
  }
  return out;
}

worker_check worker_queue::check(const std::string& work_id,
                                 const std::string& token) const {
  auto e = items_.find(work_id);
  if (e == items_.end())
    return worker_check::unknown;
  if (!e->second.held || e->second.token != token)
    return worker_check::stale;
  return worker_check::ok;
}

worker_check worker_queue::ack(const std::string& work_id,
                               const std::string& token) {
  auto c = check(work_id, token);
  if (c == worker_check::ok)
    items_.erase(work_id);
  return c;
}

std::optional<worker_dead> worker_queue::fail(
  const std::string& work_id, entry& e, std::chrono::milliseconds delay,
  std::string error_class, std::string message, time_point now) {
  if (e.deliveries >= limits_.max_deliveries) {
    worker_dead dead{work_id, std::move(error_class), std::move(message),
                     e.deliveries};
    items_.erase(work_id);
    return dead;
  }
  e.held = false;
  e.token.clear();
  e.until = now + std::max(delay, std::chrono::milliseconds{0});
  waiting_.push_back(work_id);
  return std::nullopt;
}

worker_nack_result worker_queue::nack(const std::string& work_id,
                                      const std::string& token, bool retryable,
                                      std::chrono::milliseconds delay,
                                      std::string error_class,
                                      std::string message, time_point now) {
  worker_nack_result out;
  out.check = check(work_id, token);
  if (out.check != worker_check::ok)
    return out;
  if (!retryable) {
    items_.erase(work_id);
    out.failed = true;
    return out;
  }
  auto& e = items_.at(work_id);
  out.dead = fail(work_id, e, delay, std::move(error_class), std::move(message),
                  now);
  out.requeued = !out.dead;
  return out;
}

worker_check worker_queue::extend(const std::string& work_id,
                                  const std::string& token,
                                  std::chrono::milliseconds visibility,
                                  time_point now) {
  auto c = check(work_id, token);
  if (c == worker_check::ok)
    items_.at(work_id).until = now + clamp(visibility);
  return c;
}

worker_expiry worker_queue::expire(time_point now) {
  worker_expiry out;
  std::vector<std::string> lapsed;
  for (auto& [id, e] : items_)
    if (e.held && e.until <= now)
      lapsed.push_back(id);
  // Oldest deadline first, so requeued items keep their order.
  std::sort(lapsed.begin(), lapsed.end(),
            [this](const std::string& x, const std::string& y) {
              return items_.at(x).until < items_.at(y).until;
            });
  for (auto& id : lapsed) {
    auto& e = items_.at(id);
    auto dead = fail(id, e, std::chrono::milliseconds{0}, "timeout",
                     "no ack within the visibility timeout (delivery "
                       + std::to_string(e.deliveries) + " of "
                       + std::to_string(limits_.max_deliveries) + ")",
                     now);
    if (dead)
      out.dead.push_back(std::move(*dead));
    else
      out.requeued.push_back(id);
  }
  return out;
}

std::optional<worker_queue::time_point> worker_queue::next_deadline(
  time_point now) const {
  std::optional<time_point> next;
  for (auto& [id, e] : items_) {
    if (!e.held && e.until <= now)
      continue;
    if (!next || e.until < *next)
      next = e.until;
  }
  return next;
}

size_t worker_queue::ready(time_point now) const {
  size_t n = 0;
  for (auto& [id, e] : items_)
    if (!e.held && e.until <= now)
      ++n;
  return n;
}

size_t worker_queue::in_flight() const {
  size_t n = 0;
  for (auto& [id, e] : items_)
    n += e.held ? 1 : 0;
  return n;
}

} // namespace butlers
