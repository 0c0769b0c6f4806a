#pragma once

// A fake OTLP/HTTP trace receiver on 127.0.0.1 (what an OpenTelemetry
// Collector or Jaeger listens with on port 4318): every POST /v1/traces is
// recorded; JSON bodies (application/json) are parsed with RapidJSON into
// spans. It answers 200 `{}` (an ExportTraceServiceResponse with nothing
// rejected), or the status it is told to (e.g. 503). A receiver that is
// "down" is a port nobody listens on: see `closed_port`.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace butlers::test {

class loopback_server;

/// An attribute value as the JSON carried it.
struct otlp_value {
  /// "string", "int", "double", "bool" (or "other").
  std::string type;
  /// stringValue; intValue's decimal text; doubleValue/boolValue printed.
  std::string text;
};

/// One span of a received request.
struct otlp_span {
  std::string trace_id;
  std::string span_id;
  /// "" for a root without a parent.
  std::string parent_span_id;
  /// `traceState` ("" when absent).
  std::string trace_state;
  std::string name;
  int kind = 0;
  std::string start_ns;
  std::string end_ns;
  uint32_t flags = 0;
  std::map<std::string, otlp_value> attributes;
  /// Links: trace id and span id.
  std::vector<std::pair<std::string, std::string>> links;
  /// Each link's `traceState` ("" when absent), in the order of `links`.
  std::vector<std::string> link_trace_states;
  int status_code = 0;
  std::string status_message;
  /// Resource attributes of its resourceSpans (service.name, ...).
  std::map<std::string, otlp_value> resource;

  /// The attribute's text, or "<absent>".
  std::string attr(const std::string& key) const;
  bool has(const std::string& key) const {
    return attributes.count(key) != 0;
  }
};

/// One POST as received.
struct otlp_request {
  std::string path;
  std::string content_type;
  std::map<std::string, std::string> headers;
  std::string body;
  /// Empty unless the body was JSON and parsed.
  std::vector<otlp_span> spans;
  /// Set when a JSON body did not parse as an ExportTraceServiceRequest.
  std::string parse_error;
};

/// Parses an ExportTraceServiceRequest in the OTLP JSON encoding; appends
/// its spans to `out`. Returns "" or what is wrong.
std::string parse_otlp_json(const std::string& body,
                            std::vector<otlp_span>& out);

class fake_otlp_receiver {
 public:
  /// Listens on an ephemeral port.
  fake_otlp_receiver();
  ~fake_otlp_receiver();
  fake_otlp_receiver(const fake_otlp_receiver&) = delete;
  fake_otlp_receiver& operator=(const fake_otlp_receiver&) = delete;

  uint16_t port() const;
  /// "http://127.0.0.1:<port>" (the `[telemetry] otlp_endpoint`).
  std::string endpoint() const;

  /// Answer every request with `status` from now on (200 by default).
  void respond_with(int status);

  /// Copies of what arrived so far.
  std::vector<otlp_request> requests() const;
  /// Every span received so far, in arrival order.
  std::vector<otlp_span> spans() const;

  /// Waits until `pred(spans())` holds or `timeout` passes; returns the
  /// spans then.
  template<class Pred>
  std::vector<otlp_span> wait_for(Pred pred,
                                  std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, timeout, [&] {
      return pred(spans_);
    });
    return spans_;
  }

  /// A loopback port with nobody listening (bound, then closed): a
  /// receiver that is down.
  static uint16_t closed_port();

 private:
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  int status_ = 200;
  std::vector<otlp_request> requests_;
  std::vector<otlp_span> spans_;
  std::unique_ptr<loopback_server> server_;
};

} // namespace butlers::test
