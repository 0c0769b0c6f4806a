#pragma once

// Fair admission to the classification pool (spec 001 §10.4): stored
// requests waiting for a worker, served by deficit round robin over their
// sources, so that one sender (or channel) flooding the node does not delay
// everyone behind it.
//
// - A source is (channel, sender) with `fairness = "sender"`, the channel
//   with "channel"; with "off" every request is of one source and the queue
//   is the plain FIFO it was before.
// - Policy tiers keep their priority (fairness "sender" and "channel"):
//   `high_priority` before `interactive` before `default`; fairness applies
//   among the sources of one tier.
// - Round robin: deficit round robin with equal quanta, one request, and a
//   cost of one per request: each source with requests takes one per round,
//   oldest first. A request whose source thread has
//   one with a worker waits in place (causal order per thread), and its
//   source's turn passes to the next.
// - Bounded: at most `capacity` requests, and at most `source_capacity` of
//   one source. Overflow, counted by reason:
//   * `source_full`: the source holds its share already; refused.
//   * `shed`: the queue is full and the source holds fewer than the
//     largest one of its tier (or a lower tier holds any): that source's
//     newest request makes room.
//   * `total_full`: the queue is full and the source is the largest one;
//     refused.
//   What is refused or shed is already stored and `accepted` in the inbox:
//   it stays claimable there and the cold path offers it again (the queue
//   loses nothing that was acknowledged).

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config_enums.hpp"
#include "runtime/metrics.hpp"
#include "runtime/request_context.hpp"

namespace butlers {

/// Where a fair queue reports: the number of sources with queued requests
/// and its overflow by reason. Any may be null.
struct fair_queue_metrics {
  gauge* sources = nullptr;
  counter* source_full = nullptr;
  counter* total_full = nullptr;
  counter* shed = nullptr;
};

/// The priority of a policy tier: 0 (`high_priority`) to 2 (`default`,
/// also for an unknown or empty tier).
uint8_t tier_rank(const std::string& tier);

/// How an offer to a fair queue went.
enum class fair_push { queued, source_full, total_full };

template<class T>
class fair_queue {
 public:
  /// A request and where it comes from.
  struct item {
    T value;
    /// Its source (see `source_of`).
    std::string source;
    /// See `tier_rank`.
    uint8_t tier = 2;
  };

  fair_queue(fairness_mode mode, size_t capacity, size_t source_capacity,
             fair_queue_metrics metrics = {});

  /// The source of a request from `ctx` in this queue's mode; "" for
  /// fairness "off" or without a context.
  std::string source_of(const request_context* ctx) const;

  /// Queues `x` unless there is no room (see above); when another source's
  /// newest request was shed to make room, it is moved to `*shed`.
  fair_push push(item x, std::optional<T>* shed);

  /// Takes up to `n` requests, tier by tier, round robin over the sources
  /// of a tier, each source's oldest for which `ready` holds.
  std::vector<T> take(size_t n, const std::function<bool(const T&)>& ready);

  size_t size() const {
    return size_;
  }

  /// Sources with queued requests.
  size_t sources() const {
    return queues_.size();
  }

  fairness_mode mode() const {
    return mode_;
  }

 private:
  struct source_queue {
    std::deque<T> items;
    uint8_t tier = 2;
  };

  /// The key of a source's queue: its tier, then its source.
  static std::string key_of(const item& x);

  /// The largest source of tier `tier` or a lower one that may give up a
  /// request for one of `x`'s source; null when none may.
  source_queue* victim_for(const item& x, size_t own);

  void remove_if_empty(const std::string& key);

  void report();

  fairness_mode mode_;
  size_t capacity_;
  size_t source_capacity_;
  fair_queue_metrics metrics_;
  size_t size_ = 0;
  std::unordered_map<std::string, source_queue> queues_;
  /// Per tier, the keys of its sources with requests, in round-robin order.
  std::array<std::deque<std::string>, 3> rounds_;
};

template<class T>
fair_queue<T>::fair_queue(fairness_mode mode, size_t capacity,
                          size_t source_capacity, fair_queue_metrics metrics)
  : mode_(mode), capacity_(capacity),
    source_capacity_(source_capacity == 0 ? capacity : source_capacity),
    metrics_(metrics) {
  // nop
}

template<class T>
std::string fair_queue<T>::source_of(const request_context* ctx) const {
  if (ctx == nullptr || mode_ == fairness_mode::off)
    return {};
  if (mode_ == fairness_mode::channel)
    return ctx->source_channel;
  return ctx->source_channel + '\x1f' + ctx->source_sender_identity;
}

template<class T>
std::string fair_queue<T>::key_of(const item& x) {
  return std::string(1, static_cast<char>('0' + x.tier)) + x.source;
}

template<class T>
typename fair_queue<T>::source_queue* fair_queue<T>::victim_for(const item& x,
                                                                size_t own) {
  // The lowest tier first: a request of a higher tier is worth more than
  // any of a lower one. Within x's own tier, only a source larger than x's
  // (after x) gives way.
  for (size_t t = rounds_.size(); t-- > x.tier;) {
    source_queue* largest = nullptr;
    for (auto& key : rounds_[t]) {
      auto& q = queues_.at(key);
      if (largest == nullptr || q.items.size() > largest->items.size())
        largest = &q;
    }
    if (largest == nullptr)
      continue;
    if (t > x.tier || largest->items.size() > own + 1)
      return largest;
    return nullptr;
  }
  return nullptr;
}

template<class T>
fair_push fair_queue<T>::push(item x, std::optional<T>* shed) {
  auto key = key_of(x);
  auto i = queues_.find(key);
  size_t own = i == queues_.end() ? 0 : i->second.items.size();
  // A share below the whole queue is its own reason; at the whole queue,
  // a source that fills it is the largest one of a full queue (below).
  if (mode_ != fairness_mode::off && source_capacity_ < capacity_
      && own >= source_capacity_) {
    if (metrics_.source_full != nullptr)
      metrics_.source_full->inc();
    return fair_push::source_full;
  }
  if (size_ >= capacity_) {
    auto* victim = mode_ == fairness_mode::off ? nullptr : victim_for(x, own);
    if (victim == nullptr) {
      if (metrics_.total_full != nullptr)
        metrics_.total_full->inc();
      return fair_push::total_full;
    }
    *shed = std::move(victim->items.back());
    victim->items.pop_back();
    --size_;
    if (metrics_.shed != nullptr)
      metrics_.shed->inc();
    if (victim->items.empty()) {
      // Found again by its key: the victim's tier and source.
      for (auto& [k, q] : queues_)
        if (&q == victim) {
          remove_if_empty(std::string{k});
          break;
        }
    }
    i = queues_.find(key);
  }
  if (i == queues_.end()) {
    i = queues_.emplace(key, source_queue{}).first;
    i->second.tier = x.tier;
    rounds_[x.tier].push_back(key);
  }
  i->second.items.push_back(std::move(x.value));
  ++size_;
  report();
  return fair_push::queued;
}

template<class T>
std::vector<T> fair_queue<T>::take(size_t n,
                                   const std::function<bool(const T&)>& ready) {
  std::vector<T> out;
  for (auto& round : rounds_) {
    // Each visit takes the source's oldest ready request and moves it to
    // the back of the round; a source with none ready is passed over. The
    // walk ends when a whole round passed without taking anything.
    size_t passed = 0;
    while (out.size() < n && !round.empty() && passed < round.size()) {
      auto key = std::move(round.front());
      round.pop_front();
      auto& q = queues_.at(key);
      auto hit = std::find_if(q.items.begin(), q.items.end(), ready);
      if (hit == q.items.end()) {
        ++passed;
        round.push_back(std::move(key));
        continue;
      }
      passed = 0;
      out.push_back(std::move(*hit));
      q.items.erase(hit);
      --size_;
      if (q.items.empty())
        queues_.erase(key);
      else
        round.push_back(std::move(key));
    }
  }
  report();
  return out;
}

template<class T>
void fair_queue<T>::remove_if_empty(const std::string& key) {
  auto i = queues_.find(key);
  if (i == queues_.end() || !i->second.items.empty())
    return;
  auto& round = rounds_[i->second.tier];
  round.erase(std::find(round.begin(), round.end(), key));
  queues_.erase(i);
}

template<class T>
void fair_queue<T>::report() {
  if (metrics_.sources != nullptr)
    metrics_.sources->set(static_cast<int64_t>(queues_.size()));
}

} // namespace butlers
