#include "runtime/metrics.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace butlers {

histogram::histogram(std::vector<double> upper_bounds)
  : bounds_(std::move(upper_bounds)),
    buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()))
    throw std::logic_error("histogram bounds must be sorted");
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double x) {
  auto i = static_cast<size_t>(
    std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  auto micros = x <= 0 ? 0 : static_cast<uint64_t>(x * 1000.0);
  sum_micros_.fetch_add(micros, std::memory_order_relaxed);
}

double histogram::sum() const {
  return static_cast<double>(sum_micros_.load(std::memory_order_relaxed))
         / 1000.0;
}

std::vector<double> latency_buckets_ms() {
  return {0.25, 0.5, 1,    2.5,  5,    10,    25,    50,   100,
          250,  500, 1000, 2500, 5000, 10000, 30000, 60000};
}

metrics_registry::entry* metrics_registry::find(const std::string& name,
                                                const std::string& labels,
                                                kind type) {
  for (auto& e : entries_) {
    if (e.name == name && e.labels == labels) {
      if (e.type != type)
        throw std::logic_error("metric " + name
                               + " registered twice with "
                                 "different types");
      return &e;
    }
  }
  return nullptr;
}

template<class T, class Member, class... Args>
T& metrics_registry::get_or_add(const std::string& name,
                                const std::string& help,
                                const std::string& labels, kind type,
                                Member member, Args&&... args) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto e = find(name, labels, type))
    return *(e->*member);
  auto& e = entries_.emplace_back();
  e.name = name;
  e.help = help;
  e.labels = labels;
  e.type = type;
  e.*member = std::make_unique<T>(std::forward<Args>(args)...);
  return *(e.*member);
}

counter& metrics_registry::get_counter(const std::string& name,
                                       const std::string& help,
                                       const std::string& labels) {
  return get_or_add<counter>(name, help, labels, kind::counter, &entry::c);
}

gauge& metrics_registry::get_gauge(const std::string& name,
                                   const std::string& help,
                                   const std::string& labels) {
  return get_or_add<gauge>(name, help, labels, kind::gauge, &entry::g);
}

histogram& metrics_registry::get_histogram(const std::string& name,
                                           const std::string& help,
                                           std::vector<double> upper_bounds,
                                           const std::string& labels) {
  return get_or_add<histogram>(name, help, labels, kind::histogram, &entry::h,
                               std::move(upper_bounds));
}

namespace {

std::string format_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

std::string with_labels(const std::string& labels, const std::string& extra) {
  if (labels.empty() && extra.empty())
    return "";
  if (labels.empty())
    return "{" + extra + "}";
  if (extra.empty())
    return "{" + labels + "}";
  return "{" + labels + "," + extra + "}";
}

} // namespace

std::vector<metrics_registry::sample> metrics_registry::samples() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<sample> out;
  for (auto& e : entries_) {
    if (e.type == kind::counter)
      out.push_back({e.name, e.labels, static_cast<int64_t>(e.c->value())});
    else if (e.type == kind::gauge)
      out.push_back({e.name, e.labels, e.g->value()});
  }
  return out;
}

std::string metrics_registry::render() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::string out;
  std::vector<const entry*> sorted;
  for (auto& e : entries_)
    sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto x, auto y) {
    return x->name < y->name;
  });
  const std::string* last_name = nullptr;
  for (auto e : sorted) {
    if (!last_name || *last_name != e->name) {
      out += "# HELP " + e->name + " " + e->help + "\n";
      out += "# TYPE " + e->name + " ";
      out += e->type == kind::counter
               ? "counter"
               : (e->type == kind::gauge ? "gauge" : "histogram");
      out += "\n";
      last_name = &e->name;
    }
    switch (e->type) {
      case kind::counter:
        out += e->name + with_labels(e->labels, "") + " "
               + std::to_string(e->c->value()) + "\n";
        break;
      case kind::gauge:
        out += e->name + with_labels(e->labels, "") + " "
               + std::to_string(e->g->value()) + "\n";
        break;
      case kind::histogram: {
        auto& h = *e->h;
        uint64_t cumulative = 0;
        auto& bounds = h.upper_bounds();
        for (size_t i = 0; i < bounds.size(); ++i) {
          cumulative += h.bucket(i);
          out += e->name + "_bucket"
                 + with_labels(e->labels,
                               "le=\"" + format_double(bounds[i]) + "\"")
                 + " " + std::to_string(cumulative) + "\n";
        }
        cumulative += h.bucket(bounds.size());
        out += e->name + "_bucket" + with_labels(e->labels, "le=\"+Inf\"") + " "
               + std::to_string(cumulative) + "\n";
        out += e->name + "_sum" + with_labels(e->labels, "") + " "
               + format_double(h.sum()) + "\n";
        out += e->name + "_count" + with_labels(e->labels, "") + " "
               + std::to_string(cumulative) + "\n";
        break;
      }
    }
  }
  return out;
}

} // namespace butlers
