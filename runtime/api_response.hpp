#pragma once

// The standard envelopes of the dashboard API (`/api/...`), as upstream's
// `butlers.api.models` defines them:
//
//   ApiResponse[T]       {"data": T, "meta": {...}}
//   PaginatedResponse[T] {"data": [T, ...],
//                         "meta": {"total": N, "offset": O, "limit": L,
//                                  "has_more": b}}
//
// Failures keep the API's error body (runtime/http_render.hpp `error_body`):
// {"error": {"class", "code", "message", "details"}}. `data` is JSON text the
// caller built (often in SQL); nothing here parses it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/http_render.hpp"

namespace butlers {

/// `{"data":<data>,"meta":<meta>}`; `meta` is a JSON object's text.
std::string api_response_body(std::string_view data,
                              std::string_view meta = "{}");

/// 200 (or `status`) with `api_response_body(data, meta)`, `no_store`.
http_reply api_response(std::string_view data, std::string_view meta = "{}",
                        int status = 200);

/// The window of a paginated list: `offset` and `limit` of the query.
struct page_window {
  int64_t offset = 0;
  int64_t limit = 50;
};

/// Pagination facts of one page.
struct page_meta {
  int64_t total = 0;
  int64_t offset = 0;
  int64_t limit = 0;
  /// `offset + limit < total`, as upstream's `PaginationMeta.has_more`.
  bool has_more() const {
    return offset + limit < total;
  }
};

/// `{"total":N,"offset":O,"limit":L,"has_more":b}` plus `extra` members
/// (text of `"key":value` pairs, no braces) when not empty.
std::string page_meta_json(const page_meta& m, std::string_view extra = {});

/// `{"data":<items>,"meta":<page_meta_json(m, extra)>}`; `items` is a JSON
/// array's text.
std::string paginated_body(std::string_view items, const page_meta& m,
                           std::string_view extra_meta = {});

/// 200 with `paginated_body`, `no_store`.
http_reply paginated_response(std::string_view items, const page_meta& m,
                              std::string_view extra_meta = {});

/// Reads `offset` (>= 0, default 0) and `limit` (1..`max_limit`, default
/// `default_limit`) from `query`; nullopt when either is malformed or out
/// of range (answer with `bad_page_reply`).
std::optional<page_window> parse_page_window(std::string_view query,
                                             int64_t default_limit = 50,
                                             int64_t max_limit = 500);

/// 400 naming the pagination parameters and their ranges.
http_reply bad_page_reply(int64_t max_limit = 500);

/// The value of query parameter `key` (raw, not percent-decoded); nullopt
/// when absent.
std::optional<std::string_view> query_param(std::string_view query,
                                            std::string_view key);

/// 400 naming query parameter `name`, the value it had and what it takes
/// (`allowed`, e.g. "24h, 7d or 30d"); `details` names the parameter too.
http_reply bad_query_param_reply(std::string_view name, std::string_view value,
                                 std::string_view allowed);

/// 404 in the API's error shape: `what` ("connector") `id` is not known.
http_reply api_not_found_reply(std::string_view what, std::string_view id);

} // namespace butlers
