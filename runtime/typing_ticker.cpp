#include "runtime/typing_ticker.hpp"

#include <algorithm>
#include <vector>

namespace butlers {

typing_ticker::typing_ticker(size_t capacity, count_fn count)
  : capacity_(std::max<size_t>(capacity, 1)), count_(std::move(count)) {}

typing_ticker::~typing_ticker() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

bool typing_ticker::start(const std::string& key,
                          std::chrono::milliseconds interval,
                          std::chrono::milliseconds max_for, send_fn send) {
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return false;
    auto i = jobs_.find(key);
    if (i == jobs_.end() && jobs_.size() >= capacity_) {
      if (count_)
        count_("refused");
      return false;
    }
    jobs_[key] = job{now, now + max_for, interval, std::move(send)};
    if (!thread_.joinable())
      thread_ = std::thread{[this] {
        run();
      }};
  }
  changed_.notify_all();
  return true;
}

void typing_ticker::stop(const std::string& key) {
  std::lock_guard<std::mutex> guard{mtx_};
  jobs_.erase(key);
}

size_t typing_ticker::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return jobs_.size();
}

void typing_ticker::run() {
  std::unique_lock<std::mutex> guard{mtx_};
  while (!stopping_) {
    auto now = std::chrono::steady_clock::now();
    // Drop what ran out; collect what is due.
    std::vector<std::pair<std::string, send_fn>> due;
    auto wake = now + std::chrono::hours{1};
    for (auto i = jobs_.begin(); i != jobs_.end();) {
      auto& j = i->second;
      if (now >= j.until) {
        i = jobs_.erase(i);
        continue;
      }
      if (now >= j.next) {
        due.emplace_back(i->first, j.send);
        j.next = now + j.interval;
      }
      wake = std::min(wake, j.next);
      ++i;
    }
    if (due.empty()) {
      changed_.wait_until(guard, wake);
      continue;
    }
    guard.unlock();
    for (auto& [key, send] : due) {
      bool ok = send(stopping_);
      if (count_)
        count_(ok ? "sent" : "failed");
      if (stopping_)
        break;
    }
    guard.lock();
  }
}

} // namespace butlers
