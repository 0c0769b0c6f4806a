#pragma once

// An in-memory connector_sink for unit tests of connector sources: records
// every submission, answers what the test scripts (default: accepted, or
// deduped for an identity seen before), keeps checkpoints in a map, and
// lets a test wait for what a source's thread did.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/connector_source.hpp"

namespace butlers::test {

class fake_connector_sink final : public connector_sink {
 public:
  /// Decides one submission's outcome; nullopt: the default (accepted, or
  /// deduped when its identity was accepted before).
  using decider = std::function<std::optional<submit_outcome>(const submission&,
                                                              size_t attempt)>;

  std::vector<submit_outcome> submit_all(
    std::vector<submission> batch) override {
    std::vector<submit_outcome> out;
    std::lock_guard<std::mutex> guard{mtx_};
    batches_.push_back(batch.size());
    for (auto& s : batch) {
      auto id = s.dedupe_hint.empty() ? s.envelope : s.dedupe_hint;
      auto attempt = ++attempts_[id];
      submitted_.push_back(s);
      std::optional<submit_outcome> o;
      if (decide_)
        o = decide_(s, attempt);
      if (!o) {
        o = submit_outcome{};
        o->status = stored_.insert(id).second ? submit_status::accepted
                                              : submit_status::deduped;
      }
      if (o->status == submit_status::accepted)
        stored_.insert(id);
      out.push_back(*o);
    }
    cv_.notify_all();
    return out;
  }

  void count(source_event what, uint64_t n) override {
    std::lock_guard<std::mutex> guard{mtx_};
    (what == source_event::ignored   ? ignored_
     : what == source_event::invalid ? invalid_
                                     : failed_)
      += n;
    cv_.notify_all();
  }

  checkpoint_read load_checkpoint(const std::string& key) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++loads_;
    checkpoint_read r;
    if (failing_loads_ > 0) {
      --failing_loads_;
      return r;
    }
    r.ok = true;
    if (auto i = checkpoints_.find(key); i != checkpoints_.end())
      r.value = i->second;
    return r;
  }

  bool store_checkpoint(const std::string& key,
                        const std::string& value) override {
    std::lock_guard<std::mutex> guard{mtx_};
    stores_.push_back(value);
    checkpoints_[key] = value;
    cv_.notify_all();
    return true;
  }

  connector_stop& stop() override {
    return stop_;
  }

  // -- scripting ----------------------------------------------------------

  void decide(decider d) {
    std::lock_guard<std::mutex> guard{mtx_};
    decide_ = std::move(d);
  }

  void set_checkpoint(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> guard{mtx_};
    checkpoints_[key] = value;
  }

  /// The next `n` checkpoint reads fail (database unavailable).
  void fail_loads(int n) {
    std::lock_guard<std::mutex> guard{mtx_};
    failing_loads_ = n;
  }

  // -- what happened --------------------------------------------------------

  std::vector<submission> submitted() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return submitted_;
  }

  /// The envelopes submitted, in order.
  std::vector<std::string> envelopes() const {
    std::vector<std::string> out;
    for (auto& s : submitted())
      out.push_back(s.envelope);
    return out;
  }

  std::vector<size_t> batch_sizes() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return batches_;
  }

  std::optional<std::string> checkpoint(const std::string& key) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = checkpoints_.find(key);
    return i == checkpoints_.end() ? std::nullopt
                                   : std::optional<std::string>{i->second};
  }

  /// Every checkpoint value stored, in order.
  std::vector<std::string> stores() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return stores_;
  }

  uint64_t invalid_drops() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return invalid_;
  }

  uint64_t ignored_drops() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return ignored_;
  }

  uint64_t failures() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return failed_;
  }

  size_t loads() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return loads_;
  }

  /// Waits until `pred()` holds (re-checked on every change and every 10
  /// ms) or `timeout` passes.
  bool wait(const std::function<bool()>& pred,
            std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (pred())
        return true;
      std::unique_lock<std::mutex> guard{mtx_};
      if (cv_.wait_until(guard,
                         std::min(deadline, std::chrono::steady_clock::now()
                                              + std::chrono::milliseconds{10}))
            == std::cv_status::timeout
          && std::chrono::steady_clock::now() >= deadline) {
        guard.unlock();
        return pred();
      }
    }
  }

 private:
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  connector_stop stop_;
  decider decide_;
  std::vector<submission> submitted_;
  std::vector<size_t> batches_;
  std::map<std::string, size_t> attempts_;
  std::set<std::string> stored_;
  std::map<std::string, std::string> checkpoints_;
  std::vector<std::string> stores_;
  uint64_t invalid_ = 0;
  uint64_t ignored_ = 0;
  uint64_t failed_ = 0;
  size_t loads_ = 0;
  int failing_loads_ = 0;
};

} // namespace butlers::test
