#pragma once

// Distributed tracing (spec 001 §12.3): W3C trace context, span records, and
// the per-node tracer that exports spans as OTLP/HTTP from its own thread.
//
// How a request's trace is named without shared state: every component that
// knows a request id (and the envelope's traceparent, which travels with the
// request context) computes the same ids with `request_trace_for`:
// - trace id: the envelope traceparent's trace id when there is a valid one,
//   else derived from the request id (SHA-256, first 16 bytes);
// - root span (`butlers.switchboard.message`) id: `derive_span_id(request_id,
//   "root")`; its parent is the envelope traceparent's span id (or none);
// - sampled: the envelope's sampled flag when a traceparent came with it,
//   else `sampled_by_ratio(trace id, sample_ratio)` — so all nodes agree.
// Child spans use `derive_span_id(request_id, <what>)` when another component
// must name them (e.g. "dispatch:<segment>:<attempt>"), else `random_span_id`.
//
// Cost when off: `tracer::enabled()` is one load; callers check it (and the
// request's `sampled`) before building any span.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/config_enums.hpp"

namespace butlers {

class counter;
class metrics_registry;
struct telemetry_config;

// -- ids and the W3C trace context ------------------------------------------

/// 16-byte trace id; all zero is invalid.
using trace_id = std::array<uint8_t, 16>;
/// 8-byte span id; all zero is invalid (and means "no parent").
using span_id = std::array<uint8_t, 8>;

/// Lowercase hex (32 resp. 16 digits), as in traceparent and OTLP JSON.
std::string to_hex(const trace_id& x);
std::string to_hex(const span_id& x);

/// True when every byte is zero.
bool is_zero(const trace_id& x);
bool is_zero(const span_id& x);

/// One position in a trace: what a `traceparent` header carries, plus the
/// opaque `tracestate` passed along unchanged.
struct span_context {
  trace_id trace{};
  span_id span{};
  /// W3C trace flags; bit 0 = sampled.
  uint8_t flags = 0;
  /// W3C tracestate, carried verbatim ("" = none).
  std::string tracestate;

  bool valid() const {
    return !is_zero(trace) && !is_zero(span);
  }
  bool sampled() const {
    return (flags & 0x01) != 0;
  }
};

/// Parses a W3C traceparent `vv-<32 hex>-<16 hex>-<2 hex>` (lowercase hex).
/// Version ff is invalid; all-zero ids are invalid; version 00 must be
/// exactly 55 characters; a higher version may append `-...` (ignored).
/// `tracestate` is not part of it (set it on the result).
std::optional<span_context> parse_traceparent(std::string_view s);

/// `00-<trace>-<span>-<flags>`.
std::string to_traceparent(const span_context& x);

/// The longest tracestate carried (bytes): W3C Trace Context's
/// recommended propagation limit.
inline constexpr size_t max_tracestate_bytes = 512;

/// True when `s` is a W3C tracestate worth carrying: at most
/// `max_tracestate_bytes`, at most 32 list members, each empty or
/// `key=value` with a key of `[a-z0-9][a-z0-9_*/@-]{0,255}` and a value of
/// 1-256 printable ASCII characters other than `,` and
/// `=` that does not end in a space. Duplicate keys are not looked for.
bool usable_tracestate(std::string_view s);

/// A trace id derived from a request id (SHA-256, first 16 bytes); never
/// all zero.
trace_id derive_trace_id(std::string_view request_id);

/// A span id derived from (request id, what) (SHA-256 over both,
/// length-prefixed, first 8 bytes); never all zero. E.g. what = "root".
span_id derive_span_id(std::string_view request_id, std::string_view what);

/// A random non-zero span id (thread-local generator).
span_id random_span_id();

/// Deterministic ratio sampling on the trace id's last 7 bytes (56 bits, as
/// OpenTelemetry's TraceIdRatioBased): sampled iff they are below
/// ratio * 2^56. ratio <= 0 never, >= 1 always.
bool sampled_by_ratio(const trace_id& x, double ratio);

/// The trace of one request, as every component computes it.
struct request_trace {
  /// The root span's context (trace id, root span id, flags with the
  /// sampling decision, the envelope's tracestate).
  span_context root;
  /// The root's parent: the envelope traceparent's span id, else zero.
  span_id parent{};

  bool sampled() const {
    return root.sampled();
  }
};

/// Computes the trace of `request_id` from the envelope's `traceparent`
/// ("" or invalid = none) and `tracestate`; see the top of this file.
request_trace request_trace_for(std::string_view request_id,
                                std::string_view traceparent,
                                double sample_ratio,
                                std::string_view tracestate = {});

// -- spans --------------------------------------------------------------------

/// OTLP Span.SpanKind values.
enum class span_kind : int {
  unspecified = 0,
  internal = 1,
  server = 2,
  client = 3,
  producer = 4,
  consumer = 5,
};

/// OTLP Status.StatusCode values.
enum class span_status : int {
  unset = 0,
  ok = 1,
  error = 2,
};

/// An attribute value: string, int, double or bool.
using attribute_value = std::variant<std::string, int64_t, double, bool>;

struct attribute {
  std::string key;
  attribute_value value;
};

/// A link to another span (e.g. the butler side linking to the dispatch).
struct span_link {
  span_context context;
  std::vector<attribute> attributes;
};

/// Nanoseconds since the Unix epoch, now (system clock).
uint64_t unix_nanos_now();

/// One finished (or to-be-finished) span.
struct span {
  trace_id trace{};
  span_id id{};
  /// Zero for a root without a remote parent.
  span_id parent{};
  /// Trace flags (bit 0 = sampled) and tracestate of the span's context.
  uint8_t flags = 1;
  std::string tracestate;
  std::string name;
  span_kind kind = span_kind::internal;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::vector<attribute> attributes;
  std::vector<span_link> links;
  span_status status = span_status::unset;
  std::string status_message;

  /// A span of `t`'s trace named `name`, child of `parent_id`, with id
  /// `id`, started at `start_ns` (0 = now).
  static span child_of(const request_trace& t, const span_id& parent_id,
                       span_id id, std::string name, uint64_t start_ns = 0);

  /// A span whose parent is the remote or local span `parent` (e.g. the
  /// dispatch span named by a route.v1 traceparent): same trace, flags and
  /// tracestate, parent id = `parent.span`.
  static span child_of(const span_context& parent, span_id id, std::string name,
                       uint64_t start_ns = 0);

  /// The root span `butlers.switchboard.message` of `t`.
  static span root_of(const request_trace& t, std::string name,
                      uint64_t start_ns = 0);

  /// This span's context (to put in a traceparent).
  span_context context() const;

  span& set(std::string key, std::string v);
  span& set(std::string key, const char* v);
  span& set(std::string key, int64_t v);
  span& set(std::string key, int v) {
    return set(std::move(key), static_cast<int64_t>(v));
  }
  span& set(std::string key, uint32_t v) {
    return set(std::move(key), static_cast<int64_t>(v));
  }
  span& set(std::string key, uint64_t v) {
    return set(std::move(key), static_cast<int64_t>(v));
  }
  span& set(std::string key, double v);
  span& set(std::string key, bool v);

  /// Status error with `message`, and `error.class` = `error_class` when
  /// not empty.
  span& fail(std::string_view error_class, std::string message = {});

  /// Sets end_ns (0 = now).
  span& end(uint64_t end_ns = 0);
};

// -- OTLP encoding ------------------------------------------------------------

/// Resource and scope of exported spans.
struct otlp_resource {
  /// `service.name`.
  std::string service_name = "butlers";
  /// `service.instance.id`: the node name.
  std::string service_instance_id;
  /// InstrumentationScope name and version.
  std::string scope_name = "butlers";
  std::string scope_version;
};

/// ExportTraceServiceRequest in the OTLP JSON encoding (proto3 JSON mapping
/// with OTLP's exceptions: trace/span ids as lowercase hex, enums as
/// integers, int64 as strings): one resourceSpans with one scopeSpans.
std::string encode_otlp_json(const otlp_resource& res,
                             const std::vector<span>& spans);

/// The same request in the binary protobuf encoding.
std::string encode_otlp_protobuf(const otlp_resource& res,
                                 const std::vector<span>& spans);

// -- the tracer ---------------------------------------------------------------

/// The tracer's settings (from `[telemetry]`).
struct tracer_options {
  /// Base URL of an OTLP/HTTP receiver; spans go to `{endpoint}/v1/traces`.
  /// "" = tracing off.
  std::string otlp_endpoint;
  otlp_encoding encoding = otlp_encoding::json;
  /// Fraction of traces sampled when no incoming traceparent decides.
  double sample_ratio = 1.0;
  /// Spans waiting for export; more are dropped and counted.
  size_t queue_capacity = 8192;
  /// Spans per export request at most.
  size_t batch_max_spans = 512;
  /// Longest a span waits before its batch goes out.
  std::chrono::milliseconds batch_interval{1000};
  /// Bound on one export request.
  std::chrono::milliseconds export_timeout{5000};
  /// Attempts per batch (the first plus retries with backoff) before it is
  /// dropped as export_failed.
  int max_attempts = 3;
  /// First retry backoff; doubles per retry (a Retry-After overrides).
  std::chrono::milliseconds retry_backoff{200};
  /// Extra request headers (e.g. an API key from the environment).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Resource attributes.
  otlp_resource resource;
};

/// Parses `Name: value` headers separated by newlines or commas
/// (`k1=v1,k2=v2` as OTEL_EXPORTER_OTLP_HEADERS also works); skips empty
/// entries.
std::vector<std::pair<std::string, std::string>> parse_otlp_headers(
  std::string_view s);

/// One per node; thread-safe. `record` never blocks: it appends to a bounded
/// queue that the tracer's own thread drains in batches to the receiver.
/// Metrics (only when enabled): `butlers_trace_spans_exported_total`,
/// `butlers_trace_spans_dropped_total{reason="queue_full"|"export_failed"}`.
class tracer {
 public:
  /// A disabled tracer (no thread, records nothing).
  tracer();
  /// Enabled when `o.otlp_endpoint` is not empty; then starts the export
  /// thread. `metrics` (may be null) must outlive the tracer.
  tracer(tracer_options o, metrics_registry* metrics);
  /// Stops the thread after a last best-effort flush (bounded by one
  /// export timeout per batch, no retries).
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  bool enabled() const {
    return enabled_;
  }
  double sample_ratio() const {
    return opts_.sample_ratio;
  }
  const tracer_options& options() const {
    return opts_;
  }

  /// The trace of a request (request_trace_for with this tracer's ratio).
  request_trace trace_for(std::string_view request_id,
                          std::string_view traceparent,
                          std::string_view tracestate = {}) const {
    return request_trace_for(request_id, traceparent, opts_.sample_ratio,
                             tracestate);
  }

  /// Queues `s` for export (sets end_ns to now when 0). Returns false when
  /// disabled, unsampled (flags bit 0 clear) or dropped because the queue
  /// is full (counted).
  bool record(span&& s);

  /// Wakes the export thread to send what is queued now (tests, shutdown).
  void flush_soon();

  /// Counts so far (also exported as metrics).
  uint64_t exported() const {
    return exported_.load(std::memory_order_relaxed);
  }
  uint64_t dropped_queue_full() const {
    return dropped_full_.load(std::memory_order_relaxed);
  }
  uint64_t dropped_export_failed() const {
    return dropped_failed_.load(std::memory_order_relaxed);
  }

 private:
  void run();
  bool export_batch(const std::vector<span>& batch, bool final);

  tracer_options opts_;
  bool enabled_ = false;
  std::string url_;
  counter* exported_metric_ = nullptr;
  counter* dropped_full_metric_ = nullptr;
  counter* dropped_failed_metric_ = nullptr;
  std::atomic<uint64_t> exported_{0};
  std::atomic<uint64_t> dropped_full_{0};
  std::atomic<uint64_t> dropped_failed_{0};
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<span> queue_;
  bool stop_ = false;
  bool flush_ = false;
  /// The last export failed (export thread only; logs once per outage).
  bool failing_ = false;
  std::thread thread_;
};

using tracer_ptr = std::shared_ptr<tracer>;

/// The tracer options of `[telemetry]` for node `node_name` (headers read
/// from the environment variable `cfg.headers_env` when set).
tracer_options tracer_options_of(const telemetry_config& cfg,
                                 const std::string& node_name);

} // namespace butlers
