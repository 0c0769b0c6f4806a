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
  if (queue_.size() >= capacity_)
    return false;
  if (!order_key.empty())
    order_keys_[ref.request_id] = std::move(order_key);
  queued_ids_.insert(ref.request_id);
  queue_.push_back(queued_request{std::move(ref), std::move(record)});
  return true;
}

std::vector<queued_request> hot_queue::take(size_t n) {
  std::vector<queued_request> out;
  for (auto i = queue_.begin(); out.size() < n && i != queue_.end();) {
    // A request whose thread already has one with a worker waits (in
    // place) for it; later requests of other threads go ahead.
    std::string key;
    auto k = order_keys_.find(i->ref.request_id);
    if (k != order_keys_.end()) {
      key = k->second;
      if (held_keys_.count(key) > 0) {
        ++i;
        continue;
      }
      order_keys_.erase(k);
    }
    queued_ids_.erase(i->ref.request_id);
    ++active_;
    if (!key.empty() && classifying_.emplace(i->ref.request_id, key).second)
      ++held_keys_[key];
    out.push_back(std::move(*i));
    i = queue_.erase(i);
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
