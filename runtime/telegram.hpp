#pragma once

// The Telegram Bot API as the messenger's telegram adapter speaks it, as
// plain functions: long texts split at Telegram's limit, the chat and
// message a request came from (read from its stored Update), the bodies of
// sendMessage and setMessageReaction, and what an answer means (sent, try
// again after a while, or failed for good with a class of the taxonomy).
// No I/O here (runtime/telegram_adapter.hpp sends).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/http_client.hpp"

namespace butlers {

/// Telegram's limit on a message's text, in characters as it counts them:
/// Unicode code points (an emoji outside the BMP is one, not two UTF-16
/// units; measured: 4096 astral characters pass, 4097 do not).
constexpr size_t telegram_text_limit = 4096;

/// Splits `text` into messages of at most `limit` code points each, never
/// inside a UTF-8 sequence. A chunk ends after the last newline within the
/// limit when there is one in its second half, else after the last space
/// there, else at the limit. Whitespace-only chunks (Telegram refuses an
/// empty text) are dropped; an empty or all-whitespace text gives one chunk
/// holding `text` unchanged. Invalid UTF-8 bytes count as one character
/// each.
std::vector<std::string> split_telegram_text(
  std::string_view text, size_t limit = telegram_text_limit);

/// The number of characters Telegram counts in `text` (see
/// `telegram_text_limit`).
size_t telegram_length(std::string_view text);

/// A message in a chat.
struct telegram_message_ref {
  /// The chat's id as text (e.g. "42", "-1001234567890").
  std::string chat_id;
  int64_t message_id = 0;
};

/// The message a request came from, read from its inbox row's raw_payload:
/// an ingest.v1 body whose payload.raw is a Telegram Update (or an Update
/// itself) with `message`, `edited_message`, `channel_post` or
/// `edited_channel_post`, each with `message_id` and `chat.id`. Nullopt
/// for anything else.
std::optional<telegram_message_ref> telegram_source(
  std::string_view raw_payload);

/// The JSON body of sendMessage: `text` to `chat_id` (a number when the id
/// is one, else a string such as "@channel"), replying to `reply_to` when
/// it is not 0 (`reply_parameters` with allow_sending_without_reply, so a
/// deleted source message does not stop the answer).
std::string telegram_send_message_body(const std::string& chat_id,
                                       std::string_view text, int64_t reply_to);

/// The JSON body of setMessageReaction: `emoji` as the bot's only reaction
/// on the message.
std::string telegram_reaction_body(const telegram_message_ref& msg,
                                   std::string_view emoji);

/// The JSON body of sendChatAction: `action` ("typing") in chat `chat_id`.
std::string telegram_chat_action_body(const std::string& chat_id,
                                      std::string_view action = "typing");

/// What a Bot API call came to.
struct telegram_answer {
  enum class outcome {
    /// Done; `message_id` holds sendMessage's result.message_id.
    ok,
    /// Try again after `wait` (0: after a backoff).
    retry,
    /// Failed for good.
    fail,
  };
  outcome what = outcome::fail;
  /// retry, fail: the class of the taxonomy and what went wrong.
  std::string error_class;
  std::string description;
  /// retry: what Telegram asked for (429 parameters.retry_after).
  std::chrono::milliseconds wait{0};
  /// retry: the call may have been carried out although no answer said so
  /// (a timeout, a broken connection, a front end's 502/504): sending again
  /// may duplicate it.
  bool ambiguous = false;
  /// ok: sendMessage's message_id ("" for other methods).
  std::string message_id;
};

/// Reads the answer to a Bot API call (see the file comment): 200 with
/// "ok":true is ok; 429 retries after parameters.retry_after
/// (overload_rejected); 5xx, timeouts and broken or refused connections
/// retry (target_unavailable, timeout); 400 is validation_error and
/// 401/403/404 target_unavailable, both for good; anything else is
/// internal_error for good.
telegram_answer read_telegram_answer(const http_response& r);

} // namespace butlers
