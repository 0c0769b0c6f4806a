#pragma once

// Slack's Web API as the messenger's slack adapter speaks it, as plain
// functions: long texts split for chat.postMessage, the message a request
// came from (read from its stored Events API callback), the JSON bodies of
// chat.postMessage, reactions.add and reactions.remove, and what an answer
// means. No I/O here (runtime/slack_adapter.hpp sends).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/http_client.hpp"

namespace butlers {

/// chat.postMessage truncates `text` beyond 40,000 characters, and Slack
/// recommends keeping a message under 4,000: replies are split there (in
/// code points, on line or word boundaries, never inside a UTF-8
/// sequence; see `split_telegram_text`, whose rule this is).
constexpr size_t slack_text_limit = 40000;
constexpr size_t slack_chunk_chars = 4000;

/// Splits `text` into chunks of at most `limit` code points (at most
/// `slack_text_limit`).
std::vector<std::string> split_slack_text(std::string_view text,
                                          size_t limit = slack_chunk_chars);

/// A message in a conversation.
struct slack_message_ref {
  /// The conversation's id ("C123ABC456", "D0123", "G0456").
  std::string channel;
  /// The message's `ts`.
  std::string ts;
  /// The thread a reply goes to: the message's `thread_ts` when it is in a
  /// thread, else its own `ts` (the reply starts a thread under it).
  std::string thread_ts;
};

/// The message a request came from, read from its inbox row's raw_payload:
/// an ingest.v1 body whose payload.raw is an Events API `event_callback`
/// (or the callback itself) whose `event` has string `channel` and `ts`.
/// Nullopt for anything else.
std::optional<slack_message_ref> slack_source(std::string_view raw_payload);

/// The JSON body of chat.postMessage: `text` to `channel`, in the thread
/// `thread_ts` when it is not empty.
std::string slack_post_message_body(std::string_view channel,
                                    std::string_view text,
                                    std::string_view thread_ts);

/// The JSON body of reactions.add and reactions.remove: emoji `name` on
/// the message.
std::string slack_reaction_body(const slack_message_ref& msg,
                                std::string_view name);

/// True for a Slack emoji name as reactions.add takes it: 1..100 of
/// `a-z0-9_+-'`, optionally "::skin-tone-2".."::skin-tone-6".
bool is_slack_emoji_name(std::string_view name);

/// What a Web API call came to.
struct slack_answer {
  enum class outcome {
    /// Done; `ts` holds chat.postMessage's ts.
    ok,
    /// Try again after `wait` (0: after a backoff).
    retry,
    /// Failed for good.
    fail,
  };
  outcome what = outcome::fail;
  /// retry, fail: the class of the taxonomy, and what went wrong.
  std::string error_class;
  std::string description;
  /// ok:false: Slack's `error` ("not_in_channel", ...).
  std::string slack_error;
  /// retry: what Slack asked for (429 `Retry-After`).
  std::chrono::milliseconds wait{0};
  /// retry: the call may have been carried out although no answer said so.
  bool ambiguous = false;
  /// ok: chat.postMessage's `ts` ("" for other methods).
  std::string ts;
};

/// Reads the answer to a Web API call. 200 with "ok":true is ok; 429
/// retries after `Retry-After` (overload_rejected); 5xx, timeouts and
/// broken or refused connections retry (target_unavailable, timeout);
/// "ok":false is for good, with a class per error: not_in_channel
/// target_unavailable, channel_not_found validation_error, invalid_auth
/// (and not_authed, account_inactive, token_revoked) internal_error,
/// ratelimited retries (overload_rejected), anything else validation_error.
slack_answer read_slack_answer(const http_response& r);

} // namespace butlers
