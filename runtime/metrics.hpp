#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace butlers {

/// A monotonically increasing count. Lock-free; safe from any thread.
class counter {
 public:
  void inc(uint64_t n = 1) {
    value_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> value_{0};
};

/// A value that goes up and down. Lock-free; safe from any thread.
class gauge {
 public:
  void set(int64_t x) {
    value_.store(x, std::memory_order_relaxed);
  }
  void add(int64_t x) {
    value_.fetch_add(x, std::memory_order_relaxed);
  }
  int64_t value() const {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> value_{0};
};

/// A cumulative histogram over fixed upper bounds, Prometheus style.
/// Lock-free observation; safe from any thread.
class histogram {
 public:
  explicit histogram(std::vector<double> upper_bounds);

  void observe(double x);

  const std::vector<double>& upper_bounds() const {
    return bounds_;
  }
  /// Count of observations <= upper_bounds()[i] (not cumulative).
  uint64_t bucket(size_t i) const {
    return buckets_[i].load(std::memory_order_relaxed);
  }
  uint64_t count() const {
    return count_.load(std::memory_order_relaxed);
  }
  double sum() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_; // bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

/// Default latency buckets in milliseconds (0.25 ms .. 60 s).
std::vector<double> latency_buckets_ms();

/// Owns every metric of a node and renders them as Prometheus text. Metrics
/// are created once at start-up (creation takes a lock) and then updated
/// lock-free through the returned references, which stay valid for the
/// registry's lifetime. Names follow the spec with dots as underscores
/// (`butlers.switchboard.message_received` →
/// `butlers_switchboard_message_received`).
class metrics_registry {
 public:
  /// Returns the counter `name{labels}`, creating it on first use.
  /// `labels` is the rendered label set without braces, e.g. `path="hot"`.
  counter& get_counter(const std::string& name, const std::string& help,
                       const std::string& labels = "");
  gauge& get_gauge(const std::string& name, const std::string& help,
                   const std::string& labels = "");
  histogram& get_histogram(
    const std::string& name, const std::string& help,
    std::vector<double> upper_bounds = latency_buckets_ms(),
    const std::string& labels = "");

  /// Renders every metric in the Prometheus text exposition format 0.0.4.
  std::string render() const;

  /// One counter or gauge: its name, its rendered labels and its value.
  struct sample {
    std::string name;
    std::string labels;
    int64_t value = 0;
  };

  /// The current value of every counter and gauge (histograms left out),
  /// for readers that want numbers rather than the text format.
  std::vector<sample> samples() const;

 private:
  enum class kind { counter, gauge, histogram };
  struct entry {
    std::string name;
    std::string help;
    std::string labels;
    kind type;
    std::unique_ptr<counter> c;
    std::unique_ptr<gauge> g;
    std::unique_ptr<histogram> h;
  };
  entry* find(const std::string& name, const std::string& labels, kind type);
  template<class T, class Member, class... Args>
  T& get_or_add(const std::string& name, const std::string& help,
                const std::string& labels, kind type, Member member,
                Args&&... args);
  mutable std::mutex mtx_;
  std::deque<entry> entries_;
};

} // namespace butlers
