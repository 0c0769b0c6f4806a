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
//   message's `text`, else its `caption`, else "" for a message that is
//   only media; a message with none of these (a sticker, a location) is
//   ignored;
// - media (runtime/attachments.md): a `photo` (its largest size that fits
//   the attachment cap), `document`, `voice`, `audio`, `video` or
//   `video_note` is listed in `media` for the connector to download
//   (getFile) and store; it adds payload.attachments (`with_attachments`)
//   before it submits the envelope.
//
// Anything that is not an Update of that shape (not JSON, no integer
// update_id, a message without chat or date, a text that is not a string)
// is invalid. Nothing here throws or trusts the input.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "runtime/attachments.hpp"

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

/// A file of a message, to be fetched with getFile.
struct telegram_media {
  /// "photo", "document", "voice", "audio", "video", "video_note".
  std::string kind;
  std::string file_id;
  /// `file_size` when Telegram gave it.
  std::optional<uint64_t> file_size;
  /// The MIME type (Telegram's `mime_type`, else the kind's usual one).
  std::string media_type;
  /// `file_name`, else a name for the kind ("photo.jpg", "voice.ogg").
  std::string name;
};

/// The media of a message object (`photo`, `document`, ...). For a photo,
/// the largest size whose `file_size` is at most `max_bytes` (unknown
/// sizes count as fitting); when none fits, the smallest, which the
/// connector then refuses as over the cap.
std::vector<telegram_media> telegram_media_of(const rapidjson::Value& msg,
                                              uint64_t max_bytes);

/// `envelope` (ingest.v1 text made by `map_telegram_update`) with
/// payload.attachments set to `xs`.
std::string with_attachments(std::string envelope,
                             const std::vector<attachment_ref>& xs);

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
  /// verdict envelope: the message's files, to fetch and store before the
  /// envelope is submitted (none for a text message).
  std::vector<telegram_media> media;
  /// verdict envelope: the chat (where a refusal goes).
  int64_t chat_id = 0;
  /// verdict envelope: the message has a text or caption (else it is only
  /// media).
  bool has_text = false;
};

/// Maps an Update given as JSON text (a webhook's body) for the bot
/// `endpoint_identity`; the text becomes payload.raw as it is.
telegram_update_mapping map_telegram_update(
  std::string_view update_json, std::string_view endpoint_identity,
  uint64_t max_attachment_bytes = attachment_limits{}.max_bytes);

/// Maps a parsed Update (an element of getUpdates' result); `update_json` is
/// its text, which becomes payload.raw.
telegram_update_mapping map_telegram_update(
  const rapidjson::Value& update, std::string_view update_json,
  std::string_view endpoint_identity,
  uint64_t max_attachment_bytes = attachment_limits{}.max_bytes);

/// RFC 3339 UTC ("2015-09-07T17:05:32Z") of a Unix time in seconds; empty
/// for a time before 1970 or after 9999.
std::string rfc3339_of_unix_s(int64_t unix_s);

} // namespace butlers
