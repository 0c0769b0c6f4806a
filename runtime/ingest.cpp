#include "runtime/ingest.hpp"

#include <array>
#include <cstring>
#include <utility>

#include <rapidjson/reader.h>

#include "runtime/attachments.hpp"
#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"
#include "runtime/tracing.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

/// The fields of an `ingest.v1` envelope that its record and dedupe key are
/// made of. Absent optional fields are empty.
struct envelope {
  std::string channel;
  std::string endpoint_identity;
  std::string sender_identity;
  std::string thread_identity;
  std::string trace_parent;
  std::string trace_state;
  std::string external_event_id;
  std::string idempotency_key;
  std::string normalized_text;
  std::string policy_tier;
  /// payload.attachments as canonical JSON ("" when absent or empty).
  std::string attachments;
};

inbox_record make_record(envelope&& e, std::string_view body,
                         uint32_t dedupe_window_s, int64_t now_us) {
  inbox_record rec;
  auto& ctx = rec.context;
  ctx.request_id = make_uuid_v7().to_string();
  ctx.received_at_us = now_us;
  dedupe_input key;
  key.channel = e.channel;
  key.endpoint_identity = e.endpoint_identity;
  key.external_event_id = e.external_event_id;
  key.sender_identity = e.sender_identity;
  key.idempotency_key = e.idempotency_key;
  // Two photos without a caption differ by their bytes only: the
  // references join the text the key hashes.
  std::string text_and_files;
  if (!e.attachments.empty())
    text_and_files = e.normalized_text + "\n" + e.attachments;
  key.normalized_text = e.attachments.empty()
                          ? std::string_view{e.normalized_text}
                          : text_and_files;
  key.received_at_s = now_us / 1000000;
  rec.dedupe_key = dedupe_key(key, dedupe_window_s);
  ctx.source_channel = std::move(e.channel);
  ctx.source_endpoint_identity = std::move(e.endpoint_identity);
  ctx.source_sender_identity = std::move(e.sender_identity);
  ctx.source_thread_identity = std::move(e.thread_identity);
  ctx.trace_parent = std::move(e.trace_parent);
  // Dropped, never refused, when it is not usable; meaningless without a
  // traceparent (W3C), which the spans check when they continue it.
  if (usable_tracestate(e.trace_state))
    ctx.trace_state = std::move(e.trace_state);
  rec.raw_payload = std::string{body};
  rec.normalized_text = std::move(e.normalized_text);
  rec.policy_tier = e.policy_tier.empty() ? "default"
                                          : std::move(e.policy_tier);
  rec.schema_version = "ingest.v1";
  rec.attachments = std::move(e.attachments);
  return rec;
}

// -- the full path: DOM, generic schema check, every violation --------------

/// Returns the string at `pointer`-like path, or empty when absent or not a
/// string (the schema already vouched for the required ones).
std::string_view get_string(const rapidjson::Value& root,
                            std::initializer_list<const char*> path) {
  const rapidjson::Value* v = &root;
  for (auto key : path) {
    if (!v->IsObject())
      return {};
    auto i = v->FindMember(key);
    if (i == v->MemberEnd())
      return {};
    v = &i->value;
  }
  if (!v->IsString())
    return {};
  return {v->GetString(), v->GetStringLength()};
}

// -- the fast path: one SAX pass, no DOM, no generic checker ----------------

bool is_identity(std::string_view s) {
  auto n = json::code_points(s);
  return n >= 1 && n <= 256;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// Exactly the schema's `timestamp` pattern,
/// `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?`
/// `(Z|(\+|-)[0-9]{2}:[0-9]{2})$`, and its maxLength of 64.
bool is_timestamp(std::string_view s) {
  if (s.size() > 64)
    return false;
  auto digits = [&](size_t at, size_t n) {
    if (at + n > s.size())
      return false;
    for (size_t i = at; i < at + n; ++i)
      if (!is_digit(s[i]))
        return false;
    return true;
  };
  auto is = [&](size_t at, char c) {
    return at < s.size() && s[at] == c;
  };
  if (!(digits(0, 4) && is(4, '-') && digits(5, 2) && is(7, '-') && digits(8, 2)
        && is(10, 'T') && digits(11, 2) && is(13, ':') && digits(14, 2)
        && is(16, ':') && digits(17, 2)))
    return false;
  size_t i = 19;
  if (is(i, '.')) {
    size_t j = i + 1;
    while (j < s.size() && is_digit(s[j]))
      ++j;
    if (j == i + 1)
      return false;
    i = j;
  }
  if (is(i, 'Z'))
    return i + 1 == s.size();
  if (is(i, '+') || is(i, '-'))
    return i + 6 == s.size() && digits(i + 1, 2) && is(i + 3, ':')
           && digits(i + 4, 2);
  return false;
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> xs) {
  for (auto x : xs)
    if (s == x)
      return true;
  return false;
}

// -- the fast path: what it knows of schemas/ingest.v1.json ----------------

enum class scope : uint8_t {
  top,
  source,
  event,
  sender,
  payload,
  control,
  trace,
};

/// What the next value is: a field of the envelope, or `skip`, a member
/// of `trace_context` other than `traceparent` and `tracestate`, which may
/// be anything.
enum class field : uint8_t {
  none,
  schema_version,
  source,
  event,
  sender,
  payload,
  control,
  channel,
  provider,
  endpoint_identity,
  external_event_id,
  external_thread_id,
  observed_at,
  identity,
  raw,
  normalized_text,
  idempotency_key,
  trace_context,
  policy_tier,
  traceparent,
  tracestate,
  skip,
};

/// Every key of the schema: the object it belongs in, the field it
/// names, and whether the schema requires it there.
struct key_rule {
  scope in;
  std::string_view name;
  field names;
  bool required;
};
constexpr key_rule rules[] = {
  {scope::top, "schema_version", field::schema_version, true},
  {scope::top, "source", field::source, true},
  {scope::top, "event", field::event, true},
  {scope::top, "sender", field::sender, true},
  {scope::top, "payload", field::payload, true},
  {scope::top, "control", field::control, false},
  {scope::source, "channel", field::channel, true},
  {scope::source, "provider", field::provider, true},
  {scope::source, "endpoint_identity", field::endpoint_identity, true},
  {scope::event, "external_event_id", field::external_event_id, true},
  {scope::event, "external_thread_id", field::external_thread_id, false},
  {scope::event, "observed_at", field::observed_at, true},
  {scope::sender, "identity", field::identity, true},
  {scope::payload, "raw", field::raw, true},
  {scope::payload, "normalized_text", field::normalized_text, true},
  {scope::control, "idempotency_key", field::idempotency_key, false},
  {scope::control, "trace_context", field::trace_context, false},
  {scope::control, "policy_tier", field::policy_tier, false},
  {scope::trace, "traceparent", field::traceparent, false},
  {scope::trace, "tracestate", field::tracestate, false},
};

constexpr uint32_t bit(field f) {
  return uint32_t{1} << static_cast<unsigned>(f);
}

constexpr size_t scopes = static_cast<size_t>(scope::trace) + 1;

/// Per scope, which fields it requires, and where its rules start (they
/// are grouped by scope): derived from `rules` at compile time.
struct rule_index {
  std::array<uint32_t, scopes> required{};
  std::array<size_t, scopes + 1> first{};
};
constexpr rule_index index_rules() {
  rule_index out;
  for (size_t i = std::size(rules); i-- > 0;) {
    auto s = static_cast<size_t>(rules[i].in);
    if (rules[i].required)
      out.required[s] |= bit(rules[i].names);
    out.first[s] = i;
  }
  out.first[scopes] = std::size(rules);
  return out;
}
constexpr rule_index by_scope = index_rules();

/// `index_rules` needs the rules grouped by scope, every scope present, in
/// the enum's order.
constexpr bool every_scope_in_order() {
  for (size_t i = 1; i < std::size(rules); ++i) {
    auto prev = static_cast<size_t>(rules[i - 1].in);
    auto next = static_cast<size_t>(rules[i].in);
    if (next != prev && next != prev + 1)
      return false;
  }
  return rules[0].in == scope::top
         && rules[std::size(rules) - 1].in == scope::trace;
}
static_assert(every_scope_in_order(),
              "rules: every scope, grouped, in the enum's order");

/// A SAX handler that accepts only envelopes it can vouch for: every
/// constraint of `schemas/ingest.v1.json`, checked as the values stream by.
/// Anything else — a violation, but also anything merely unusual, such as a
/// repeated key or a non-string `traceparent` — makes it stop, and the
/// caller takes the full path, which names every violation. So what it
/// accepts is a subset of what the full path accepts, with the same fields;
/// `ingest_test.cpp` holds the two to that on thousands of mutated bodies.
class fast_reader
  : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, fast_reader> {
 public:
  fast_reader(envelope& out, bool check_utf8, size_t max_depth)
    : out_{out}, check_utf8_{check_utf8}, max_depth_{max_depth} {}

  // Anything the handlers below do not take: a number, a bool, or a value
  // of the wrong type for its field.
  bool Default() {
    return free_value() || dropped_tracestate();
  }

  bool Null() {
    if (free_value())
      return true;
    auto f = std::exchange(pending_, field::none);
    return f == field::external_thread_id || f == field::trace_context
           || f == field::tracestate;
  }

  bool String(const char* str, rapidjson::SizeType len, bool) {
    std::string_view s{str, len};
    if (check_utf8_ && !json::is_utf8(s))
      return false;
    if (free_value())
      return true;
    switch (std::exchange(pending_, field::none)) {
      case field::schema_version: return s == "ingest.v1";
      case field::channel:
        return one_of(s, {"telegram", "slack", "email", "api", "mcp"})
               && capture(out_.channel, s);
      case field::provider:
        return one_of(s, {"telegram", "slack", "imap", "internal"});
      case field::endpoint_identity:
        return is_identity(s) && capture(out_.endpoint_identity, s);
      case field::external_event_id:
        return is_identity(s) && capture(out_.external_event_id, s);
      case field::external_thread_id:
        return is_identity(s) && capture(out_.thread_identity, s);
      case field::observed_at: return is_timestamp(s);
      case field::identity:
        return is_identity(s) && capture(out_.sender_identity, s);
      case field::normalized_text:
        return json::code_points(s) <= 65536
               && capture(out_.normalized_text, s);
      case field::idempotency_key:
        return is_identity(s) && capture(out_.idempotency_key, s);
      case field::policy_tier:
        return one_of(s, {"default", "interactive", "high_priority"})
               && capture(out_.policy_tier, s);
      case field::traceparent: return capture(out_.trace_parent, s);
      case field::tracestate: return capture(out_.trace_state, s);
      default: return false;
    }
  }

  bool Key(const char* str, rapidjson::SizeType len, bool) {
    std::string_view k{str, len};
    if (check_utf8_ && !json::is_utf8(k))
      return false;
    if (skip_depth_ > 0)
      return true;
    auto f = key_field(scopes_[depth_ - 1], k);
    if (f == field::none)
      return false; // additionalProperties: false
    if (f != field::skip) {
      if (seen_ & bit(f))
        return false; // a repeated key: the full path decides
      seen_ |= bit(f);
    }
    pending_ = f;
    return true;
  }

  bool StartObject() {
    if (depth_ + skip_depth_ >= max_depth_)
      return false;
    if (skip_depth_ > 0) {
      ++skip_depth_;
      return true;
    }
    if (depth_ == 0)
      return push(scope::top);
    switch (std::exchange(pending_, field::none)) {
      case field::source: return push(scope::source);
      case field::event: return push(scope::event);
      case field::sender: return push(scope::sender);
      case field::payload: return push(scope::payload);
      case field::control: return push(scope::control);
      case field::trace_context: return push(scope::trace);
      case field::raw:
      case field::tracestate: // not a string: dropped, as on the full path
      case field::skip: skip_depth_ = 1; return true;
      default: return false;
    }
  }

  bool EndObject(rapidjson::SizeType) {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    auto required = required_fields(scopes_[--depth_]);
    return (seen_ & required) == required;
  }

  bool StartArray() {
    if (depth_ + skip_depth_ >= max_depth_)
      return false;
    if (skip_depth_ > 0) {
      ++skip_depth_;
      return true;
    }
    auto f = std::exchange(pending_, field::none);
    if (f != field::skip && f != field::tracestate)
      return false;
    skip_depth_ = 1;
    return true;
  }

  bool EndArray(rapidjson::SizeType) {
    --skip_depth_;
    return true;
  }

 private:
  static uint32_t required_fields(scope s) {
    return by_scope.required[static_cast<size_t>(s)];
  }

  /// The field `k` names in `s`: `none` for a key the schema does not allow
  /// there, `skip` for any other member of `trace_context`.
  static field key_field(scope s, std::string_view k) {
    auto i = static_cast<size_t>(s);
    for (auto r = by_scope.first[i]; r < by_scope.first[i + 1]; ++r)
      if (rules[r].name == k)
        return rules[r].names;
    return s == scope::trace ? field::skip : field::none;
  }

  /// True for a scalar inside a free-form value, or a scalar member of
  /// `trace_context` other than `traceparent`: anything goes there.
  bool free_value() {
    if (skip_depth_ > 0)
      return true;
    if (pending_ != field::skip)
      return false;
    pending_ = field::none;
    return true;
  }

  /// True for a `tracestate` that is a number or a bool: dropped, as the
  /// full path drops it (it never makes an ingest fail).
  bool dropped_tracestate() {
    if (pending_ != field::tracestate)
      return false;
    pending_ = field::none;
    return true;
  }

  bool push(scope s) {
    if (depth_ == scopes_.size())
      return false;
    scopes_[depth_++] = s;
    return true;
  }

  /// PostgreSQL cannot store U+0000 in text; the full path reports it.
  static bool capture(std::string& to, std::string_view s) {
    if (std::memchr(s.data(), 0, s.size()) != nullptr)
      return false;
    to.assign(s.data(), s.size());
    return true;
  }

  envelope& out_;
  bool check_utf8_;
  size_t max_depth_;
  std::array<scope, 4> scopes_{};
  size_t depth_ = 0;
  size_t skip_depth_ = 0;
  field pending_ = field::none;
  uint32_t seen_ = 0;
};

} // namespace

namespace detail {

std::optional<inbox_record> parse_ingest_fast(std::string_view body,
                                              size_t max_bytes,
                                              uint32_t dedupe_window_s,
                                              int64_t now_us) {
  // What json::parse refuses before parsing: too large, or a NUL byte,
  // where RapidJSON would stop reading and ignore the rest.
  if (body.size() > max_bytes
      || std::memchr(body.data(), 0, body.size()) != nullptr)
    return std::nullopt;
  // The whole body as UTF-8 at once, instead of RapidJSON's validation
  // character by character (a fifth of this path with non-ASCII text).
  // Outside strings a non-ASCII byte is a syntax error either way.
  if (!json::is_ascii(body) && !json::is_utf8(body))
    return std::nullopt;
  envelope e;
  // Only a \u escape can produce a lone surrogate.
  fast_reader handler{e, body.find("\\u") != std::string_view::npos,
                      json::parse_limits{}.max_depth};
  // The reader keeps its stack between parses: no allocation per body.
  thread_local rapidjson::Reader reader;
  rapidjson::MemoryStream ms{body.data(), body.size()};
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> in{
    ms};
  if (reader.Parse<rapidjson::kParseIterativeFlag>(in, handler).IsError())
    return std::nullopt;
  return make_record(std::move(e), body, dedupe_window_s, now_us);
}

ingest_parse_result parse_ingest_full(std::string_view body, size_t max_bytes,
                                      uint32_t dedupe_window_s,
                                      int64_t now_us) {
  ingest_parse_result result;
  json::scratch_document scratch;
  auto& doc = scratch.doc();
  json::parse_limits limits;
  limits.max_bytes = max_bytes;
  if (auto err = json::parse(body, doc, limits)) {
    result.parse_error = err->message;
    return result;
  }
  result.violations = schema::get("ingest.v1").validate(doc);
  if (!result.violations.empty())
    return result;
  envelope e;
  e.normalized_text = get_string(doc, {"payload", "normalized_text"});
  if (e.normalized_text.find('\0') != std::string::npos) {
    result.violations.push_back(violation{"/payload/normalized_text", "nul",
                                          "normalized_text must not contain "
                                          "U+0000 (it cannot be stored)"});
    return result;
  }
  e.channel = get_string(doc, {"source", "channel"});
  e.endpoint_identity = get_string(doc, {"source", "endpoint_identity"});
  e.sender_identity = get_string(doc, {"sender", "identity"});
  e.thread_identity = get_string(doc, {"event", "external_thread_id"});
  e.trace_parent = get_string(doc, {"control", "trace_context", "traceparent"});
  e.trace_state = get_string(doc, {"control", "trace_context", "tracestate"});
  e.external_event_id = get_string(doc, {"event", "external_event_id"});
  e.idempotency_key = get_string(doc, {"control", "idempotency_key"});
  e.policy_tier = get_string(doc, {"control", "policy_tier"});
  if (auto p = doc.FindMember("payload"); p != doc.MemberEnd()) {
    auto a = p->value.FindMember("attachments");
    if (a != p->value.MemberEnd() && !a->value.Empty())
      e.attachments = attachments_json(parse_attachments(a->value));
  }
  // Each is stored as text, or in the dedupe key, which is text too.
  const std::pair<const char*, const std::string*> stored[] = {
    {"/source/endpoint_identity", &e.endpoint_identity},
    {"/sender/identity", &e.sender_identity},
    {"/event/external_thread_id", &e.thread_identity},
    {"/event/external_event_id", &e.external_event_id},
    {"/control/idempotency_key", &e.idempotency_key},
    {"/control/trace_context/traceparent", &e.trace_parent},
  };
  for (auto& [pointer, value] : stored)
    if (value->find('\0') != std::string::npos)
      result.violations.push_back(
        violation{pointer, "nul",
                  "identities must not contain U+0000 (they cannot be "
                  "stored)"});
  if (!result.violations.empty())
    return result;
  result.record = make_record(std::move(e), body, dedupe_window_s, now_us);
  return result;
}

} // namespace detail

ingest_parse_result parse_ingest(std::string_view body, size_t max_bytes,
                                 uint32_t dedupe_window_s, int64_t now_us) {
  if (auto rec = detail::parse_ingest_fast(body, max_bytes, dedupe_window_s,
                                           now_us)) {
    ingest_parse_result result;
    result.record = std::move(rec);
    return result;
  }
  return detail::parse_ingest_full(body, max_bytes, dedupe_window_s, now_us);
}

} // namespace butlers
