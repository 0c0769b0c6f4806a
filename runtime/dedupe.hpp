#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace butlers {

/// What the channel-aware dedupe key of spec 001 §10.2 is computed from:
/// the identifying fields of an `ingest.v1` envelope.
struct dedupe_input {
  /// `source.channel`, e.g. "telegram", "email", "api".
  std::string_view channel;
  /// `source.endpoint_identity`: the bot, mailbox or client that received it.
  std::string_view endpoint_identity;
  /// `event.external_event_id`: Telegram update_id, email Message-ID, ...
  std::string_view external_event_id;
  /// `sender.identity`.
  std::string_view sender_identity;
  /// `control.idempotency_key`, empty when absent.
  std::string_view idempotency_key;
  /// `payload.normalized_text`.
  std::string_view normalized_text;
  /// When the switchboard received the event (Unix seconds).
  int64_t received_at_s = 0;
};

/// Computes the canonical dedupe key (spec 001 §10.2):
/// - telegram: `tg:<bot>:<update_id>`;
/// - slack: `slack:<bot>:<channel>:<ts>` (the external event id a slack
///   connector gives a message: runtime/slack_event.hpp);
/// - email: `email:<mailbox>:<Message-ID>` (angle brackets and surrounding
///   blanks stripped, so `<a@b>` and `a@b` collide as they should);
/// - any channel with an idempotency key: `idem:<channel>:<endpoint>:<key>`;
/// - otherwise `hash:` + SHA-256 over the channel, endpoint, sender, the
///   whitespace-normalized text and the time bucket
///   `received_at_s / window_s`. Two identical texts in one bucket collide;
///   the same text in the next bucket is a new request.
/// Fields are length-prefixed before hashing, so no choice of field contents
/// can make two different inputs produce the same pre-image.
/// A telegram, slack or email event without an external id falls through to the
/// idempotency-key or hash rules.
std::string dedupe_key(const dedupe_input& in, uint32_t window_s);

/// Collapses runs of white space to one space and trims both ends.
std::string normalize_whitespace(std::string_view text);

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

} // namespace butlers
