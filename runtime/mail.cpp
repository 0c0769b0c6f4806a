#include "runtime/mail.hpp"

#include <algorithm>
#include <memory>
#include <mutex>

#include <gmime/gmime.h>

#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"
#include "runtime/text.hpp"

namespace butlers {

// GMime is initialised once per process and never shut down (its tables
// live as long as the process; every call here uses objects of its own,
// which is how GMime is safe to use from several threads).
void init_mail_library() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_mime_init();
  });
}

namespace {

// -- GMime plumbing -----------------------------------------------------------

void init_gmime() {
  init_mail_library();
}

struct gobject_unref {
  void operator()(gpointer p) const {
    if (p != nullptr)
      g_object_unref(p);
  }
};

template<class T>
using gobject_ptr = std::unique_ptr<T, gobject_unref>;

struct gfree {
  void operator()(gpointer p) const {
    g_free(p);
  }
};

using gchar_ptr = std::unique_ptr<gchar, gfree>;

struct parser_options_free {
  void operator()(GMimeParserOptions* p) const {
    g_mime_parser_options_free(p);
  }
};

struct format_options_free {
  void operator()(GMimeFormatOptions* p) const {
    g_mime_format_options_free(p);
  }
};

struct references_free {
  void operator()(GMimeReferences* p) const {
    g_mime_references_free(p);
  }
};

std::string str(const char* s) {
  return s != nullptr ? std::string{s} : std::string{};
}

/// Most nested multiparts searched for the body (GMime's parser stops
/// deeper nesting with GMIME_CRIT_NESTING_OVERFLOW before this matters).
constexpr int max_depth = 64;

/// What the parser forgave (its warning callback's user data).
struct parse_warnings {
  bool nesting_overflow = false;
  std::vector<std::string> seen;

  void add(const char* what) {
    if (std::find(seen.begin(), seen.end(), what) == seen.end())
      seen.emplace_back(what);
  }
};

void on_parser_warning(gint64, GMimeParserWarning code, const gchar*,
                       gpointer user_data) {
  auto& w = *static_cast<parse_warnings*>(user_data);
  switch (code) {
    case GMIME_WARN_TRUNCATED_MESSAGE: w.add("truncated message"); break;
    case GMIME_WARN_MALFORMED_MULTIPART: w.add("malformed multipart"); break;
    case GMIME_WARN_MALFORMED_MESSAGE: w.add("malformed message"); break;
    case GMIME_CRIT_MULTIPART_WITHOUT_BOUNDARY:
      w.add("multipart without boundary");
      break;
    case GMIME_CRIT_NESTING_OVERFLOW:
      w.nesting_overflow = true;
      w.add("MIME nesting too deep");
      break;
    case GMIME_CRIT_PART_WITHOUT_HEADERS_OR_CONTENT:
      w.add("part without headers or content");
      break;
    default: break; // duplicated headers, 8-bit headers, ...: routine
  }
}

std::unique_ptr<GMimeParserOptions, parser_options_free> make_parser_options(
  parse_warnings* warnings) {
  std::unique_ptr<GMimeParserOptions, parser_options_free> opts{
    g_mime_parser_options_new()};
  g_mime_parser_options_set_rfc2047_compliance_mode(opts.get(),
                                                    GMIME_RFC_COMPLIANCE_LOOSE);
  g_mime_parser_options_set_address_compliance_mode(opts.get(),
                                                    GMIME_RFC_COMPLIANCE_LOOSE);
  g_mime_parser_options_set_parameter_compliance_mode(
    opts.get(), GMIME_RFC_COMPLIANCE_LOOSE);
  // Raw 8-bit header text: UTF-8 when it is, else Windows-1252.
  const char* fallback[] = {"utf-8", "windows-1252", nullptr};
  g_mime_parser_options_set_fallback_charsets(opts.get(), fallback);
  if (warnings != nullptr)
    g_mime_parser_options_set_warning_callback(opts.get(), on_parser_warning,
                                               warnings);
  return opts;
}

/// One line: controls and line breaks as single spaces, trimmed.
std::string one_line(std::string_view s) {
  auto clean = clean_mail_text(s);
  std::string out;
  out.reserve(clean.size());
  bool space = false;
  for (char c : clean) {
    if (c == '\n' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// A message id as it may be stored: no brackets, blanks or controls.
std::string clean_id(std::string_view id) {
  std::string out;
  for (char c : clean_mail_text(id))
    if (c != '<' && c != '>' && !is_ascii_space(c))
      out += c;
  return out;
}

/// `s` with A-Z lower-cased.
std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return s;
}

/// `addr` with its domain lower-cased (the local part is the receiving
/// system's business).
std::string normalize_address(std::string_view addr) {
  std::string out = one_line(addr);
  auto at = out.rfind('@');
  if (at != std::string::npos)
    for (size_t i = at + 1; i < out.size(); ++i)
      if (out[i] >= 'A' && out[i] <= 'Z')
        out[i] = static_cast<char>(out[i] - 'A' + 'a');
  return out;
}

/// The mailboxes of `list`, groups flattened (one level, as RFC 5322
/// allows).
void collect_mailboxes(InternetAddressList* list,
                       std::vector<mail_address>& out, int depth = 0) {
  if (list == nullptr || depth > 1)
    return;
  int n = internet_address_list_length(list);
  for (int i = 0; i < n; ++i) {
    auto* ia = internet_address_list_get_address(list, i);
    if (INTERNET_ADDRESS_IS_GROUP(ia)) {
      collect_mailboxes(internet_address_group_get_members(
                          INTERNET_ADDRESS_GROUP(ia)),
                        out, depth + 1);
      continue;
    }
    if (!INTERNET_ADDRESS_IS_MAILBOX(ia))
      continue;
    auto addr = normalize_address(
      str(internet_address_mailbox_get_addr(INTERNET_ADDRESS_MAILBOX(ia))));
    if (addr.empty())
      continue;
    out.push_back(
      {std::move(addr), one_line(str(internet_address_get_name(ia)))});
  }
}

std::vector<std::string> parse_ids(GMimeParserOptions* opts, const char* v) {
  std::vector<std::string> out;
  if (v == nullptr)
    return out;
  std::unique_ptr<GMimeReferences, references_free> refs{
    g_mime_references_parse(opts, v)};
  if (!refs)
    return out;
  int n = g_mime_references_length(refs.get());
  for (int i = 0; i < n; ++i) {
    auto id = clean_id(str(g_mime_references_get_message_id(refs.get(), i)));
    if (!id.empty())
      out.push_back(std::move(id));
  }
  return out;
}

// -- the body -----------------------------------------------------------------

struct body_parts {
  GMimeTextPart* plain = nullptr;
  GMimeTextPart* html = nullptr;
};

/// Finds the first inline text/plain part and the first inline text/html
/// part, depth first; attached messages and attachments are not the body.
void find_body(GMimeObject* obj, body_parts& found, int depth) {
  if (obj == nullptr || depth > max_depth || found.plain != nullptr)
    return;
  if (GMIME_IS_MULTIPART(obj)) {
    auto* mp = GMIME_MULTIPART(obj);
    int n = g_mime_multipart_get_count(mp);
    for (int i = 0; i < n && found.plain == nullptr; ++i)
      find_body(g_mime_multipart_get_part(mp, i), found, depth + 1);
    return;
  }
  if (!GMIME_IS_TEXT_PART(obj) || g_mime_part_is_attachment(GMIME_PART(obj)))
    return;
  auto* ct = g_mime_object_get_content_type(obj);
  if (g_mime_content_type_is_type(ct, "text", "plain"))
    found.plain = GMIME_TEXT_PART(obj);
  else if (found.html == nullptr
           && g_mime_content_type_is_type(ct, "text", "html"))
    found.html = GMIME_TEXT_PART(obj);
}

/// The part's content with its transfer encoding undone, in its charset.
std::string decoded_bytes(GMimePart* part) {
  auto* content = g_mime_part_get_content(part);
  if (content == nullptr)
    return {};
  gobject_ptr<GMimeStream> mem{g_mime_stream_mem_new()};
  g_mime_data_wrapper_write_to_stream(content, mem.get());
  auto* bytes = g_mime_stream_mem_get_byte_array(GMIME_STREAM_MEM(mem.get()));
  if (bytes == nullptr || bytes->len == 0)
    return {};
  return std::string{reinterpret_cast<const char*>(bytes->data), bytes->len};
}

std::string part_text(GMimeTextPart* part) {
  auto bytes = decoded_bytes(GMIME_PART(part));
  auto charset = str(
    g_mime_object_get_content_type_parameter(GMIME_OBJECT(part), "charset"));
  return charset_to_utf8(bytes, charset);
}

/// A signature part of a signed mail: not a file the person sent.
bool is_signature(GMimeContentType* ct) {
  return g_mime_content_type_is_type(ct, "application", "pgp-signature")
         || g_mime_content_type_is_type(ct, "application", "pkcs7-signature")
         || g_mime_content_type_is_type(ct, "application", "x-pkcs7-signature");
}

/// Adds the leaf parts under `obj` that are not `body`'s parts to `out`,
/// depth first, in MIME order; attached messages are not walked into.
void collect_attachments(GMimeObject* obj, const body_parts& body,
                         std::vector<mail_attachment>& out, int depth) {
  if (obj == nullptr || depth > max_depth)
    return;
  if (GMIME_IS_MULTIPART(obj)) {
    auto* mp = GMIME_MULTIPART(obj);
    int n = g_mime_multipart_get_count(mp);
    for (int i = 0; i < n; ++i)
      collect_attachments(g_mime_multipart_get_part(mp, i), body, out,
                          depth + 1);
    return;
  }
  if (!GMIME_IS_PART(obj))
    return; // an attached message (message/rfc822) or partial
  if (obj == GMIME_OBJECT(body.plain) || obj == GMIME_OBJECT(body.html))
    return;
  auto* part = GMIME_PART(obj);
  auto* ct = g_mime_object_get_content_type(obj);
  if (is_signature(ct))
    return;
  bool text = g_mime_content_type_is_type(ct, "text", "plain")
              || g_mime_content_type_is_type(ct, "text", "html");
  if (text && !g_mime_part_is_attachment(part))
    return; // another inline text part (an alternative or a footer)
  mail_attachment a;
  a.bytes = decoded_bytes(part);
  if (a.bytes.empty())
    return;
  gchar_ptr type{g_mime_content_type_get_mime_type(ct)};
  a.media_type = lower(str(type.get()));
  a.name = one_line(str(g_mime_part_get_filename(part)));
  out.push_back(std::move(a));
}

/// Reads the headers of `msg` into `m`; the reason when there is no From
/// mailbox.
std::string read_headers(GMimeMessage* msg, GMimeParserOptions* opts,
                         mail_message& m) {
  std::vector<mail_address> from;
  collect_mailboxes(g_mime_message_get_from(msg), from);
  if (from.empty())
    return "no From mailbox";
  m.from = std::move(from.front());
  if (json::code_points(m.from.address) > 256)
    return "the From address is longer than 256 characters";
  collect_mailboxes(g_mime_message_get_to(msg), m.to);
  collect_mailboxes(g_mime_message_get_reply_to(msg), m.reply_to);
  m.message_id = clean_id(str(g_mime_message_get_message_id(msg)));
  m.subject = one_line(str(g_mime_message_get_subject(msg)));
  if (auto* dt = g_mime_message_get_date(msg)) {
    auto year = g_date_time_get_year(dt);
    if (year >= 1970 && year <= 9999) {
      gchar_ptr text{g_date_time_format(dt, "%Y-%m-%dT%H:%M:%S%:z")};
      m.date = str(text.get());
      m.date_us = static_cast<int64_t>(g_date_time_to_unix(dt)) * 1000000;
    }
  }
  auto* obj = GMIME_OBJECT(msg);
  auto in_reply_to = parse_ids(opts,
                               g_mime_object_get_header(obj, "In-Reply-To"));
  if (!in_reply_to.empty())
    m.in_reply_to = std::move(in_reply_to.front());
  m.references = parse_ids(opts, g_mime_object_get_header(obj, "References"));
  m.auto_submitted = one_line(
    str(g_mime_object_get_header(obj, "Auto-Submitted")));
  return {};
}

} // namespace

mail_parse_result parse_mail(std::string_view bytes) {
  init_gmime();
  mail_parse_result out;
  if (trim(bytes).empty()) {
    out.error = "empty";
    return out;
  }
  parse_warnings warnings;
  auto opts = make_parser_options(&warnings);
  gobject_ptr<GMimeStream> stream{
    g_mime_stream_mem_new_with_buffer(bytes.data(), bytes.size())};
  gobject_ptr<GMimeParser> parser{g_mime_parser_new_with_stream(stream.get())};
  g_mime_parser_set_format(parser.get(), GMIME_FORMAT_MESSAGE);
  gobject_ptr<GMimeMessage> msg{
    g_mime_parser_construct_message(parser.get(), opts.get())};
  auto* headers = msg ? g_mime_object_get_header_list(GMIME_OBJECT(msg.get()))
                      : nullptr;
  if (headers == nullptr || g_mime_header_list_get_count(headers) == 0) {
    out.error = "no header block (not an RFC 5322 message)";
    return out;
  }
  mail_message m;
  if (auto err = read_headers(msg.get(), opts.get(), m); !err.empty()) {
    out.error = std::move(err);
    return out;
  }
  if (warnings.nesting_overflow) {
    out.error = "MIME parts nested too deeply";
    return out;
  }
  body_parts body;
  auto* root = g_mime_message_get_mime_part(msg.get());
  find_body(root, body, 0);
  collect_attachments(root, body, m.attachments, 0);
  if (body.plain != nullptr) {
    m.text = std::string{trim(clean_mail_text(part_text(body.plain)))};
  } else if (body.html != nullptr) {
    m.text = html_to_text(part_text(body.html));
    m.text_from_html = true;
  } else if (m.attachments.empty()) {
    out.error = "no text/plain or text/html body and no file";
    return out;
  }
  m.warnings = std::move(warnings.seen);
  m.content_sha256 = sha256_hex(bytes);
  out.message = std::move(m);
  return out;
}

// -- mail -> ingest.v1 ----------------------------------------------------

namespace {

/// `id` as an envelope identity (1..256 code points): itself, or
/// `sha256:` + its hash when longer.
std::string bounded_id(const std::string& id) {
  if (json::code_points(id) <= 256)
    return id;
  return "sha256:" + sha256_hex(id);
}

/// Most code points of one string of `payload.raw`, and most elements of
/// one of its arrays: a hostile header cannot make the envelope too large
/// for the ingest limit (the Message-ID and the sender are bounded by
/// parse_mail and the schema).
constexpr size_t raw_max_text = 1000;
constexpr size_t raw_max_items = 50;

std::string bounded_quote(const std::string& s) {
  return json::quote(truncate_utf8(s, raw_max_text));
}

std::string address_json(const mail_address& a) {
  return R"({"address":)" + bounded_quote(a.address) + R"(,"name":)"
         + bounded_quote(a.name) + "}";
}

/// The first `raw_max_items` of `xs`; with `keep_last` (References), the
/// first (the thread root) and the newest.
template<class T, class F>
std::string array_json(const std::vector<T>& xs, F each,
                       bool keep_last = false) {
  size_t skip_from = raw_max_items;
  size_t skip_to = xs.size();
  if (keep_last && xs.size() > raw_max_items) {
    skip_from = 1;
    skip_to = xs.size() - (raw_max_items - 1);
  }
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i >= skip_from && i < skip_to)
      continue;
    if (out.size() > 1)
      out += ',';
    out += each(xs[i]);
  }
  return out + "]";
}

std::string raw_json(const mail_message& m) {
  std::string out = R"({"message_id":)" + bounded_quote(m.message_id);
  out += R"(,"subject":)" + bounded_quote(m.subject);
  out += R"(,"from":)" + address_json(m.from);
  out += R"(,"to":)" + array_json(m.to, address_json);
  out += R"(,"reply_to":)" + array_json(m.reply_to, address_json);
  out += R"(,"date":)" + json::quote(m.date);
  out += R"(,"in_reply_to":)" + bounded_quote(m.in_reply_to);
  auto quote_text = [](const std::string& s) {
    return bounded_quote(s);
  };
  out += R"(,"references":)" + array_json(m.references, quote_text, true);
  out += R"(,"auto_submitted":)" + bounded_quote(m.auto_submitted);
  if (!m.warnings.empty())
    out += R"(,"warnings":)" + array_json(m.warnings, quote_text);
  return out + "}";
}

} // namespace

std::string mail_event_id(const mail_message& m) {
  return m.message_id.empty() ? "sha256:" + m.content_sha256
                              : bounded_id(m.message_id);
}

std::string mail_to_ingest(const mail_message& m,
                           const mail_ingest_options& opts) {
  auto event_id = mail_event_id(m);
  std::string thread;
  if (!m.references.empty())
    thread = bounded_id(m.references.front());
  else if (!m.in_reply_to.empty())
    thread = bounded_id(m.in_reply_to);
  else
    thread = event_id;
  auto text = m.subject.empty() ? m.text : m.subject + "\n\n" + m.text;
  for (auto& line : opts.left_out)
    text += "\n" + line;
  auto observed = rfc3339_utc(m.date_us != 0 ? m.date_us : opts.now_us);
  std::string out = R"({"schema_version":"ingest.v1","source":{)";
  out += R"("channel":"email","provider":"imap","endpoint_identity":)"
         + json::quote(opts.mailbox) + "}";
  out += R"(,"event":{"external_event_id":)" + json::quote(event_id)
         + R"(,"external_thread_id":)" + json::quote(thread)
         + R"(,"observed_at":)" + json::quote(observed) + "}";
  out += R"(,"sender":{"identity":)" + json::quote(m.from.address) + "}";
  out += R"(,"payload":{"raw":)" + raw_json(m) + R"(,"normalized_text":)"
         + json::quote(truncate_utf8(text, mail_max_text));
  if (!opts.attachments.empty())
    out += R"(,"attachments":)" + attachments_json(opts.attachments);
  out += "}}";
  return out;
}

namespace {

std::string member_string(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject())
    return {};
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

std::vector<mail_address> member_addresses(const rapidjson::Value& obj,
                                           const char* key) {
  std::vector<mail_address> out;
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsArray())
    return out;
  for (auto& a : i->value.GetArray()) {
    auto addr = member_string(a, "address");
    if (!addr.empty())
      out.push_back({std::move(addr), member_string(a, "name")});
  }
  return out;
}

} // namespace

std::optional<mail_raw_fields> read_mail_raw(std::string_view envelope) {
  rapidjson::Document doc;
  if (json::parse(envelope, doc) || !doc.IsObject())
    return std::nullopt;
  auto payload = doc.FindMember("payload");
  if (payload == doc.MemberEnd() || !payload->value.IsObject())
    return std::nullopt;
  auto raw = payload->value.FindMember("raw");
  if (raw == payload->value.MemberEnd() || !raw->value.IsObject())
    return std::nullopt;
  auto& r = raw->value;
  auto from = r.FindMember("from");
  if (from == r.MemberEnd())
    return std::nullopt;
  mail_raw_fields out;
  out.from.address = member_string(from->value, "address");
  if (out.from.address.empty())
    return std::nullopt;
  out.from.name = member_string(from->value, "name");
  out.message_id = member_string(r, "message_id");
  out.subject = member_string(r, "subject");
  out.to = member_addresses(r, "to");
  out.reply_to = member_addresses(r, "reply_to");
  out.date = member_string(r, "date");
  out.in_reply_to = member_string(r, "in_reply_to");
  out.auto_submitted = member_string(r, "auto_submitted");
  auto refs = r.FindMember("references");
  if (refs != r.MemberEnd() && refs->value.IsArray())
    for (auto& id : refs->value.GetArray())
      if (id.IsString() && id.GetStringLength() > 0)
        out.references.emplace_back(id.GetString(), id.GetStringLength());
  return out;
}

bool mail_raw_fields::may_auto_reply() const {
  auto v = std::string_view{auto_submitted};
  v = v.substr(0, std::min(v.find(';'), v.find('(')));
  v = trim(v);
  return v.empty()
         || (v.size() == 2 && (v[0] == 'n' || v[0] == 'N')
             && (v[1] == 'o' || v[1] == 'O'));
}

// -- replies ------------------------------------------------------------------

std::optional<mail_address> parse_mail_address(std::string_view text) {
  init_gmime();
  auto opts = make_parser_options(nullptr);
  std::string s = one_line(text);
  gobject_ptr<InternetAddressList> list{
    internet_address_list_parse(opts.get(), s.c_str())};
  std::vector<mail_address> found;
  collect_mailboxes(list.get(), found);
  if (found.empty())
    return std::nullopt;
  auto& a = found.front().address;
  auto at = a.find('@');
  if (at == std::string::npos || at == 0 || at + 1 == a.size())
    return std::nullopt;
  return found.front();
}

std::string reply_subject(std::string_view subject) {
  auto s = trim(subject);
  if (s.size() >= 3 && (s[0] == 'R' || s[0] == 'r')
      && (s[1] == 'E' || s[1] == 'e') && s[2] == ':')
    return std::string{s};
  if (s.empty())
    return "Re: (no subject)";
  return "Re: " + std::string{s};
}

std::string reply_message_id(std::string_view delivery_key,
                             std::string_view from_domain) {
  auto domain = from_domain.empty() ? std::string_view{"butlers.invalid"}
                                    : from_domain;
  return sha256_hex(delivery_key).substr(0, 32) + ".butlers@"
         + std::string{domain};
}

namespace {

/// The References of a reply: the answered mail's, then its id; beyond
/// `mail_max_references`, the oldest after the root go.
std::string references_header(const mail_draft& d) {
  std::vector<std::string> ids;
  for (auto& id : d.references)
    if (auto c = clean_id(id); !c.empty())
      ids.push_back(std::move(c));
  ids.push_back(clean_id(d.in_reply_to));
  if (ids.size() > mail_max_references)
    ids.erase(ids.begin() + 1, ids.begin()
                                 + static_cast<std::ptrdiff_t>(
                                   ids.size() - mail_max_references + 1));
  std::string out;
  for (auto& id : ids) {
    if (!out.empty())
      out += ' ';
    out += '<' + id + '>';
  }
  return out;
}

/// A text/plain part holding `text` as UTF-8, in the transfer encoding
/// best for 7-bit transport.
gobject_ptr<GMimeTextPart> utf8_text_part(const std::string& text) {
  gobject_ptr<GMimeTextPart> part{g_mime_text_part_new_with_subtype("plain")};
  auto body = clean_mail_text(text);
  gobject_ptr<GMimeStream> mem{
    g_mime_stream_mem_new_with_buffer(body.data(), body.size())};
  gobject_ptr<GMimeDataWrapper> content{
    g_mime_data_wrapper_new_with_stream(mem.get(),
                                        GMIME_CONTENT_ENCODING_DEFAULT)};
  g_mime_part_set_content(GMIME_PART(part.get()), content.get());
  g_mime_text_part_set_charset(part.get(), "utf-8");
  auto encoding = g_mime_part_get_best_content_encoding(
    GMIME_PART(part.get()), GMIME_ENCODING_CONSTRAINT_7BIT);
  g_mime_part_set_content_encoding(GMIME_PART(part.get()), encoding);
  return part;
}

} // namespace

std::optional<composed_mail> compose_mail(const mail_draft& d,
                                          std::string* error) {
  init_gmime();
  auto from = parse_mail_address(d.from);
  auto to = parse_mail_address(d.to);
  if (!from || !to) {
    if (error != nullptr)
      *error = !from ? "not a mail address (from): '" + d.from + "'"
                     : "not a mail address (to): '" + d.to + "'";
    return std::nullopt;
  }
  gobject_ptr<GMimeMessage> msg{g_mime_message_new(TRUE)};
  auto* obj = GMIME_OBJECT(msg.get());
  g_mime_message_add_mailbox(msg.get(), GMIME_ADDRESS_TYPE_FROM,
                             from->name.c_str(), from->address.c_str());
  g_mime_message_add_mailbox(msg.get(), GMIME_ADDRESS_TYPE_TO, to->name.c_str(),
                             to->address.c_str());
  g_mime_message_set_subject(msg.get(), one_line(d.subject).c_str(), "utf-8");
  std::unique_ptr<GDateTime, decltype(&g_date_time_unref)>
    date{g_date_time_new_from_unix_utc(d.date_us / 1000000),
         &g_date_time_unref};
  g_mime_message_set_date(msg.get(), date.get());
  composed_mail out;
  auto domain = from->address.substr(from->address.rfind('@') + 1);
  out.message_id = reply_message_id(d.delivery_key, domain);
  g_mime_message_set_message_id(msg.get(), out.message_id.c_str());
  if (auto irt = clean_id(d.in_reply_to); !irt.empty()) {
    g_mime_object_set_header(obj, "In-Reply-To", ('<' + irt + '>').c_str(),
                             nullptr);
    g_mime_object_set_header(obj, "References", references_header(d).c_str(),
                             nullptr);
    // RFC 3834: an automatic reply says so, and autoresponders leave it.
    g_mime_object_set_header(obj, "Auto-Submitted", "auto-replied", nullptr);
  }
  auto part = utf8_text_part(d.text);
  g_mime_message_set_mime_part(msg.get(), GMIME_OBJECT(part.get()));
  std::unique_ptr<GMimeFormatOptions, format_options_free> format{
    g_mime_format_options_new()};
  g_mime_format_options_set_newline_format(format.get(),
                                           GMIME_NEWLINE_FORMAT_DOS);
  gchar_ptr text{g_mime_object_to_string(obj, format.get())};
  out.rfc822 = str(text.get());
  out.envelope_from = from->address;
  return out;
}

} // namespace butlers
