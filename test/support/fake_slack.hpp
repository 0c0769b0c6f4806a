#pragma once

// A fake Slack Web API over real HTTP on 127.0.0.1 (ephemeral port), for
// tests of the slack messenger adapter, and the Events API as Slack sends
// it (signed requests), for tests of the slack connector. Built from
// Slack's published documentation (test/fixtures/slack/README.md):
//
// - methods at `POST /api/<method>` (chat.postMessage, reactions.add,
//   reactions.remove) with a JSON body (`Content-Type: application/json`)
//   or a form body, the bot token as `Authorization: Bearer <token>`;
// - every answer is HTTP 200 with `{"ok":true,...}` or
//   `{"ok":false,"error":"..."}` (a missing or wrong token is
//   `not_authed` / `invalid_auth`, an unknown method `unknown_method`), but
//   for a rate limit: HTTP 429 with `Retry-After: N` and
//   `{"ok":false,"error":"ratelimited"}`;
// - chat.postMessage answers `channel`, `ts` (a new, increasing one) and
//   `message`; reactions.add answers `already_reacted` for an emoji the bot
//   already put on the message, reactions.remove `no_reaction` for one it
//   did not, and both `message_not_found` for a message they do not know
//   when `strict`.
//
// The test scripts faults (a status and error for the next calls of a
// method) and reads back every call. Thread-safe; the destructor stops the
// server and joins its threads.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test/support/loopback_http.hpp"
#include "test/support/loopback_server.hpp"

namespace butlers::test {

/// One Web API call the fake received.
struct slack_call {
  /// "chat.postMessage", ... ("" when the path was not /api/<method>).
  std::string method;
  /// The bearer token was the accepted one.
  bool token_ok = false;
  /// The arguments, as a flat map of strings (JSON strings, numbers and
  /// booleans as text; form fields decoded).
  std::map<std::string, std::string> args;
  /// HTTP status and body answered.
  int status = 0;
  std::string response;

  /// Argument `name`, "" when absent.
  std::string arg(const std::string& name) const;
};

/// A fault to answer instead of the method's own result.
struct slack_fault {
  /// HTTP status: 200 for an `ok:false` error, 429 for a rate limit, 5xx.
  int status = 200;
  /// `error` of the answer ("not_in_channel", "ratelimited", ...).
  std::string error;
  /// 429: `Retry-After` in seconds.
  std::optional<int> retry_after;

  /// 429, Retry-After `seconds`, error "ratelimited".
  static slack_fault rate_limited(int seconds);
  /// 200 with {"ok":false,"error":error}.
  static slack_fault error_of(std::string error);
  /// A 5xx with a JSON error body.
  static slack_fault server_error(int status = 500);
};

/// A message the bot posted with chat.postMessage.
struct slack_posted {
  std::string channel;
  std::string ts;
  /// "" when not posted in a thread.
  std::string thread_ts;
  std::string text;
};

struct fake_slack_options {
  /// The only bot token accepted.
  std::string token = "xoxb-0000000000-fake-butlers-token";
  /// When true, reactions on a message the fake neither posted nor was
  /// told of (`remember_message`) are `message_not_found`.
  bool strict = false;
};

class fake_slack {
 public:
  explicit fake_slack(fake_slack_options options = {});
  ~fake_slack();

  fake_slack(const fake_slack&) = delete;
  fake_slack& operator=(const fake_slack&) = delete;

  /// "http://127.0.0.1:<port>/api": the slack connector's `api_base`.
  std::string base_url() const;

  const std::string& token() const {
    return options_.token;
  }

  /// Makes a message known (for `strict`).
  void remember_message(const std::string& channel, const std::string& ts);

  /// The next `times` calls of `method` ("*": any) get `fault`.
  void inject(std::string method, slack_fault fault, int times = 1);

  /// Every call so far, in arrival order.
  std::vector<slack_call> calls() const;

  /// How many calls of `method` arrived.
  size_t count(std::string_view method) const;

  /// Messages the bot posted to `channel`, in order.
  std::vector<slack_posted> posted_to(const std::string& channel) const;

  /// Every successful reactions.add on the message, in order.
  std::vector<std::string> added_reactions(const std::string& channel,
                                           const std::string& ts) const;

  /// The emoji the bot has on the message now (sorted).
  std::vector<std::string> reactions_now(const std::string& channel,
                                         const std::string& ts) const;

  /// Waits until `pred()` holds (re-checked on every call) or `timeout`.
  bool wait_for(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout) const;

 private:
  using message_key = std::pair<std::string, std::string>;

  std::optional<http_reply_out> handle(const http_request_in& req);
  http_reply_out dispatch(const std::string& method, const slack_call& c);
  http_reply_out post_message(const slack_call& c);
  http_reply_out reaction(const slack_call& c, bool add);

  fake_slack_options options_;
  mutable std::mutex mtx_;
  mutable std::condition_variable changed_;
  std::vector<slack_call> calls_;
  std::map<std::string, std::deque<slack_fault>> faults_;
  std::set<message_key> known_;
  std::map<std::string, std::vector<slack_posted>> posted_;
  std::map<message_key, std::vector<std::string>> added_;
  std::map<message_key, std::set<std::string>> now_;
  int64_t next_ts_ = 1700000000;
  /// Last member: the server threads call into everything above.
  loopback_server server_;
};

// -- the Events API side ------------------------------------------------------

/// A request as Slack signs it: `X-Slack-Request-Timestamp` (`timestamp`)
/// and `X-Slack-Signature` ("v0=" HMAC-SHA256 of "v0:{timestamp}:{body}"
/// keyed with `secret`), plus `X-Slack-Retry-Num` / `-Reason` when
/// `retry_num` > 0. Returns the raw HTTP/1.1 request text for `path`.
std::string signed_slack_request(const std::string& path,
                                 const std::string& body,
                                 const std::string& secret, int64_t timestamp,
                                 int retry_num = 0);

/// Unix time now, in seconds.
int64_t slack_now_s();

/// An `event_callback` (the shape of Slack's documented examples, e.g.
/// test/fixtures/slack/app_mention.json) of `type` ("app_mention",
/// "message") in `channel` at `ts` from `user` with `text`; `thread_ts`
/// when not empty, `extra` (",\"subtype\":\"...\"" etc.) appended inside
/// the event, event_id `event_id`.
std::string slack_event_callback(const std::string& type,
                                 const std::string& event_id,
                                 const std::string& channel,
                                 const std::string& ts, const std::string& user,
                                 const std::string& text,
                                 const std::string& thread_ts = {},
                                 const std::string& extra = {});

} // namespace butlers::test
