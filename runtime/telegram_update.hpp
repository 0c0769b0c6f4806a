#pragma once

// A Telegram Update (https://core.telegram.org/bots/api#update) as the
// `ingest.v1` envelope a connector submits (actors/README.md "Connectors"):
//
// - kinds `message`, `edited_message`, `channel_post` become an envelope;
//   every other kind (callback_query, my_chat_member, ...) is ignored;
// - source: channel and provider "telegram", endpoint_identity the bot (the
//   connector's `endpoint_identity`);
// - event: external_event_id the `update_id` (dedupe: update_id + bot),
//   external_thread_id the chat id, observed_at the message's `date` (an
//   edit's `edit_date`) in RFC 3339 UTC;
// - sender.identity: the numeric user id (`from.id`); a message without
//   `from` (a channel post) is the sending chat's (`sender_chat.id`, else
//   `chat.id`). The username, when there is one, is in payload.raw
//   (`message.from.username`): ids are stable, usernames change and are
//   optional;
// - payload.raw: the Update itself, verbatim (the messenger reads chat.id and
//   message_id from it to reply and react), payload.normalized_text: the
//   message's `text`, else its `caption`; a message with neither (a sticker,
//   a photo without caption) is ignored.
//
// Anything that is not an Update of that shape (not JSON, no integer
// update_id, a message without chat or date, a text that is not a string)
// is invalid. Nothing here throws or trusts the input.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace butlers {

/// What became of one Update.
enum class update_verdict : uint8_t {
  /// `envelope` holds the ingest.v1 text to submit.
  envelope,
  /// A kind the connector does not take: acknowledge, count, store nothing.
  ignored,
  /// Not an Update the connector can read: acknowledge (retrying cannot
  /// help), count, log, store nothing.
  invalid,
};

/// "envelope", "ignored", "invalid".
const char* to_string(update_verdict x);

struct telegram_update_mapping {
  update_verdict verdict = update_verdict::invalid;
  /// verdict envelope: the ingest.v1 JSON text.
  std::string envelope;
  /// ignored, invalid: why, for logs (never the message's content).
  std::string reason;
  /// The Update's update_id when it has a valid one (also when ignored or
  /// invalid: a poller confirms past it).
  std::optional<int64_t> update_id;
  /// The Update's kind ("message", "callback_query", ...) when known.
  std::string kind;
};

/// Maps an Update given as JSON text (a webhook's body) for the bot
/// `endpoint_identity`; the text becomes payload.raw as it is.
telegram_update_mapping map_telegram_update(std::string_view update_json,
                                            std::string_view endpoint_identity);

/// Maps a parsed Update (an element of getUpdates' result); `update_json` is
/// its text, which becomes payload.raw.
telegram_update_mapping map_telegram_update(const rapidjson::Value& update,
                                            std::string_view update_json,
                                            std::string_view endpoint_identity);

/// RFC 3339 UTC ("2015-09-07T17:05:32Z") of a Unix time in seconds; empty
/// for a time before 1970 or after 9999.
std::string rfc3339_of_unix_s(int64_t unix_s);

} // namespace butlers
