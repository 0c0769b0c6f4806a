#pragma once

// Attachments (photos, voice notes, documents) as the node carries them
// (runtime/attachments.md): the bytes live once in the content-addressed
// table `attachments` (sha256 key), stored before the message that names
// them; `ingest.v1` payload.attachments[] and route.v1
// input.context.attachments carry only references. Here: the reference
// type and its JSON, the caps, hashing and base64, and the content blocks
// each model runtime is given. Pure logic, no database, no actors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

namespace butlers {

/// One attachment as messages name it.
struct attachment_ref {
  /// Lower-case hex SHA-256 of the bytes: the key of `attachments`.
  std::string sha256;
  /// MIME type, e.g. "image/jpeg" ("application/octet-stream" when the
  /// source did not say).
  std::string media_type;
  /// Size in bytes.
  uint64_t size = 0;
  /// File name as the sender gave it ("" when none).
  std::string name;
};

/// An attachment with its bytes, base64-encoded, as a session is given it.
struct attachment_data {
  attachment_ref ref;
  /// The bytes in standard base64 (no line breaks).
  std::string base64;
};

/// The caps (`[attachments]` in the node's config, config/README.md).
struct attachment_limits {
  /// Largest single attachment, bytes (default 20 MB: the Bot API's
  /// getFile limit).
  uint64_t max_bytes = 20u * 1024 * 1024;
  /// Largest sum of one message's attachments, bytes.
  uint64_t max_message_bytes = 20u * 1024 * 1024;
  /// Most attachments one message carries.
  uint32_t max_count = 10;
  /// Days an attachment's row is kept after it was last stored.
  uint32_t retention_days = 30;
};

/// Most attachments the schemas accept in one message, whatever the config.
constexpr uint32_t max_attachments_per_message = 32;

/// `[{"sha256","media_type","size","name"}...]` ("[]" for none).
std::string attachments_json(const std::vector<attachment_ref>& xs);

/// Reads an array rendered by `attachments_json` (or validated by the
/// ingest or route schema); entries that are not such objects are skipped.
std::vector<attachment_ref> parse_attachments(const rapidjson::Value& v);
std::vector<attachment_ref> parse_attachments(std::string_view json_text);

/// The `payload.attachments` of an ingest.v1 envelope (JSON text) as
/// rendered by `attachments_json`; "" when it has none or is not JSON.
std::string attachments_of_payload(std::string_view envelope);

/// The references of `xs`.
std::vector<attachment_ref> attachment_refs(
  const std::vector<attachment_data>& xs);

/// Lower-case hex SHA-256 of `bytes`.
std::string attachment_hash(std::string_view bytes);

/// Standard base64 of `bytes`, without line breaks.
std::string base64_encode(std::string_view bytes);

/// Decodes standard base64 (line breaks and spaces ignored); nullopt when
/// it is not base64.
std::optional<std::string> base64_decode(std::string_view text);

/// Why `xs` may not be stored under `limits` ("" when it may): the first
/// attachment over `max_bytes`, the sum over `max_message_bytes`, or more
/// than `max_count`. The message names the attachment and the cap.
std::string over_cap(const std::vector<attachment_ref>& xs,
                     const attachment_limits& limits);

// -- the thread API -----------------------------------------------------------

/// A file sent with a thread turn, decoded.
struct turn_file {
  attachment_ref ref; ///< sha256 and size filled from the bytes
  std::string bytes;
};

/// Why a turn's `attachments` were refused.
enum class turn_files_error : uint8_t {
  none,
  /// Malformed: a 400 naming the field.
  invalid,
  /// Over a cap (`[attachments]`): a 413 naming the file and the limit.
  over_cap,
};

/// Reads the `attachments` of a turn body (`[{"name", "media_type",
/// "data"}]`, data in standard base64) into `out`, checked against
/// `caps`; an absent or empty array is none. On error, `message` names the
/// field (`attachments[1].data`) or the file and the limit.
turn_files_error parse_turn_attachments(const rapidjson::Value& body,
                                        const attachment_limits& caps,
                                        std::vector<turn_file>& out,
                                        std::string& message);

// -- what each runtime is given ----------------------------------------------

/// How a runtime takes an attachment of `media_type`.
enum class attachment_block_kind : uint8_t {
  /// image/jpeg, image/png, image/gif, image/webp: an image block.
  image,
  /// application/pdf: a document block (Anthropic, Claude) or a file part
  /// (OpenAI).
  document,
  /// Anything else (voice, audio, video, other files): a text line naming
  /// it, since the model APIs take no such block.
  note,
};

attachment_block_kind block_kind_of(std::string_view media_type);

/// The text line that names an attachment a runtime cannot take as a block.
std::string attachment_note(const attachment_ref& x);

/// A line per attachment of `refs_json` (attachments_json), each after a
/// newline: for input that reaches a run as text only (steer input, a
/// queued turn). "" for none.
std::string attachment_notes(std::string_view refs_json);

/// Claude (stream-json user message, Anthropic Messages): the content array
/// `[{"type":"text","text":...},{"type":"image","source":{"type":"base64",
/// "media_type","data"}},{"type":"document","source":...}]`.
std::string anthropic_content(std::string_view text,
                              const std::vector<attachment_data>& xs);

/// OpenAI chat completions: the content array `[{"type":"text","text"},
/// {"type":"image_url","image_url":{"url":"data:<type>;base64,<data>"}},
/// {"type":"file","file":{"filename","file_data":"data:..."}}]`.
std::string openai_content(std::string_view text,
                           const std::vector<attachment_data>& xs);

/// CLI and external runtimes: the lines added to the prompt that list the
/// files written for the session (`paths[i]` holds `xs[i]`).
std::string attachment_file_list(const std::vector<attachment_ref>& xs,
                                 const std::vector<std::string>& paths);

/// A file name safe to write in a session's directory for `x` (its index
/// first, then its name with anything but [A-Za-z0-9._-] replaced).
std::string attachment_file_name(size_t index, const attachment_ref& x);

} // namespace butlers
