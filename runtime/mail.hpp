#pragma once

// Mail in and out: an RFC 5322 message read with GMime 3 into the fields
// Butlers uses, mapped to an `ingest.v1` envelope, and the RFC 5322 text of
// a reply to one. Plain functions, safe on any thread (GMime is initialised
// once, and every call works on objects of its own); no GMime type leaks
// out of runtime/mail.cpp.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attachments.hpp"

namespace butlers {

/// Initialises GMime, once per process and from any thread; every function
/// here calls it first, so callers need not.
void init_mail_library();

/// One mailbox of an address header.
struct mail_address {
  /// `user@example.org` (the domain lower-cased); never empty.
  std::string address;
  /// The display name, decoded to UTF-8; "" when absent.
  std::string name;
};

/// A file a mail carries: a leaf part that is not its body text.
struct mail_attachment {
  /// The part's file name (Content-Disposition `filename`, else Content-Type
  /// `name`), decoded; "" when it has none.
  std::string name;
  /// `type/subtype`, lower case.
  std::string media_type;
  /// The content with its transfer encoding undone.
  std::string bytes;
};

/// What Butlers reads of a mail.
struct mail_message {
  /// `Message-ID` without its angle brackets; "" when absent.
  std::string message_id;
  /// The first mailbox of `From`.
  mail_address from;
  /// `To`, in order (groups flattened).
  std::vector<mail_address> to;
  /// `Reply-To`, in order; replies go there when it is present.
  std::vector<mail_address> reply_to;
  /// `Subject`, RFC 2047 encoded words decoded to UTF-8; "" when absent.
  std::string subject;
  /// `Date` as RFC 3339 in its own offset (e.g. 2024-03-01T09:30:00+01:00);
  /// "" when absent or unreadable.
  std::string date;
  /// `Date` as Unix microseconds; 0 when `date` is "".
  int64_t date_us = 0;
  /// The first id of `In-Reply-To`, without brackets; "" when absent.
  std::string in_reply_to;
  /// The ids of `References` in order, without brackets.
  std::vector<std::string> references;
  /// `Auto-Submitted` (RFC 3834) as written, "" when absent: anything but
  /// "no" marks a mail no automatic reply may answer (bounces, vacation
  /// notices), which breaks mail loops.
  std::string auto_submitted;
  /// The body as UTF-8: the first text/plain part that is not an
  /// attachment (in any multipart, however nested), else the text of the
  /// first text/html part; transfer encodings undone, charsets converted.
  std::string text;
  /// `text` was derived from HTML.
  bool text_from_html = false;
  /// Its files, in MIME order: every leaf part (however nested) but the
  /// body parts: attachments, and inline parts other than text/plain and
  /// text/html (inline images). An attached message (message/rfc822) is
  /// not walked into; empty parts are left out.
  std::vector<mail_attachment> attachments;
  /// What the parser forgave (e.g. "truncated message"); empty for a
  /// well-formed mail.
  std::vector<std::string> warnings;
  /// Lower-case hex SHA-256 of the raw bytes: the mail's identity when it
  /// has no Message-ID, so reading the same file twice dedupes.
  std::string content_sha256;
};

/// A parsed mail, or why there is none.
struct mail_parse_result {
  std::optional<mail_message> message;
  /// Why the bytes are not a usable mail ("" when `message` is set): no
  /// headers, no From mailbox, no text body, too deeply nested, ...
  std::string error;
};

/// Reads an RFC 5322 message. A mail must have a From mailbox and a text
/// body (text/plain or text/html) or a file; anything else is an error
/// with its reason. Lenient where mail in the wild needs it: 8-bit headers and
/// bodies without a charset are read as UTF-8 when they are, else as
/// Windows-1252; malformed encoded words are decoded where possible; a
/// multipart cut short keeps the text that arrived (and says so in
/// `warnings`).
mail_parse_result parse_mail(std::string_view bytes);

/// The first mailbox of the address text `text` (`addr@host`, `Name
/// <addr@host>`, encoded words allowed), or nullopt when it holds none
/// with an '@'.
std::optional<mail_address> parse_mail_address(std::string_view text);

/// `text` from an HTML document: tags dropped (script, style and comments
/// with their content), block elements and <br> as line breaks, character
/// references decoded (numeric ones, and the named ones mail uses), runs of
/// blanks collapsed and at most one empty line in a row.
std::string html_to_text(std::string_view html);

/// `text` as valid UTF-8 without NUL or other C0 controls except tab and
/// line feed (CR LF and lone CR become LF): what may go into an envelope
/// and PostgreSQL. Invalid sequences become U+FFFD.
std::string clean_mail_text(std::string_view text);

/// `bytes` in charset `charset` (a MIME charset name, "" when none was
/// declared) as UTF-8: undeclared, US-ASCII and UTF-8 text is taken as
/// UTF-8 when it is valid, else read as Windows-1252 (what mail without a
/// charset almost always is); ISO-8859-1 is read as its superset
/// Windows-1252, as browsers and mail readers do; an unknown charset is
/// treated as undeclared. Bytes invalid in the charset become U+FFFD.
std::string charset_to_utf8(std::string_view bytes, std::string_view charset);

/// At most `max_code_points` code points of the UTF-8 text `s`, cut at a
/// code point boundary.
std::string truncate_utf8(std::string_view s, size_t max_code_points);

// -- mail -> ingest.v1 ----------------------------------------------------

/// What `mail_to_ingest` needs besides the mail.
struct mail_ingest_options {
  /// `source.endpoint_identity`: the mailbox that received the mail.
  std::string mailbox;
  /// `event.observed_at` when the mail has no usable Date (Unix µs).
  int64_t now_us = 0;
  /// The stored files, as `payload.attachments`.
  std::vector<attachment_ref> attachments;
  /// A line each for files not taken (over a cap), added to the text.
  std::vector<std::string> left_out;
};

/// Most code points of `payload.normalized_text` (the schema's maxLength).
constexpr size_t mail_max_text = 65536;

/// The `ingest.v1` envelope (JSON text) of a mail:
/// - `source`: channel "email", provider "imap", endpoint_identity the
///   mailbox;
/// - `event.external_event_id`: the Message-ID (dedupe key
///   `email:<mailbox>:<Message-ID>`), or `sha256:<content hash>` without
///   one; ids longer than the schema's 256 code points are replaced by
///   `sha256:` + their hash;
/// - `event.external_thread_id`: the thread root, the first id of
///   References, else In-Reply-To, else the mail's own id;
/// - `event.observed_at`: the Date (UTC), else `now_us`;
/// - `sender.identity`: the From address;
/// - `payload.normalized_text`: subject, an empty line, the body text,
///   cut to `mail_max_text` code points, then a line per file in
///   `opts.left_out`;
/// - `payload.raw`: the headers a reply needs, under stable names (see
///   `mail_raw_fields`), never the body;
/// - `payload.attachments`: `opts.attachments`, when there are any.
std::string mail_to_ingest(const mail_message& m,
                           const mail_ingest_options& opts);

/// `event.external_event_id` of a mail's envelope (see `mail_to_ingest`):
/// its Message-ID, or `sha256:<content hash>` without one.
std::string mail_event_id(const mail_message& m);

/// The names and shapes of `payload.raw` in a mail's envelope. The SMTP
/// adapter reads them back from the stored request; keep them stable:
/// - `message_id`: string, without brackets ("" when absent);
/// - `subject`: string;
/// - `from`: {"address": string, "name": string};
/// - `to`, `reply_to`: arrays of {"address", "name"};
/// - `date`: string, RFC 3339 ("" when absent);
/// - `in_reply_to`: string ("" when absent);
/// - `references`: array of strings;
/// - `auto_submitted`: string, the Auto-Submitted header ("" when absent);
/// - `warnings`: array of strings, present only when the parser forgave
///   something.
struct mail_raw_fields {
  std::string message_id;
  std::string subject;
  mail_address from;
  std::vector<mail_address> to;
  std::vector<mail_address> reply_to;
  std::string date;
  std::string in_reply_to;
  std::vector<std::string> references;
  std::string auto_submitted;

  /// An automatic reply to this mail is allowed (RFC 3834 §2): it has no
  /// Auto-Submitted other than "no".
  bool may_auto_reply() const;
};

/// Reads `payload.raw` of a stored mail envelope (the whole `ingest.v1`
/// text, as `message_inbox.raw_payload` holds it); nullopt when it is not
/// one (not JSON, or no `payload.raw.from.address`).
std::optional<mail_raw_fields> read_mail_raw(std::string_view envelope);

// -- replies ------------------------------------------------------------------

/// "Re: " + `subject`, unless it already starts with "Re:" (any case, after
/// blanks); "Re: " alone for an empty subject is "Re: (no subject)".
std::string reply_subject(std::string_view subject);

/// What a reply (or a first mail) is made of.
struct mail_draft {
  /// From: `addr@host` or `Name <addr@host>` (the adapter's `from`).
  std::string from;
  /// The recipient's address.
  std::string to;
  /// The subject as it goes out (see `reply_subject`).
  std::string subject;
  /// The body, UTF-8.
  std::string text;
  /// The answered mail's Message-ID (no brackets); "" for a first mail.
  std::string in_reply_to;
  /// The answered mail's References; the reply's are these plus
  /// `in_reply_to`, the oldest dropped beyond `mail_max_references` (the
  /// first, the thread root, is always kept).
  std::vector<std::string> references;
  /// Makes the Message-ID: the same key gives the same id, so a redelivery
  /// of one reply carries one id and the recipient's client collapses
  /// duplicates.
  std::string delivery_key;
  /// Date, Unix microseconds.
  int64_t date_us = 0;
};

/// Most ids in a reply's References.
constexpr size_t mail_max_references = 20;

/// A composed mail ready for SMTP.
struct composed_mail {
  /// RFC 5322 text with CRLF line ends.
  std::string rfc822;
  /// Its Message-ID, no brackets.
  std::string message_id;
  /// The envelope sender (the address of `from`).
  std::string envelope_from;
};

/// The reply's RFC 5322 text: From, To, Subject, Date, Message-ID
/// (`<hash of delivery_key>@<domain of from>`), In-Reply-To and References
/// when answering, MIME-Version 1.0, one text/plain part in UTF-8 with the
/// transfer encoding GMime finds best for 7-bit transport. Nullopt, with
/// `error` set, when `from` or `to` is not an address.
std::optional<composed_mail> compose_mail(const mail_draft& d,
                                          std::string* error);

/// The Message-ID `compose_mail` gives a draft with this key and sender
/// domain.
std::string reply_message_id(std::string_view delivery_key,
                             std::string_view from_domain);

} // namespace butlers
