// The tracer of runtime/tracing.hpp: a bounded span queue drained by one
// export thread that posts OTLP/HTTP batches through the shared libcurl
// client.

#include <algorithm>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "runtime/config.hpp"
#include "runtime/http_client.hpp"
#include "runtime/metrics.hpp"
#include "runtime/tracing.hpp"

namespace butlers {

namespace {

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string{s.substr(b, e - b + 1)};
}

/// OTLP/HTTP: 429, 502, 503, 504 and transport failures are retryable.
bool retryable(const http_response& r) {
  if (r.failure != http_failure::none)
    return r.failure == http_failure::connect
           || r.failure == http_failure::timeout
           || r.failure == http_failure::protocol;
  return r.status == 429 || r.status == 502 || r.status == 503
         || r.status == 504;
}

constexpr auto dropped_help = "Spans not exported, by reason (queue_full: "
                              "the tracer's queue was full; export_failed: "
                              "the receiver did not take the batch)";

} // namespace

std::vector<std::pair<std::string, std::string>> parse_otlp_headers(
  std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!s.empty()) {
    auto end = s.find_first_of(",\n");
    auto item = s.substr(0, end);
    s = end == std::string_view::npos ? std::string_view{} : s.substr(end + 1);
    auto sep = item.find_first_of(":=");
    if (sep == std::string_view::npos)
      continue;
    auto name = trim(item.substr(0, sep));
    auto value = trim(item.substr(sep + 1));
    if (!name.empty())
      out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

tracer_options tracer_options_of(const telemetry_config& cfg,
                                 const std::string& node_name) {
  tracer_options o;
  o.otlp_endpoint = cfg.otlp_endpoint;
  o.encoding = cfg.encoding;
  o.sample_ratio = cfg.sample_ratio;
  o.queue_capacity = cfg.queue_capacity;
  o.batch_max_spans = cfg.batch_max_spans;
  o.batch_interval = std::chrono::milliseconds{cfg.batch_interval_ms};
  o.export_timeout = std::chrono::milliseconds{cfg.export_timeout_ms};
  if (!cfg.headers_env.empty())
    if (auto v = std::getenv(cfg.headers_env.c_str()))
      o.headers = parse_otlp_headers(v);
  o.resource.service_instance_id = node_name;
  return o;
}

tracer::tracer() = default;

tracer::tracer(tracer_options o, metrics_registry* metrics)
  : opts_(std::move(o)) {
  enabled_ = !opts_.otlp_endpoint.empty();
  if (!enabled_)
    return;
  opts_.queue_capacity = std::max<size_t>(opts_.queue_capacity, 1);
  opts_.batch_max_spans = std::max<size_t>(opts_.batch_max_spans, 1);
  opts_.max_attempts = std::max(opts_.max_attempts, 1);
  url_ = opts_.otlp_endpoint;
  while (!url_.empty() && url_.back() == '/')
    url_.pop_back();
  url_ += "/v1/traces";
  if (metrics != nullptr) {
    exported_metric_ = &metrics
                          ->get_counter("butlers_trace_spans_exported_total",
                                        "Spans the OTLP receiver accepted");
    dropped_full_metric_ = &metrics
                              ->get_counter("butlers_trace_spans_dropped_total",
                                            dropped_help,
                                            R"(reason="queue_full")");
    dropped_failed_metric_
      = &metrics->get_counter("butlers_trace_spans_dropped_total", dropped_help,
                              R"(reason="export_failed")");
  }
  thread_ = std::thread{[this] {
    run();
  }};
}

tracer::~tracer() {
  if (!thread_.joinable())
    return;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool tracer::record(span&& s) {
  if (!enabled_ || (s.flags & 0x01) == 0)
    return false;
  if (s.end_ns == 0)
    s.end();
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (queue_.size() >= opts_.queue_capacity) {
      dropped_full_.fetch_add(1, std::memory_order_relaxed);
      if (dropped_full_metric_ != nullptr)
        dropped_full_metric_->inc();
      return false;
    }
    queue_.push_back(std::move(s));
    wake = queue_.size() == opts_.batch_max_spans;
  }
  if (wake)
    cv_.notify_one();
  return true;
}

void tracer::flush_soon() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    flush_ = true;
  }
  cv_.notify_one();
}

void tracer::run() {
  std::vector<span> batch;
  for (;;) {
    bool final = false;
    {
      std::unique_lock<std::mutex> lock{mtx_};
      cv_.wait_for(lock, opts_.batch_interval, [this] {
        return stop_ || flush_ || queue_.size() >= opts_.batch_max_spans;
      });
      final = stop_;
      if (queue_.empty()) {
        flush_ = false;
        if (final)
          return;
        continue;
      }
      auto n = std::min(queue_.size(), opts_.batch_max_spans);
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + n));
      queue_.erase(queue_.begin(), queue_.begin() + n);
      if (queue_.empty())
        flush_ = false;
    }
    auto n = batch.size();
    if (export_batch(batch, final)) {
      exported_.fetch_add(n, std::memory_order_relaxed);
      if (exported_metric_ != nullptr)
        exported_metric_->inc(n);
    } else {
      dropped_failed_.fetch_add(n, std::memory_order_relaxed);
      if (dropped_failed_metric_ != nullptr)
        dropped_failed_metric_->inc(n);
    }
    batch.clear();
  }
}

bool tracer::export_batch(const std::vector<span>& batch, bool final) {
  http_request req;
  req.method = "POST";
  req.url = url_;
  bool json = opts_.encoding == otlp_encoding::json;
  req.headers.emplace_back("Content-Type", json ? "application/json"
                                                : "application/x-protobuf");
  for (auto& h : opts_.headers)
    req.headers.push_back(h);
  req.body = json ? encode_otlp_json(opts_.resource, batch)
                  : encode_otlp_protobuf(opts_.resource, batch);
  req.timeout = opts_.export_timeout;
  req.connect_timeout = std::min(opts_.export_timeout,
                                 std::chrono::milliseconds{2000});
  req.max_response_bytes = 64 * 1024;
  auto backoff = opts_.retry_backoff;
  int attempts = final ? 1 : opts_.max_attempts;
  for (int attempt = 1;; ++attempt) {
    auto resp = shared_http_client().perform(req);
    if (resp.failure == http_failure::none && resp.status >= 200
        && resp.status < 300) {
      if (failing_)
        spdlog::info("tracing: export to {} works again", url_);
      failing_ = false;
      return true;
    }
    if (attempt >= attempts || !retryable(resp)) {
      if (!failing_) // once per outage, not per batch
        spdlog::warn("tracing: export to {} failed ({}); dropping spans until "
                     "it answers",
                     url_,
                     resp.failure != http_failure::none
                       ? std::string{to_string(resp.failure)}
                       : "HTTP " + std::to_string(resp.status));
      failing_ = true;
      return false;
    }
    auto wait = backoff;
    if (auto ra = resp.retry_after())
      wait = std::min<std::chrono::milliseconds>(*ra, std::chrono::seconds{5});
    backoff *= 2;
    std::unique_lock<std::mutex> lock{mtx_};
    if (cv_.wait_for(lock, wait, [this] {
          return stop_;
        }))
      attempts = std::min(attempts, attempt + 1); // stopping: one last try
  }
}

} // namespace butlers
