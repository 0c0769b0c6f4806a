#pragma once

// A fake Telegram Bot API over real HTTP on 127.0.0.1 (ephemeral port), for
// tests of the Telegram connector and messenger adapter. It answers the way
// https://core.telegram.org/bots/api does: methods at
// `POST|GET /bot<token>/<method>` with parameters as a JSON body, a form body
// or a query string; every answer is `{"ok":true,"result":...}` or
// `{"ok":false,"error_code":N,"description":"...",
// "parameters":{"retry_after":N}}` with N as the HTTP status too.
//
// Methods: getMe, getUpdates (long polling; `offset` confirms, `timeout`,
// `limit`, `allowed_updates`; a second poller ends the first with 409),
// sendMessage (with reply_markup), setMessageReaction, sendChatAction,
// setWebhook, deleteWebhook, getWebhookInfo, answerCallbackQuery,
// editMessageText, editMessageReplyMarkup; any other method is 404 "Not
// Found", a wrong token 401 "Unauthorized". The test queues Updates,
// injects faults, and reads back
// every call. Thread-safe; the destructor stops the server and joins its
// threads (a held long poll or stall ends at once).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rapidjson/document.h>

#include "test/support/loopback_http.hpp"
#include "test/support/loopback_server.hpp"

namespace butlers::test {

/// Telegram's limit on `sendMessage` text, in Unicode code points (measured
/// against the real API: 4096 astral code points pass, 4097 do not).
inline constexpr size_t telegram_max_text = 4096;

/// One request the fake received, recorded on arrival and completed when
/// answered.
struct telegram_call {
  /// The method as addressed ("sendMessage"); "" when the path was not
  /// `/bot<token>/<method>`.
  std::string method;
  /// GET or POST.
  std::string http_method;
  /// True when the token in the path was the accepted one.
  bool token_ok = false;
  /// Every parameter (query, form or JSON body) merged into one object.
  std::shared_ptr<const rapidjson::Document> params;
  /// The same, serialized.
  std::string params_json;
  /// When the request arrived.
  std::chrono::steady_clock::time_point at;
  /// HTTP status decided (0 while pending, and for a stall).
  int status = 0;
  /// The body sent (or, for a lost reply, that would have been sent).
  std::string response;
  /// True once a reply was written; false while pending and for a stall or
  /// a lost reply.
  bool answered = false;

  /// Parameter `name` as an integer (a JSON number or a numeric string).
  std::optional<int64_t> int_param(std::string_view name) const;
  /// Parameter `name` as a string (JSON strings only).
  std::optional<std::string> string_param(std::string_view name) const;
  /// Parameter `name`, or null when absent.
  const rapidjson::Value* param(std::string_view name) const;
};

/// A fault to answer instead of the method's own result.
struct telegram_fault {
  enum class kind {
    /// Answer `status` with `description` (and `retry_after`), or with
    /// `raw_body` when set; the method does not run.
    reply,
    /// Answer nothing for `hold` (or until the fake stops), then close the
    /// connection; the method does not run (a client timeout).
    stall,
    /// Run the method (a message is sent, a reaction set), then answer
    /// nothing for `hold` and close: the client cannot know it succeeded.
    lost_reply,
  };
  kind what = kind::reply;
  int status = 500;
  std::string description;
  std::optional<int> retry_after;
  /// Sent as the body (text/html) instead of the JSON envelope: Telegram's
  /// front end answers 502/504 with an nginx HTML page.
  std::string raw_body;
  std::chrono::milliseconds hold{0};

  /// 429 "Too Many Requests: retry after N", parameters.retry_after = N.
  static telegram_fault too_many_requests(int retry_after_seconds);
  /// 500 "Internal Server Error" as JSON; 502 and 504 as nginx's HTML page.
  static telegram_fault server_error(int status = 500);
  /// 400 with `description` ("Bad Request: ...").
  static telegram_fault bad_request(std::string description);
  /// 403, by default "Forbidden: bot was blocked by the user".
  static telegram_fault forbidden(
    std::string description = "Forbidden: bot was blocked by the user");
  /// Any status and description.
  static telegram_fault error(int status, std::string description);
  /// See kind::stall.
  static telegram_fault stall(std::chrono::milliseconds hold);
  /// See kind::lost_reply.
  static telegram_fault lost_reply(std::chrono::milliseconds hold);
};

/// A chat the fake knows.
struct telegram_chat {
  int64_t id = 0;
  /// "private", "group", "supergroup" or "channel".
  std::string type = "private";
  /// Groups and channels.
  std::string title;
  std::string username;
  /// Private chats.
  std::string first_name;
};

/// A message the bot sent with sendMessage.
struct telegram_sent_message {
  int64_t chat_id = 0;
  int64_t message_id = 0;
  std::string text;
  /// From reply_parameters.message_id or the legacy reply_to_message_id.
  std::optional<int64_t> reply_to_message_id;
  std::string parse_mode;
  /// Unix time.
  int64_t date = 0;
  /// reply_markup as JSON text ("" when none), as last set (sendMessage,
  /// editMessageText, editMessageReplyMarkup).
  std::string reply_markup;
  /// How many times editMessageText or editMessageReplyMarkup changed it.
  int edits = 0;
};

struct fake_telegram_options {
  /// The port on 127.0.0.1; 0 (tests): an ephemeral one.
  uint16_t port = 0;
  /// The only token accepted (`/bot<token>/...`); its digits before ':' are
  /// the bot's user id, as with real tokens.
  std::string token = "123456789:AAH-fake-token-for-butlers-tests";
  std::string bot_username = "butlers_test_bot";
  std::string bot_first_name = "Butlers Test Bot";
  /// When true, a chat the fake has not seen (add_chat or an Update) is 400
  /// "Bad Request: chat not found", and replying to or reacting on a message
  /// it has not seen is 400 as well. When false, any chat exists.
  bool strict = false;
  /// update_id given to the first pushed Update that has none.
  int64_t first_update_id = 100000;
  /// Called after each call is answered (or held), on the server thread;
  /// for logging (the standalone fake).
  std::function<void(const telegram_call&)> on_call;
};

class fake_telegram {
 public:
  explicit fake_telegram(fake_telegram_options options = {});
  ~fake_telegram();

  fake_telegram(const fake_telegram&) = delete;
  fake_telegram& operator=(const fake_telegram&) = delete;

  // -- where it is --------------------------------------------------------

  uint16_t port() const {
    return server_.port();
  }

  /// "http://127.0.0.1:<port>": the connector's `api_base`.
  std::string base_url() const;

  const std::string& token() const {
    return options_.token;
  }

  /// The bot's user id (from the token).
  int64_t bot_id() const;

  // -- Updates --------------------------------------------------------------

  /// Queues an Update (a JSON object) for getUpdates, giving it the next
  /// update_id when it has none; returns its update_id. Its chat and message
  /// become known (see `strict`). An update_id below the confirmed offset is
  /// dropped, as Telegram would never deliver it. Throws
  /// std::invalid_argument when `update_json` is not a JSON object.
  int64_t push_update(std::string_view update_json);

  /// Makes an Update's chat and message known without queueing it (for
  /// Updates a test posts to a node's webhook itself).
  void remember_update(std::string_view update_json);

  /// Reserves the next message_id in `chat_id` (message ids count up per
  /// chat, shared by the users' messages and the bot's), for building an
  /// Update whose message does not collide with one the bot sent.
  int64_t next_message_id(int64_t chat_id);

  /// Updates queued and not yet confirmed by an offset.
  size_t pending_updates() const;

  /// The highest offset a getUpdates has confirmed (0: none).
  int64_t confirmed_offset() const;

  // -- files ------------------------------------------------------------------

  /// Makes `bytes` the file `file_id`: getFile answers its `file_path`
  /// and `file_size` (400 "Bad Request: file is too big" past 20 MB, as
  /// the Bot API does), and GET /file/bot<token>/<file_path> serves it.
  /// Returns the file_path.
  std::string add_file(const std::string& file_id, std::string bytes);

  /// Downloads of files served so far (GET /file/bot...).
  size_t downloads() const;

  // -- chats ------------------------------------------------------------------

  void add_chat(telegram_chat chat);

  /// From now on sendMessage and setMessageReaction to `chat_id` answer 403
  /// "Forbidden: bot was blocked by the user" (until unblocked).
  void block_chat(int64_t chat_id, bool blocked = true);

  // -- faults -----------------------------------------------------------------

  /// The next `times` calls of `method` (case-insensitive; "*" for any)
  /// get `fault` instead of their result. Faults queue in order; a method's
  /// own faults go before "*" ones.
  void inject(std::string method, telegram_fault fault, int times = 1);

  /// Faults injected and not yet used.
  size_t pending_faults() const;

  // -- what happened ----------------------------------------------------------

  /// Every call so far, in arrival order.
  std::vector<telegram_call> calls() const;

  /// The calls of `method` (case-insensitive).
  std::vector<telegram_call> calls(std::string_view method) const;

  /// How many calls of `method` arrived.
  size_t count(std::string_view method) const;

  /// Waits until `pred(calls())` holds or `timeout` passes; re-evaluated on
  /// every change. Returns whether it held.
  bool wait_for(std::function<bool(const std::vector<telegram_call>&)> pred,
                std::chrono::milliseconds timeout) const;

  /// Waits until at least `n` calls of `method` were answered.
  bool wait_for_calls(std::string_view method, size_t n,
                      std::chrono::milliseconds timeout) const;

  /// Waits until at least `n` calls of `method` arrived, answered or not
  /// (e.g. a long poll is now waiting).
  bool wait_for_calls_arrived(std::string_view method, size_t n,
                              std::chrono::milliseconds timeout) const;

  /// A callback_query Update: user `from_id` pressed a button with
  /// `data` on the bot's message `message_id` in `chat_id` (push it with
  /// push_update, or POST it to a webhook).
  std::string callback_query_update(int64_t from_id, int64_t chat_id,
                                    int64_t message_id,
                                    std::string_view data) const;

  /// Messages the bot sent to `chat_id`, in order.
  std::vector<telegram_sent_message> messages_to(int64_t chat_id) const;

  /// Each successful setMessageReaction on the message, in order: its emoji,
  /// or "" when the call cleared the reaction.
  std::vector<std::string> reactions_of(int64_t chat_id,
                                        int64_t message_id) const;

  /// The URL of the last setWebhook ("" when none or deleted).
  std::string webhook_url() const;

  /// The secret_token of the last setWebhook ("" when none or deleted).
  std::string webhook_secret() const;

 private:
  struct stored_update {
    int64_t id = 0;
    std::string kind;
    std::string json;
  };
  struct method_result {
    int status = 200;
    std::string body;
  };
  using call_index = size_t;

  std::optional<http_reply_out> handle(const http_request_in& req);
  call_index record(telegram_call call);
  void complete(call_index i, int status, std::string body, bool answered);
  std::optional<telegram_fault> take_fault(const std::string& method);
  method_result dispatch(const std::string& method, const telegram_call& c);
  void hold(std::chrono::milliseconds how_long);

  method_result get_me();
  method_result get_file(const telegram_call& c);
  /// GET /file/bot<token>/<file_path>.
  http_reply_out download(const std::string& path);
  method_result get_updates(const telegram_call& c);
  method_result send_message(const telegram_call& c);
  method_result set_message_reaction(const telegram_call& c);
  method_result answer_callback_query(const telegram_call& c);
  method_result edit_message(const telegram_call& c, bool text);
  method_result send_chat_action(const telegram_call& c);
  method_result set_webhook(const telegram_call& c);
  method_result delete_webhook(const telegram_call& c);
  method_result get_webhook_info();

  // All below are guarded by mtx_.
  std::optional<method_result> chat_problem(int64_t chat_id) const;
  std::string chat_json(int64_t chat_id) const;
  void learn(const rapidjson::Value& update);
  void learn_message(const rapidjson::Value& msg);
  int64_t insert_update(rapidjson::Document& doc);
  std::vector<const stored_update*> deliverable(size_t limit) const;

  fake_telegram_options options_;
  mutable std::mutex mtx_;
  mutable std::condition_variable changed_;
  bool stopping_ = false;
  std::vector<telegram_call> calls_;
  std::deque<stored_update> updates_;
  int64_t next_update_id_;
  int64_t confirmed_ = 0;
  /// Incremented by every getUpdates: a waiting poll whose number is no
  /// longer the latest answers 409.
  uint64_t poll_generation_ = 0;
  /// Kinds getUpdates delivers (empty: all but the three opt-in kinds).
  std::vector<std::string> allowed_updates_;
  std::map<std::string, std::deque<telegram_fault>> faults_;
  std::map<int64_t, telegram_chat> chats_;
  std::set<int64_t> blocked_;
  /// Messages the fake has seen or sent, as JSON: (chat, message_id).
  std::map<std::pair<int64_t, int64_t>, std::string> messages_;
  std::map<int64_t, int64_t> next_message_id_;
  std::map<int64_t, std::vector<telegram_sent_message>> sent_;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> reactions_;
  std::string webhook_url_;
  std::string webhook_secret_;
  /// Files by file_id (bytes) and file_path (file_id), and downloads.
  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> file_paths_;
  size_t downloads_ = 0;
  /// Last member: the server threads call into everything above.
  loopback_server server_;
};

} // namespace butlers::test
