#pragma once

// The web dashboard's pieces that need no actor (runtime/dashboard/): its
// static files, compiled into the binary from runtime/dashboard/ and served
// with their type, an ETag and a strict Content-Security-Policy; the query
// parameters of its list endpoints; the `{"data":...,"meta":{...}}` wrappers
// of its answers; and the overview computed from the node's metrics.

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/http_render.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

// -- static files -------------------------------------------------------------

/// The Content-Security-Policy of every dashboard file: scripts, styles and
/// fetches from the node only, nothing inline, no frames, no forms.
extern const char* const dashboard_csp;

/// The answer for GET `path` of the dashboard shell (`/`, `/index.html`,
/// the chat's `/chat`, `/assets/<file>`): the embedded file with its type,
/// `ETag`, `Cache-Control: no-cache` (revalidate every time) and the CSP; 304
/// when `if_none_match` names its ETag. Nothing when `path` is no dashboard
/// file.
std::optional<http_reply> dashboard_file(
  std::string_view path, std::optional<std::string_view> if_none_match);

// -- list queries
// ---------------------------------------------------------------

/// The paging and filters of a list endpoint: `offset` (>= 0), `limit`
/// (1..200, default 50), `q` (a request id to look for) and `state`.
struct dashboard_page_query {
  int64_t offset = 0;
  int64_t limit = 50;
  std::string q;
  std::string state;
  /// The first parameter that was refused (empty when none), the value it
  /// had and what it takes.
  std::string bad;
  std::string bad_value;
  std::string allowed;
};

/// The largest `limit` a list endpoint accepts.
constexpr int64_t dashboard_max_limit = 200;

/// Parses `offset`, `limit`, `q` and `state` out of a query string
/// (percent-decoded). `states` lists the accepted values of `state`
/// (`state` must be absent when empty).
dashboard_page_query parse_dashboard_query(
  std::string_view query, const std::vector<std::string>& states = {});

/// 400 naming the parameter `parse_dashboard_query` refused, its value and
/// what it takes (runtime/api_response.hpp `bad_query_param_reply`).
http_reply dashboard_query_reply(const dashboard_page_query& q);

// -- answer wrappers
// -----------------------------------------------------------

/// The first column of the first row of a read, `{"items":[...],"total":N}`
/// built in SQL, as a PaginatedResponse; nothing when it does not parse.
std::optional<std::string> api_page_from_read(std::string_view doc,
                                              int64_t offset, int64_t limit);

// -- overview
// -------------------------------------------------------------------

/// The node's numbers as the overview shows them, from its metrics: totals
/// since start, rates per minute over the last few minutes (from samples
/// this keeps, one per `min_gap_ms` at most, `max_samples` of them), the
/// queues, what is in flight, and each butler's slots, queue and circuit.
class dashboard_overview {
 public:
  /// With `started_ms` (when the metrics were all zero, i.e. the node's
  /// start) the first sample is that zero, so rates show from the first
  /// call; without it (-1) they show from the second sample on.
  explicit dashboard_overview(int64_t started_ms = -1, size_t max_samples = 64,
                              int64_t min_gap_ms = 2000);

  /// The overview's `data` as JSON, taking a sample at `now_ms`.
  std::string render(const std::vector<metrics_registry::sample>& xs,
                     std::string_view node_name, int64_t now_ms);

 private:
  struct point {
    int64_t at_ms;
    int64_t received;
    int64_t completed;
    int64_t errored;
  };

  /// Takes the sample `now` (unless the last is younger than
  /// `min_gap_ms_`) and answers the rates JSON over the samples, or null.
  std::string sample(const point& now);

  size_t max_samples_;
  int64_t min_gap_ms_;
  std::mutex mtx_;
  std::deque<point> points_;
};

} // namespace butlers
