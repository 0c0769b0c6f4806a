#include "runtime/thread_list.hpp"

#include <algorithm>
#include <charconv>

#include "runtime/api_response.hpp"
#include "runtime/json.hpp"
#include "runtime/text.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

/// The columns of a thread_list.sql / thread_get.sql row.
enum column : size_t {
  col_thread_id,
  col_at_us,
  col_first,
  col_last,
  col_state,
  col_error_class,
  col_error_message,
  col_cursor,
  col_open_runs,         // thread_get.sql only
  col_pending_approvals, // thread_get.sql only
  list_columns = col_open_runs,
};

bool utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

/// `text` with every run of ASCII whitespace made one space, trimmed.
std::string collapse_space(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : trim(text)) {
    if (is_ascii_space(c)) {
      space = true;
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::optional<int64_t> to_int64(std::string_view x) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(x.data(), x.data() + x.size(), v);
  if (x.empty() || ec != std::errc{} || end != x.data() + x.size())
    return std::nullopt;
  return v;
}

/// FNV-1a: a checksum that tells a cursor we made from one changed or cut
/// (not a secret: the cursor only names a position in a list the caller
/// may read anyway).
uint32_t fnv1a(std::string_view x) {
  uint32_t h = 2166136261u;
  for (char c : x) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

constexpr const char* hex_digits = "0123456789abcdef";

std::string to_hex(std::string_view x) {
  std::string out;
  out.reserve(x.size() * 2);
  for (char c : x) {
    auto u = static_cast<unsigned char>(c);
    out += hex_digits[u >> 4];
    out += hex_digits[u & 0xF];
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

std::optional<std::string> from_hex(std::string_view x) {
  if (x.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  out.reserve(x.size() / 2);
  for (size_t i = 0; i < x.size(); i += 2) {
    int hi = hex_value(x[i]);
    int lo = hex_value(x[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::string checksum_hex(std::string_view payload) {
  auto h = fnv1a(std::string{"thread-cursor/v1:"} + std::string{payload});
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4)
    out[static_cast<size_t>(i)] = hex_digits[h & 0xF];
  return out;
}

/// The digest of a thread_list.sql / thread_get.sql row.
thread_digest digest_of(const std::vector<std::string>& row) {
  thread_digest d;
  d.title = thread_title(row[col_first]);
  d.preview = thread_preview(row[col_last]);
  d.last_message_at_ms = to_int64(row[col_at_us]).value_or(0) / 1000;
  d.run_state = row[col_state];
  d.error_class = row[col_error_class];
  d.error_message = row[col_error_message];
  return d;
}

std::string runs_json(const std::vector<thread_run_view>& xs) {
  std::string out = "[";
  for (auto& r : xs) {
    if (out.size() > 1)
      out += ',';
    out += R"({"run_id":)" + json::quote(r.run_id) + R"(,"butler":)"
           + json::quote(r.butler) + R"(,"state":)" + json::quote(r.state)
           + "}";
  }
  return out + "]";
}

/// The open runs of thread_get.sql (a JSON array of {run_id, butler,
/// state}) as a live thread would list them.
thread_live live_of_open_runs(std::string_view open_runs) {
  thread_live out;
  rapidjson::Document doc;
  if (json::parse(open_runs, doc) || !doc.IsArray())
    return out;
  for (auto& x : doc.GetArray()) {
    if (!x.IsObject())
      continue;
    thread_run_view r;
    auto str = [&](const char* key) {
      auto i = x.FindMember(key);
      return i != x.MemberEnd() && i->value.IsString()
               ? std::string{i->value.GetString()}
               : std::string{};
    };
    r.run_id = str("run_id");
    r.butler = str("butler");
    r.state = str("state");
    bool waiting = r.state == "queued" || r.state == "collecting";
    (waiting ? out.queued : out.active).push_back(std::move(r));
  }
  return out;
}

} // namespace

// -- title and preview --------------------------------------------------------

std::string ellipsize_utf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes)
    return std::string{text};
  constexpr std::string_view ellipsis = "\xE2\x80\xA6";
  if (max_bytes < ellipsis.size())
    return {};
  size_t end = max_bytes - ellipsis.size();
  // Back up to the first byte of the sequence the cut would split.
  while (end > 0 && utf8_continuation(text[end]))
    --end;
  auto out = std::string{trim(text.substr(0, end))};
  out += ellipsis;
  return out;
}

std::string thread_title(std::string_view first_user_text) {
  auto rest = first_user_text;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    auto line = trim(rest.substr(0, nl));
    if (!line.empty())
      return ellipsize_utf8(collapse_space(line), thread_title_max_bytes);
    if (nl == std::string_view::npos)
      break;
    rest.remove_prefix(nl + 1);
  }
  return {};
}

std::string thread_preview(std::string_view text) {
  return ellipsize_utf8(collapse_space(text), thread_preview_max_bytes);
}

// -- the digest ---------------------------------------------------------------

std::string run_status_of(std::string_view run_state) {
  if (run_state == "accepted" || run_state == "running"
      || run_state == "cancelling")
    return "running";
  if (run_state.empty())
    return "idle";
  return std::string{run_state};
}

std::string run_status_of(const thread_live& live,
                          std::string_view latest_state) {
  if (!live.active.empty())
    return "running";
  for (auto& r : live.queued)
    if (r.state == "collecting")
      return "collecting";
  if (!live.queued.empty())
    return "queued";
  // A run the database still lists as open has ended for the actor (its
  // final write is on the way).
  bool open = latest_state == "collecting" || latest_state == "queued"
              || latest_state == "accepted" || latest_state == "running";
  return open ? std::string{"idle"} : run_status_of(latest_state);
}

std::string digest_members(const thread_digest& d, std::string_view status) {
  std::string out;
  if (!d.title.empty())
    out += R"("title":)" + json::quote(d.title) + ",";
  if (!d.preview.empty())
    out += R"("last_message_preview":)" + json::quote(d.preview) + ",";
  if (d.last_message_at_ms > 0)
    out += R"("last_message_at_unix_ms":)"
           + std::to_string(d.last_message_at_ms) + ",";
  out += R"("run_status":)" + json::quote(status) + R"(,"run_error":)";
  if (status == "error")
    out += R"({"class":)" + json::quote(d.error_class) + R"(,"message":)"
           + json::quote(d.error_message) + "}";
  else
    out += "null";
  return out;
}

// -- the list page cursor -----------------------------------------------------

std::string encode_thread_cursor(const thread_cursor& c) {
  auto payload = std::to_string(c.at_us) + ":" + c.thread_id;
  return to_hex(payload) + checksum_hex(payload);
}

std::optional<thread_cursor> decode_thread_cursor(std::string_view x) {
  // Bounded: a timestamp, a colon and a thread id of at most 128 bytes.
  if (x.size() < 8 + 6 || x.size() > 8 + 2 * (20 + 1 + 128))
    return std::nullopt;
  auto payload = from_hex(x.substr(0, x.size() - 8));
  if (!payload || checksum_hex(*payload) != x.substr(x.size() - 8))
    return std::nullopt;
  auto colon = payload->find(':');
  if (colon == std::string::npos)
    return std::nullopt;
  auto at = to_int64(std::string_view{*payload}.substr(0, colon));
  auto id = payload->substr(colon + 1);
  if (!at || *at < 0 || !valid_thread_id(id))
    return std::nullopt;
  return thread_cursor{*at, std::move(id)};
}

// -- GET /v1/threads ----------------------------------------------------------

std::optional<http_reply> parse_thread_page_query(std::string_view query,
                                                  thread_page_query& out) {
  if (auto limit = query_param(query, "limit")) {
    auto n = to_int64(*limit);
    if (!n || *n < 1 || *n > thread_page_max)
      return bad_query_param_reply("limit", *limit,
                                   "an integer from 1 to "
                                     + std::to_string(thread_page_max));
    out.limit = *n;
  }
  if (auto cursor = query_param(query, "cursor")) {
    out.after = decode_thread_cursor(*cursor);
    if (!out.after)
      return bad_query_param_reply("cursor", cursor->substr(0, 64),
                                   "the next_cursor of a previous page");
  }
  return std::nullopt;
}

std::vector<std::string> thread_list_params(const thread_page_query& q) {
  if (!q.after)
    return {std::to_string(q.limit + 1), "", ""};
  return {std::to_string(q.limit + 1), std::to_string(q.after->at_us),
          q.after->thread_id};
}

std::string thread_page_json(const std::vector<std::vector<std::string>>& rows,
                             const thread_page_query& q) {
  std::string out = R"({"threads":[)";
  auto n = std::min(rows.size(), static_cast<size_t>(q.limit));
  for (size_t i = 0; i < n; ++i) {
    auto& row = rows[i];
    if (row.size() < list_columns)
      continue;
    auto d = digest_of(row);
    if (i > 0)
      out += ',';
    out += R"({"thread_id":)" + json::quote(row[col_thread_id]) + ","
           + digest_members(d, run_status_of(d.run_state))
           + R"(,"last_cursor":)"
           + std::to_string(to_int64(row[col_cursor]).value_or(0)) + "}";
  }
  out += R"(],"next_cursor":)";
  if (rows.size() > n && n > 0 && rows[n - 1].size() >= list_columns) {
    auto& last = rows[n - 1];
    out += json::quote(encode_thread_cursor(
      {to_int64(last[col_at_us]).value_or(0), last[col_thread_id]}));
  } else {
    out += "null";
  }
  return out + "}";
}

// -- GET /v1/threads/{id} -----------------------------------------------------

namespace {

/// `text` when it is a JSON array (the database's), else "[]".
std::string json_array_or_empty(const std::string& text) {
  rapidjson::Document d;
  return !json::parse(text, d) && d.IsArray() ? text : std::string{"[]"};
}

} // namespace

std::string thread_snapshot_json(const std::vector<std::string>& in,
                                 const std::optional<thread_live>& live) {
  auto row = in;
  row.resize(std::max(row.size(), size_t{col_pending_approvals + 1}));
  auto d = digest_of(row);
  auto runs = live ? *live : live_of_open_runs(row[col_open_runs]);
  auto status = live ? run_status_of(*live, d.run_state)
                     : run_status_of(d.run_state);
  return R"({"thread_id":)" + json::quote(row[col_thread_id]) + ","
         + digest_members(d, status) + R"(,"last_event_cursor":)"
         + std::to_string(to_int64(row[col_cursor]).value_or(0)) + R"(,"live":)"
         + (live ? "true" : "false") + R"(,"active_runs":)"
         + runs_json(runs.active) + R"(,"queued_runs":)"
         + runs_json(runs.queued) + R"(,"pending_turns":)"
         + std::to_string(runs.pending_turns) + R"(,"pending_approvals":)"
         + json_array_or_empty(row[col_pending_approvals]) + "}";
}

} // namespace butlers
