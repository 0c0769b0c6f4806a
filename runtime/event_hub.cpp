#include "runtime/event_hub.hpp"

#include <algorithm>

namespace butlers {

event_hub::event_hub(size_t max_subscribers, size_t capacity, counter* dropped)
  : max_subscribers_(max_subscribers), capacity_(std::max<size_t>(1, capacity)),
    dropped_metric_(dropped) {
  // nop
}

event_hub::subscriber_ptr event_hub::subscribe(const std::string& thread_id,
                                               write_fn write) {
  auto sub = std::make_shared<subscriber>();
  sub->thread_id = thread_id;
  sub->write = std::move(write);
  sub->capacity = capacity_;
  std::lock_guard<std::mutex> guard{mtx_};
  if (count_ >= max_subscribers_)
    return nullptr;
  ++count_;
  if (thread_id.empty()) {
    summary_.push_back(sub);
    summary_count_ = summary_.size();
  } else {
    threads_[thread_id].push_back(sub);
  }
  return sub;
}

void event_hub::unsubscribe(const subscriber_ptr& sub) {
  {
    std::lock_guard<std::mutex> guard{sub->mtx};
    sub->closed = true;
    sub->frames.clear();
    sub->latest.clear();
    sub->order.clear();
  }
  std::lock_guard<std::mutex> guard{mtx_};
  auto drop = [&](std::vector<subscriber_ptr>& xs) {
    auto i = std::find(xs.begin(), xs.end(), sub);
    if (i == xs.end())
      return false;
    xs.erase(i);
    --count_;
    return true;
  };
  if (sub->thread_id.empty()) {
    drop(summary_);
    summary_count_ = summary_.size();
    return;
  }
  auto i = threads_.find(sub->thread_id);
  if (i != threads_.end() && drop(i->second) && i->second.empty())
    threads_.erase(i);
}

bool event_hub::wants_thread(const std::string& thread_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return threads_.count(thread_id) > 0;
}

size_t event_hub::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return count_;
}

void event_hub::publish_thread(const std::string& thread_id,
                               const std::string& frame) {
  std::vector<subscriber_ptr> subs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = threads_.find(thread_id);
    if (i == threads_.end())
      return;
    subs = i->second;
  }
  for (auto& sub : subs)
    enqueue(sub, {}, frame);
}

void event_hub::publish_summary(const std::string& thread_id,
                                const std::string& frame) {
  if (!wants_summary())
    return;
  std::vector<subscriber_ptr> subs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    subs = summary_;
  }
  for (auto& sub : subs)
    enqueue(sub, thread_id, frame);
}

void event_hub::enqueue(const subscriber_ptr& sub, const std::string& key,
                        const std::string& frame) {
  {
    std::lock_guard<std::mutex> guard{sub->mtx};
    if (sub->closed)
      return;
    if (key.empty()) {
      if (sub->frames.size() >= sub->capacity) {
        ++sub->dropped;
        ++dropped_;
        if (dropped_metric_)
          dropped_metric_->inc();
        return;
      }
      sub->frames.push_back(frame);
    } else {
      auto i = sub->latest.find(key);
      if (i != sub->latest.end()) {
        i->second = frame; // last write wins
      } else if (sub->latest.size() >= sub->capacity) {
        ++sub->dropped;
        ++dropped_;
        if (dropped_metric_)
          dropped_metric_->inc();
        return;
      } else {
        sub->latest.emplace(key, frame);
        sub->order.push_back(key);
      }
    }
  }
  pump(sub);
}

void event_hub::pump(const subscriber_ptr& sub) {
  std::string chunk;
  write_fn write;
  {
    std::lock_guard<std::mutex> guard{sub->mtx};
    if (sub->writing || sub->closed)
      return;
    for (auto& f : sub->frames)
      chunk += f;
    sub->frames.clear();
    for (auto& key : sub->order)
      chunk += sub->latest[key];
    sub->latest.clear();
    sub->order.clear();
    if (chunk.empty() || !sub->write)
      return;
    sub->writing = true;
    ++sub->sent;
    write = sub->write;
  }
  write(std::move(chunk), [this, sub](bool ok) {
    {
      std::lock_guard<std::mutex> guard{sub->mtx};
      sub->writing = false;
    }
    if (!ok) {
      unsubscribe(sub);
      return;
    }
    pump(sub);
  });
}

void event_hub::close_all() {
  std::vector<subscriber_ptr> subs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    subs = summary_;
    for (auto& [id, xs] : threads_)
      subs.insert(subs.end(), xs.begin(), xs.end());
    summary_.clear();
    threads_.clear();
    summary_count_ = 0;
    count_ = 0;
  }
  for (auto& sub : subs) {
    write_fn released;
    {
      std::lock_guard<std::mutex> guard{sub->mtx};
      sub->closed = true;
      sub->frames.clear();
      sub->latest.clear();
      sub->order.clear();
      released = std::move(sub->write);
      sub->write = nullptr;
    }
  }
}

void event_hub::heartbeat() {
  std::vector<subscriber_ptr> subs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    subs = summary_;
    for (auto& [id, xs] : threads_)
      subs.insert(subs.end(), xs.begin(), xs.end());
  }
  for (auto& sub : subs) {
    write_fn write;
    {
      std::lock_guard<std::mutex> guard{sub->mtx};
      if (sub->writing || sub->closed || !sub->frames.empty()
          || !sub->order.empty() || !sub->write)
        continue;
      sub->writing = true;
      write = sub->write;
    }
    write(": keep-alive\n\n", [this, sub](bool ok) {
      {
        std::lock_guard<std::mutex> guard{sub->mtx};
        sub->writing = false;
      }
      if (!ok) {
        unsubscribe(sub);
        return;
      }
      pump(sub);
    });
  }
}

} // namespace butlers
