#include "runtime/reaction_gate.hpp"

#include <algorithm>
#include <charconv>

namespace butlers {

reaction_gate::reaction_gate() : reaction_gate(options{}) {}

reaction_gate::reaction_gate(options opts) : opts_(opts) {
  if (opts_.capacity == 0)
    opts_.capacity = 1;
}

reaction_gate::entry& reaction_gate::touch(const std::string& request_id) {
  auto i = entries_.find(request_id);
  if (i != entries_.end())
    return i->second;
  // Room first: evicting after the insert could forget the new entry
  // itself (it has nothing in flight yet) and hand back a dangling one.
  evict(opts_.capacity - 1);
  order_.push_back(request_id);
  return entries_[request_id];
}

void reaction_gate::evict(size_t keep) {
  // Oldest first; one with a reaction in flight goes to the back (there
  // are at most as many of those as deliveries running).
  for (size_t turns = order_.size(); entries_.size() > keep && turns > 0;
       --turns) {
    auto key = std::move(order_.front());
    order_.pop_front();
    auto i = entries_.find(key);
    if (i == entries_.end())
      continue;
    if (!i->second.pending.empty()) {
      order_.push_back(std::move(key));
      continue;
    }
    entries_.erase(i);
  }
  // Still over: every remembered message has a reaction in flight (or one
  // whose delivery never came). Forget the oldest anyway; a reaction of one
  // still waits out its turn and goes out (the ledger orders it).
  while (entries_.size() > keep && !order_.empty()) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

bool reaction_gate::earlier_pending(const entry& e, int64_t rank) const {
  return std::any_of(e.pending.begin(), e.pending.end(), [rank](int64_t r) {
    return r < rank;
  });
}

bool reaction_gate::announce(const std::string& request_id, int64_t rank) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& e = touch(request_id);
  if (rank <= e.highest)
    return false;
  e.highest = rank;
  e.pending.push_back(rank);
  return true;
}

bool reaction_gate::begin(const std::string& request_id, int64_t rank) {
  std::unique_lock<std::mutex> guard{mtx_};
  auto* e = &touch(request_id);
  auto mine = std::find(e->pending.begin(), e->pending.end(), rank);
  if (mine == e->pending.end()) {
    // Announced as overtaken, or never announced here (a delivery run again
    // after a restart, or handed to another node's messenger).
    if (rank <= e->highest) {
      ++overtaken_;
      return false;
    }
    e->highest = rank;
    e->pending.push_back(rank);
  }
  auto deadline = std::chrono::steady_clock::now() + opts_.turn_wait;
  ended_.wait_until(guard, deadline, [&] {
    e = &touch(request_id);
    return !earlier_pending(*e, rank);
  });
  e = &touch(request_id);
  // Those still ahead after the wait never came (their work item was not
  // stored) or are stuck: they are overtaken now.
  e->pending.erase(std::remove_if(e->pending.begin(), e->pending.end(),
                                  [rank](int64_t r) {
                                    return r < rank;
                                  }),
                   e->pending.end());
  if (rank <= e->sent) {
    auto i = std::find(e->pending.begin(), e->pending.end(), rank);
    if (i != e->pending.end())
      e->pending.erase(i);
    ++overtaken_;
    guard.unlock();
    ended_.notify_all();
    return false;
  }
  if (std::find(e->pending.begin(), e->pending.end(), rank) == e->pending.end())
    e->pending.push_back(rank); // forgotten while waiting (capacity)
  return true;
}

void reaction_gate::end(const std::string& request_id, int64_t rank,
                        bool sent) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& e = touch(request_id);
    auto i = std::find(e.pending.begin(), e.pending.end(), rank);
    if (i != e.pending.end())
      e.pending.erase(i);
    if (sent)
      e.sent = std::max(e.sent, rank);
    e.highest = std::max(e.highest, rank);
  }
  ended_.notify_all();
}

bool reaction_gate::latest(const std::string& request_id, int64_t rank) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = entries_.find(request_id);
  return i == entries_.end() || i->second.highest <= rank;
}

uint64_t reaction_gate::overtaken() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return overtaken_;
}

size_t reaction_gate::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return entries_.size();
}

reaction_turn::reaction_turn(reaction_gate* gate, std::string request_id,
                             int64_t rank)
  : gate_(gate), request_id_(std::move(request_id)), rank_(rank) {
  if (gate_ != nullptr)
    overtaken_ = !gate_->begin(request_id_, rank_);
}

reaction_turn::~reaction_turn() {
  if (gate_ != nullptr && !overtaken_)
    gate_->end(request_id_, rank_, sent_);
}

std::optional<segment_reaction> reaction_of_segment(std::string_view segment) {
  constexpr std::string_view prefix = "notify:react:";
  if (segment.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  segment.remove_prefix(prefix.size());
  auto colon = segment.find(':');
  if (colon == std::string_view::npos)
    return std::nullopt;
  auto state = lifecycle_state_of(segment.substr(0, colon));
  if (!state)
    return std::nullopt;
  auto digits = segment.substr(colon + 1);
  int64_t at_us = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(),
                                   at_us);
  if (ec != std::errc{} || end != digits.data() + digits.size())
    return std::nullopt;
  return segment_reaction{*state, reaction_rank(*state, at_us)};
}

} // namespace butlers
