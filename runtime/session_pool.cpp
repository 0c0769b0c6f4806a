#include "runtime/session_pool.hpp"

#include <algorithm>

namespace butlers {

session_pool::session_pool(std::string butler, uint32_t max_concurrent_sessions,
                           uint32_t max_pending,
                           std::chrono::milliseconds timeout)
  : butler_(std::move(butler)),
    max_concurrent_sessions_(max_concurrent_sessions),
    max_pending_(max_pending), timeout_(timeout) {
  // nop
}

std::optional<pool_rejection> session_pool::admit(
  std::string_view trigger_source, std::string_view origin_butler) const {
  auto slots = max_concurrent_sessions_;
  if (trigger_source == "trigger" && origin_butler == butler_
      && active() >= slots)
    return pool_rejection{"self-trigger while all " + std::to_string(slots)
                            + " session slots of '" + butler_
                            + "' are busy would deadlock",
                          false};
  auto held_now = size_t{queued()} + active();
  if (held_now >= size_t{max_pending_} + slots)
    return pool_rejection{"butler '" + butler_ + "' is full: "
                            + std::to_string(active()) + " sessions running, "
                            + std::to_string(queued()) + " of max_pending "
                            + std::to_string(max_pending_) + " waiting",
                          true};
  return std::nullopt;
}

bool session_pool::begin_append() {
  // Should this node die while the item waits `running`, the item has one
  // attempt counted that it did not use (of max_attempts; recovery counts
  // the next one).
  auto started = active() + queued() < 2 * max_concurrent_sessions_;
  ++appending_;
  return started;
}

void session_pool::end_append() {
  --appending_;
}

void session_pool::enqueue(held_item held) {
  pending_.push_back(std::move(held));
}

uint32_t session_pool::room() const {
  auto room = int64_t{max_pending_} + max_concurrent_sessions_
              - int64_t{queued()} - active();
  return room > 0 ? static_cast<uint32_t>(room) : 0;
}

std::optional<pool_start> session_pool::next() {
  if (active() >= max_concurrent_sessions_ || pending_.empty())
    return std::nullopt;
  pool_start out{std::move(pending_.front()), false};
  pending_.pop_front();
  out.abandon = out.held.item.attempts >= max_attempts;
  return out;
}

bool session_pool::start(held_item held, caf::actor session,
                         clock::time_point now) {
  auto id = held.item.work_id;
  running_.emplace(std::move(id),
                   running_session{std::move(held), std::move(session),
                                   clock::now(), now + timeout_});
  if (timeout_armed_)
    return false;
  timeout_armed_ = true;
  return true;
}

running_session* session_pool::running(const std::string& work_id) {
  auto i = running_.find(work_id);
  return i != running_.end() ? &i->second : nullptr;
}

held_item* session_pool::waiting(const std::string& work_id) {
  for (auto& h : pending_)
    if (h.item.work_id == work_id)
      return &h;
  return nullptr;
}

std::optional<running_session> session_pool::finish(const std::string& work_id,
                                                    int64_t lease_token) {
  auto i = running_.find(work_id);
  if (i == running_.end())
    return std::nullopt;
  auto out = std::move(i->second);
  running_.erase(i);
  finishing_.emplace(work_id, lease_token);
  return out;
}

std::optional<held_item> session_pool::take_waiting(
  const std::string& work_id) {
  auto i = std::find_if(pending_.begin(), pending_.end(),
                        [&](const held_item& h) {
                          return h.item.work_id == work_id;
                        });
  if (i == pending_.end())
    return std::nullopt;
  auto out = std::move(*i);
  pending_.erase(i);
  return out;
}

void session_pool::written(const std::string& work_id) {
  finishing_.erase(work_id);
}

bool session_pool::holds(const std::string& work_id) const {
  if (running_.count(work_id) > 0)
    return true;
  return std::any_of(pending_.begin(), pending_.end(), [&](const held_item& h) {
    return h.item.work_id == work_id;
  });
}

bool session_pool::holds_lease(const std::string& work_id) const {
  return holds(work_id) || finishing_.count(work_id) > 0;
}

pool_timeouts session_pool::on_timeout(clock::time_point now) {
  pool_timeouts out;
  timeout_armed_ = false;
  auto next = clock::time_point::max();
  for (auto& [id, r] : running_) {
    if (now >= r.timeout_at)
      out.expired.push_back(id);
    else
      next = std::min(next, r.timeout_at);
  }
  if (next != clock::time_point::max()) {
    timeout_armed_ = true;
    out.next = next - now;
  }
  return out;
}

std::vector<work_item> session_pool::leases() const {
  std::vector<work_item> out;
  for (auto& h : pending_)
    out.push_back(h.item);
  for (auto& [id, r] : running_)
    out.push_back(r.held.item);
  for (auto& [id, token] : finishing_) {
    work_item item;
    item.work_id = id;
    item.butler = butler_;
    item.lease_token = token;
    out.push_back(std::move(item));
  }
  return out;
}

} // namespace butlers
