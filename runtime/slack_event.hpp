#pragma once

// Slack's Events API (https://api.slack.com/apis/events-api) as a `slack`
// connector takes it (actors/SLACK.md "Connect Slack"), as plain functions:
//
// - the request signature (https://api.slack.com/authentication/
//   verifying-requests-from-slack): `X-Slack-Signature` is "v0=" and the
//   hex HMAC-SHA256, keyed with the app's signing secret, of
//   "v0:{X-Slack-Request-Timestamp}:{body}"; a timestamp more than five
//   minutes from now is refused (a replay);
// - the body: a `url_verification` handshake (answer its `challenge`), or
//   an `event_callback` whose `event` is mapped to `ingest.v1`:
//   - `message` (no subtype, or `thread_broadcast` / `file_share`) and
//     `app_mention` with a string `text` become an envelope; every other
//     event type is ignored, and so are the bot's own messages (`bot_id`,
//     subtype `bot_message`, or `user` the connector's endpoint_identity),
//     edits (`message_changed`) and deletions (`message_deleted`), each
//     with its own reason (`slack_ignore_reason`), counted apart;
//   - source: channel and provider "slack", endpoint_identity the
//     connector's (the bot user id);
//   - event: external_event_id "{channel}:{ts}", the message's identity:
//     Slack's retry of an event (same `event_id`) and the `message` and
//     `app_mention` events Slack sends for one mention in a channel are one
//     request; external_thread_id "{channel}:{thread_ts or ts}" (a reply in
//     a thread continues its conversation), observed_at the message's `ts`;
//   - sender.identity: the user id (`user`);
//   - payload.raw: the whole callback, verbatim (the messenger reads the
//     channel, `ts` and `thread_ts` from it to reply and react);
//     payload.normalized_text: `text` without a leading mention of the bot.
//
// Anything else (not JSON, an `event_callback` without `event`, a message
// without channel, ts or user, a text that is not a string) is invalid.
// Nothing here throws or trusts the input.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace butlers {

// -- signatures ---------------------------------------------------------------

/// How far `X-Slack-Request-Timestamp` may be from now, in seconds.
constexpr int64_t slack_max_clock_skew_s = 300;

/// What a signature check came to.
enum class slack_signature_status : uint8_t {
  /// Signed with the secret, recently.
  valid,
  /// No signing secret is configured: nothing can be verified.
  no_secret,
  /// `X-Slack-Signature` or `X-Slack-Request-Timestamp` is missing, or the
  /// timestamp is not a number.
  missing,
  /// The timestamp is more than `slack_max_clock_skew_s` from `now_s`.
  stale,
  /// The signature is not "v0=" and the HMAC of the secret.
  mismatch,
};

/// "valid", "no_secret", "missing", "stale", "mismatch".
const char* to_string(slack_signature_status x);

/// "v0=" and the lower-case hex HMAC-SHA256 of "v0:{timestamp}:{body}"
/// keyed with `secret` (what Slack sends as `X-Slack-Signature`).
std::string slack_signature(std::string_view secret, std::string_view timestamp,
                            std::string_view body);

/// Checks a request's signature at Unix time `now_s`; compares in constant
/// time (CRYPTO_memcmp).
slack_signature_status verify_slack_signature(
  std::string_view secret, std::optional<std::string_view> timestamp,
  std::optional<std::string_view> signature, std::string_view body,
  int64_t now_s);

// -- events -------------------------------------------------------------------

/// What became of one Events API request body.
enum class slack_event_verdict : uint8_t {
  /// `envelope` holds the ingest.v1 text to submit.
  envelope,
  /// A `url_verification` handshake: answer `challenge`.
  challenge,
  /// Not taken (see `slack_ignore_reason`): acknowledge, count, store
  /// nothing.
  ignored,
  /// Not a body the connector can read: acknowledge (a retry cannot help),
  /// count, log, store nothing.
  invalid,
};

/// "envelope", "challenge", "ignored", "invalid".
const char* to_string(slack_event_verdict x);

/// Why an event was ignored (each counted apart).
enum class slack_ignore_reason : uint8_t {
  /// Not ignored.
  none,
  /// The bot's own message (or another bot's).
  bot,
  /// subtype message_changed.
  edit,
  /// subtype message_deleted.
  deletion,
  /// Another subtype (channel_join, ...), another event type, or a
  /// callback type that is not an event.
  other,
};

/// "", "bot", "edit", "deletion", "other".
const char* to_string(slack_ignore_reason x);

struct slack_event_mapping {
  slack_event_verdict verdict = slack_event_verdict::invalid;
  /// envelope: the ingest.v1 JSON text; challenge: the challenge.
  std::string envelope;
  std::string challenge;
  /// ignored.
  slack_ignore_reason ignored = slack_ignore_reason::none;
  /// ignored, invalid: why, for logs (never the message's content).
  std::string reason;
  /// The callback's `event_id` when it has one (for logs).
  std::string event_id;
};

/// Maps an Events API request body for the connector whose bot user id is
/// `endpoint_identity`; the body becomes payload.raw as it is.
slack_event_mapping map_slack_event(std::string_view body,
                                    std::string_view endpoint_identity);

} // namespace butlers
