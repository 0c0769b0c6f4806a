#pragma once

// What a chat client reads about its threads (spec 003 §6.2): the digest of
// a thread (title, preview, last message time, run status and error) that
// `GET /v1/threads`, `GET /v1/threads/{id}` and the summary events share,
// the opaque page cursor of the list, and the JSON of both answers. Pure
// functions; the rows come from sql/queries/thread_list.sql and
// thread_get.sql.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "runtime/http_render.hpp"

namespace butlers {

// -- title and preview --------------------------------------------------------

/// A title's length bound in bytes, ellipsis included.
constexpr size_t thread_title_max_bytes = 80;

/// A preview's length bound in bytes, ellipsis included.
constexpr size_t thread_preview_max_bytes = 160;

/// `text` cut to at most `max_bytes` bytes, never inside a UTF-8 sequence;
/// a cut text ends with "…" (U+2026, counted in `max_bytes`).
std::string ellipsize_utf8(std::string_view text, size_t max_bytes);

/// A thread's title from its first user message: the first line that is
/// not blank, its whitespace runs made single spaces, cut to
/// `thread_title_max_bytes`.
std::string thread_title(std::string_view first_user_text);

/// A message's preview: its whitespace runs (newlines too) made single
/// spaces, trimmed, cut to `thread_preview_max_bytes`.
std::string thread_preview(std::string_view text);

// -- the digest ---------------------------------------------------------------

/// What a thread looks like in a list (spec 003 §6.2). Empty strings and 0
/// are "not known" (a thread actor knows only what it saw this activation).
struct thread_digest {
  std::string title;
  std::string preview;
  /// Unix ms of the last transcript message.
  int64_t last_message_at_ms = 0;
  /// The latest run's state: collecting | queued | accepted | running | ok |
  /// error | cancelled ("" when none).
  std::string run_state;
  /// Of the latest run when it failed.
  std::string error_class;
  std::string error_message;
};

/// The run status a client shows: "running" while a run is active
/// (accepted, running or being cancelled), else "collecting" while a
/// collect window is open, else "queued", else the latest run's final
/// state (ok | error | cancelled), else "idle".
std::string run_status_of(std::string_view run_state);

struct thread_live;

/// The run status of a thread whose live actor answered `live` (its runs
/// are current; `latest_state` is the latest finished run's state).
std::string run_status_of(const thread_live& live,
                          std::string_view latest_state);

/// The digest's JSON members, without braces: `"title"`,
/// `"last_message_preview"`, `"last_message_at_unix_ms"` (each left out
/// when not known), `"run_status"` (`status`) and `"run_error"`
/// (`{"class","message"}` when `status` is "error", else null).
std::string digest_members(const thread_digest& d, std::string_view status);

// -- the list page cursor -----------------------------------------------------

/// Where a page of `GET /v1/threads` ends: the key of its last thread.
struct thread_cursor {
  /// The thread's last message time, Unix µs.
  int64_t at_us = 0;
  std::string thread_id;

  bool operator==(const thread_cursor& y) const {
    return at_us == y.at_us && thread_id == y.thread_id;
  }
};

/// The cursor as clients see it: opaque hex with a checksum.
std::string encode_thread_cursor(const thread_cursor& c);

/// The cursor `encode_thread_cursor` made; nullopt for anything else
/// (tampered, truncated, not hex, a bad thread id).
std::optional<thread_cursor> decode_thread_cursor(std::string_view x);

// -- GET /v1/threads ----------------------------------------------------------

constexpr int64_t thread_page_default = 50;
constexpr int64_t thread_page_max = 200;

/// The query of `GET /v1/threads`.
struct thread_page_query {
  /// 1..`thread_page_max`, default `thread_page_default`.
  int64_t limit = thread_page_default;
  /// Threads after this one (none: from the newest).
  std::optional<thread_cursor> after;
};

/// Reads `limit` and `cursor` from `query` into `out`; a 400 naming the
/// parameter when one is malformed, else nullopt.
std::optional<http_reply> parse_thread_page_query(std::string_view query,
                                                  thread_page_query& out);

/// The parameters of thread_list.sql for `q` (one row more than the page,
/// to tell whether another page follows).
std::vector<std::string> thread_list_params(const thread_page_query& q);

/// `{"threads":[...],"next_cursor"}` from the rows of thread_list.sql read
/// with `thread_list_params(q)`; next_cursor is null on the last page.
std::string thread_page_json(const std::vector<std::vector<std::string>>& rows,
                             const thread_page_query& q);

// -- GET /v1/threads/{id} -----------------------------------------------------

/// A run a live thread actor holds.
struct thread_run_view {
  std::string run_id;
  std::string butler;
  /// accepted | running | cancelling | queued | collecting.
  std::string state;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, thread_run_view& x) {
  return f(caf::meta::type_name("thread_run_view"), x.run_id, x.butler,
           x.state);
}

/// What a live thread actor knows beyond the database: its runs as they
/// are now and the turns waiting to be decided.
struct thread_live {
  /// Active runs (and runs being cancelled), oldest first.
  std::vector<thread_run_view> active;
  /// Queued runs and open collect windows' runs, in order.
  std::vector<thread_run_view> queued;
  /// Turns received but not decided yet.
  uint32_t pending_turns = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, thread_live& x) {
  return f(caf::meta::type_name("thread_live"), x.active, x.queued,
           x.pending_turns);
}

/// The snapshot of `GET /v1/threads/{id}` from the row of thread_get.sql
/// and, when the thread's actor is live on this node, what it answered
/// (its runs then replace the open runs the database lists).
std::string thread_snapshot_json(const std::vector<std::string>& row,
                                 const std::optional<thread_live>& live);

} // namespace butlers
