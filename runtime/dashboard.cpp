#include "runtime/dashboard.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>

#include "runtime/api_response.hpp"
#include "runtime/embedded.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

/// FNV-1a over `s`: the ETag of an embedded file (its bytes never change
/// while the binary runs).
std::string etag_of(std::string_view s) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[24];
  std::snprintf(buf, sizeof(buf), "\"%016llx\"",
                static_cast<unsigned long long>(h));
  return buf;
}

/// The media type of a dashboard file by its extension.
const char* media_type_of(std::string_view file) {
  auto ends = [file](std::string_view ext) {
    return file.size() >= ext.size()
           && file.substr(file.size() - ext.size()) == ext;
  };
  if (ends(".html"))
    return "text/html; charset=utf-8";
  if (ends(".css"))
    return "text/css; charset=utf-8";
  if (ends(".js"))
    return "text/javascript; charset=utf-8";
  return "application/octet-stream";
}

/// Whether an If-None-Match value names `etag` (a list, or `*`).
bool etag_matches(std::string_view header, std::string_view etag) {
  if (header.find('*') != std::string_view::npos)
    return true;
  return header.find(etag) != std::string_view::npos;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// `s` percent-decoded (`+` as a space); nothing when an escape is broken.
std::optional<std::string> url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size())
        return std::nullopt;
      auto hi = hex_digit(s[i + 1]);
      auto lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0)
        return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// A non-negative integer of at most 9 digits.
std::optional<int64_t> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9)
    return std::nullopt;
  int64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    x = x * 10 + (c - '0');
  }
  return x;
}

/// The value of label `key` in a rendered label set, or "".
std::string label_value(std::string_view labels, std::string_view key) {
  auto needle = std::string{key} + "=\"";
  auto pos = labels.find(needle);
  if (pos == std::string_view::npos)
    return {};
  pos += needle.size();
  auto end = labels.find('"', pos);
  return std::string{labels.substr(pos, end - pos)};
}

} // namespace

// -- static files -------------------------------------------------------------

const char* const dashboard_csp
  = "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

std::optional<http_reply> dashboard_file(
  std::string_view path, std::optional<std::string_view> if_none_match) {
  std::string file;
  bool page = true;
  if (path == "/" || path == "/index.html")
    file = "index.html";
  else if (path == "/chat")
    file = "chat.html";
  else if (path.substr(0, 8) == "/assets/"
           && path.find('/', 8) == std::string_view::npos) {
    file = std::string{path.substr(8)};
    page = false;
  } else {
    return std::nullopt;
  }
  // The pages are pages, not assets.
  if (!page && (file == "index.html" || file == "chat.html"))
    return std::nullopt;
  auto content = embedded("runtime/dashboard/" + file);
  if (!content)
    return std::nullopt;
  http_reply r;
  auto etag = etag_of(*content);
  r.content_type = media_type_of(file);
  r.headers = {{"ETag", etag},
               {"Cache-Control", "no-cache"},
               {"Content-Security-Policy", dashboard_csp},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Frame-Options", "DENY"}};
  if (if_none_match && etag_matches(*if_none_match, etag)) {
    r.status = 304;
    return r;
  }
  r.body = std::string{*content};
  return r;
}

// -- list queries
// ---------------------------------------------------------------

dashboard_page_query parse_dashboard_query(
  std::string_view query, const std::vector<std::string>& states) {
  dashboard_page_query out;
  auto refuse = [&out](std::string_view key, std::string_view value,
                       std::string allowed) {
    out.bad = std::string{key};
    out.bad_value = std::string{value};
    out.allowed = std::move(allowed);
  };
  size_t pos = 0;
  while (pos < query.size() && out.bad.empty()) {
    auto end = std::min(query.find('&', pos), query.size());
    auto part = query.substr(pos, end - pos);
    pos = end + 1;
    auto eq = part.find('=');
    auto key = part.substr(0, eq);
    auto raw = eq == std::string_view::npos ? std::string_view{}
                                            : part.substr(eq + 1);
    auto value = url_decode(raw);
    if (key != "offset" && key != "limit" && key != "q" && key != "state")
      continue; // others are ignored, as browsers add their own
    if (!value) {
      refuse(key, raw, "percent-encoded text");
    } else if (key == "offset") {
      auto x = parse_count(*value);
      if (!x)
        refuse(key, *value, "an integer >= 0");
      else
        out.offset = *x;
    } else if (key == "limit") {
      auto x = parse_count(*value);
      if (!x || *x < 1 || *x > dashboard_max_limit)
        refuse(key, *value, "an integer in 1..200");
      else
        out.limit = *x;
    } else if (key == "q") {
      if (value->size() > 128)
        refuse(key, value->substr(0, 16) + "...", "at most 128 characters");
      else
        out.q = *value;
    } else if (std::find(states.begin(), states.end(), *value)
               == states.end()) {
      std::string all;
      for (auto& s : states)
        all += (all.empty() ? "" : ", ") + s;
      refuse(key, *value, all.empty() ? "nothing here" : "one of " + all);
    } else {
      out.state = *value;
    }
  }
  return out;
}

http_reply dashboard_query_reply(const dashboard_page_query& q) {
  return bad_query_param_reply(q.bad, q.bad_value, q.allowed);
}

// -- answer wrappers
// ------------------------------------------------------------

std::optional<std::string> api_page_from_read(std::string_view doc,
                                              int64_t offset, int64_t limit) {
  rapidjson::Document d;
  if (json::parse(doc, d) || !d.IsObject())
    return std::nullopt;
  auto items = d.FindMember("items");
  auto total = d.FindMember("total");
  if (items == d.MemberEnd() || !items->value.IsArray()
      || total == d.MemberEnd() || !total->value.IsInt64())
    return std::nullopt;
  return paginated_body(json::to_string(items->value),
                        page_meta{total->value.GetInt64(), offset, limit});
}

// -- overview
// -------------------------------------------------------------------

dashboard_overview::dashboard_overview(int64_t started_ms, size_t max_samples,
                                       int64_t min_gap_ms)
  : max_samples_(std::max<size_t>(2, max_samples)), min_gap_ms_(min_gap_ms) {
  if (started_ms >= 0)
    points_.push_back(point{started_ms, 0, 0, 0});
}

std::string dashboard_overview::render(
  const std::vector<metrics_registry::sample>& xs, std::string_view node_name,
  int64_t now_ms) {
  struct butler_numbers {
    int64_t active = 0, waiting = 0, queued = 0, circuit_open = 0;
  };
  std::map<std::string, butler_numbers> butlers;
  std::map<std::string, int64_t> totals;
  for (auto& x : xs) {
    auto butler = label_value(x.labels, "butler");
    if (!butler.empty()) {
      auto& b = butlers[butler];
      if (x.name == "butlers_spawner_active_sessions")
        b.active = x.value;
      else if (x.name == "butlers_spawner_queued_triggers")
        b.waiting = x.value;
      else if (x.name == "butlers_route_queue_depth")
        b.queued = x.value;
      else if (x.name == "butlers_switchboard_circuit_open")
        b.circuit_open = x.value;
      continue;
    }
    auto state = label_value(x.labels, "lifecycle_state");
    auto key = state.empty() ? x.name : x.name + ":" + state;
    totals[key] += x.value;
  }
  auto total = [&totals](const std::string& k) {
    auto i = totals.find(k);
    return i == totals.end() ? int64_t{0} : i->second;
  };
  const std::string lc = "butlers_switchboard_lifecycle_transition:";
  point now{now_ms, total("butlers_switchboard_message_received"),
            total(lc + "parsed"), total(lc + "errored")};
  auto rates = sample(now);
  std::string open = "[";
  std::string rows = "[";
  for (auto& [name, b] : butlers) {
    if (b.circuit_open) {
      open += (open.size() > 1 ? "," : "") + json::quote(name);
    }
    rows += (rows.size() > 1 ? "," : "");
    rows += R"({"name":)" + json::quote(name) + R"(,"active_sessions":)"
            + std::to_string(b.active) + R"(,"waiting_for_slot":)"
            + std::to_string(b.waiting) + R"(,"queue_depth":)"
            + std::to_string(b.queued) + R"(,"circuit_open":)"
            + (b.circuit_open ? "true" : "false") + "}";
  }
  open += "]";
  rows += "]";
  return R"({"node":)" + json::quote(std::string{node_name})
         + R"(,"at_unix_ms":)" + std::to_string(now_ms)
         + R"(,"totals":{"received":)" + std::to_string(now.received)
         + R"(,"completed":)" + std::to_string(now.completed) + R"(,"errored":)"
         + std::to_string(now.errored) + R"(,"cancelled":)"
         + std::to_string(total(lc + "cancelled")) + R"(,"deduplicated":)"
         + std::to_string(total("butlers_switchboard_message_deduplicated"))
         + R"(,"dead_letters":)"
         + std::to_string(total("butlers_switchboard_dead_letters_total"))
         + R"(},"rates":)" + rates + R"(,"in_flight":{"requests":)"
         + std::to_string(total("butlers_switchboard_requests_in_progress"))
         + R"(,"ingests_awaiting_commit":)"
         + std::to_string(total("butlers_switchboard_inflight_requests"))
         + R"(,"segments_waiting":)"
         + std::to_string(total("butlers_switchboard_segments_waiting"))
         + R"(},"queues":{"buffer":)"
         + std::to_string(total("butlers_buffer_queue_depth"))
         + R"(},"open_circuits":)" + open + R"(,"butlers":)" + rows + "}";
}

std::string dashboard_overview::sample(const point& now) {
  auto now_ms = now.at_ms;
  std::lock_guard<std::mutex> guard{mtx_};
  if (points_.empty() || now_ms - points_.back().at_ms >= min_gap_ms_) {
    points_.push_back(now);
    while (points_.size() > max_samples_)
      points_.pop_front();
  }
  // Over the last five minutes, from the oldest sample inside them; when
  // none is old enough (sparse polling), from the one before.
  auto from = std::find_if(points_.begin(), points_.end(),
                           [now_ms](const point& p) {
                             return now_ms - p.at_ms <= 300000;
                           });
  if (from != points_.begin()
      && (from == points_.end() || now_ms - from->at_ms < 1000))
    from = std::prev(from);
  if (from == points_.end() || now_ms - from->at_ms < 1000)
    return "null";
  double minutes = static_cast<double>(now_ms - from->at_ms) / 60000.0;
  auto per_min = [minutes](int64_t d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", static_cast<double>(d) / minutes);
    return std::string{buf};
  };
  return R"({"window_s":)" + std::to_string((now_ms - from->at_ms) / 1000)
         + R"(,"received_per_min":)" + per_min(now.received - from->received)
         + R"(,"completed_per_min":)" + per_min(now.completed - from->completed)
         + R"(,"errored_per_min":)" + per_min(now.errored - from->errored)
         + "}";
}

} // namespace butlers
