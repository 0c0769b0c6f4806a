#include "runtime/hot_queue.hpp"

namespace butlers {

std::string order_key_of(const request_context& ctx) {
  if (ctx.source_thread_identity.empty())
    return {};
  return ctx.source_channel + '\x1f' + ctx.source_endpoint_identity + '\x1f'
         + ctx.source_thread_identity;
}

bool hot_queue::offer(inbox_ref ref, std::string order_key,
                      std::shared_ptr<const inbox_record> record) {
  if (holds(ref.request_id))
    return true;
  fair_queue<queued_request>::item x;
  if (record) {
    x.source = queue_.source_of(&record->context);
    if (queue_.mode() != fairness_mode::off)
      x.tier = tier_rank(record->policy_tier);
  }
  auto id = ref.request_id;
  x.value = queued_request{std::move(ref), std::move(record),
                           std::move(order_key)};
  std::optional<queued_request> shed;
  if (queue_.push(std::move(x), &shed) != fair_push::queued)
    return false;
  if (shed) {
    queued_ids_.erase(shed->ref.request_id);
    ++shed_;
  }
  queued_ids_.insert(std::move(id));
  return true;
}

std::vector<queued_request> hot_queue::take(size_t n) {
  // A request whose thread already has one with a worker waits (in place)
  // for it; later requests of other threads go ahead. One at a time: a
  // request taken holds its thread for the next.
  auto ready = [this](const queued_request& q) {
    return q.order_key.empty() || held_keys_.count(q.order_key) == 0;
  };
  std::vector<queued_request> out;
  while (out.size() < n) {
    auto one = queue_.take(1, ready);
    if (one.empty())
      break;
    auto& q = one.front();
    queued_ids_.erase(q.ref.request_id);
    ++active_;
    if (!q.order_key.empty()
        && classifying_.emplace(q.ref.request_id, q.order_key).second)
      ++held_keys_[q.order_key];
    out.push_back(std::move(q));
  }
  return out;
}

void hot_queue::done(const std::string& request_id) {
  if (committing_.erase(request_id) == 0)
    --active_;
  auto c = classifying_.find(request_id);
  if (c == classifying_.end())
    return;
  auto h = held_keys_.find(c->second);
  if (h != held_keys_.end() && --h->second == 0)
    held_keys_.erase(h);
  classifying_.erase(c);
}

bool hot_queue::free_worker(const std::string& request_id) {
  if (!committing_.insert(request_id).second)
    return false;
  --active_;
  return true;
}

bool hot_queue::holds(const std::string& request_id) const {
  return queued_ids_.count(request_id) > 0 || classifying_.count(request_id) > 0
         || committing_.count(request_id) > 0;
}

} // namespace butlers
