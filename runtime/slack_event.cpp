#include "runtime/slack_event.hpp"

#include <cstdlib>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "runtime/json.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {

namespace {

const rapidjson::Value* member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(name);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

/// A string member; nullopt when absent or not a string.
std::optional<std::string_view> string_member(const rapidjson::Value& v,
                                              const char* name) {
  auto m = member(v, name);
  if (m == nullptr || !m->IsString())
    return std::nullopt;
  return std::string_view{m->GetString(), m->GetStringLength()};
}

/// A non-empty string member.
std::optional<std::string_view> id_member(const rapidjson::Value& v,
                                          const char* name) {
  auto s = string_member(v, name);
  return s && !s->empty() ? s : std::nullopt;
}

/// The seconds of a Slack timestamp ("1515449522.000016"); nullopt for
/// anything but digits, optionally followed by '.' and digits.
std::optional<int64_t> ts_seconds(std::string_view ts) {
  int64_t s = 0;
  size_t i = 0;
  for (; i < ts.size() && ts[i] != '.'; ++i) {
    if (ts[i] < '0' || ts[i] > '9' || i >= 12)
      return std::nullopt;
    s = s * 10 + (ts[i] - '0');
  }
  if (i == 0)
    return std::nullopt;
  for (size_t k = i + 1; k < ts.size(); ++k)
    if (ts[k] < '0' || ts[k] > '9')
      return std::nullopt;
  return s;
}

/// `text` without a leading "<@BOT>" (or "<@BOT|name>") and the spaces
/// after it, when BOT is `bot`.
std::string_view without_mention(std::string_view text, std::string_view bot) {
  if (bot.empty() || text.substr(0, 2) != "<@")
    return text;
  auto close = text.find('>');
  if (close == std::string_view::npos)
    return text;
  auto id = text.substr(2, close - 2);
  id = id.substr(0, id.find('|'));
  if (id != bot)
    return text;
  text.remove_prefix(close + 1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n'))
    text.remove_prefix(1);
  return text;
}

slack_event_mapping fail(slack_event_mapping& out, slack_event_verdict v,
                         std::string reason,
                         slack_ignore_reason why = slack_ignore_reason::none) {
  out.verdict = v;
  out.ignored = why;
  out.reason = std::move(reason);
  return std::move(out);
}

struct message_fields {
  std::string_view channel;
  std::string_view ts;
  std::string_view thread_ts;
  std::string_view user;
  std::string observed_at;
  std::string_view text;
};

std::string make_envelope(std::string_view bot, const message_fields& m,
                          std::string_view raw) {
  std::string out;
  out.reserve(raw.size() + m.text.size() + 384);
  out += R"({"schema_version":"ingest.v1","source":{"channel":"slack",)";
  out += R"("provider":"slack","endpoint_identity":)";
  out += json::quote(bot);
  out += R"(},"event":{"external_event_id":)";
  out += json::quote(std::string{m.channel} + ":" + std::string{m.ts});
  out += R"(,"external_thread_id":)";
  out += json::quote(std::string{m.channel} + ":"
                     + std::string{m.thread_ts.empty() ? m.ts : m.thread_ts});
  out += R"(,"observed_at":")";
  out += m.observed_at;
  out += R"("},"sender":{"identity":)";
  out += json::quote(m.user);
  out += R"(},"payload":{"raw":)";
  out += raw;
  out += R"(,"normalized_text":)";
  out += json::quote(without_mention(m.text, bot));
  out += "}}";
  return out;
}

/// Maps the `event` of an event_callback.
slack_event_mapping map_event(slack_event_mapping& out,
                              const rapidjson::Value& ev, std::string_view raw,
                              std::string_view bot) {
  if (!ev.IsObject())
    return fail(out, slack_event_verdict::invalid, "event is not an object");
  auto type = string_member(ev, "type");
  if (!type)
    return fail(out, slack_event_verdict::invalid, "event without type");
  if (*type != "message" && *type != "app_mention")
    return fail(out, slack_event_verdict::ignored,
                "event type '" + std::string{type->substr(0, 64)}
                  + "' is not taken",
                slack_ignore_reason::other);
  auto subtype = string_member(ev, "subtype").value_or("");
  if (subtype == "message_changed")
    return fail(out, slack_event_verdict::ignored, "an edit",
                slack_ignore_reason::edit);
  if (subtype == "message_deleted")
    return fail(out, slack_event_verdict::ignored, "a deletion",
                slack_ignore_reason::deletion);
  auto user = id_member(ev, "user");
  if (member(ev, "bot_id") != nullptr || subtype == "bot_message"
      || (user && !bot.empty() && *user == bot))
    return fail(out, slack_event_verdict::ignored, "a bot's message",
                slack_ignore_reason::bot);
  if (!subtype.empty() && subtype != "thread_broadcast"
      && subtype != "file_share")
    return fail(out, slack_event_verdict::ignored,
                "subtype '" + std::string{subtype.substr(0, 64)}
                  + "' is not taken",
                slack_ignore_reason::other);
  message_fields m;
  auto channel = id_member(ev, "channel");
  auto ts = id_member(ev, "ts");
  if (!channel || !ts || !user)
    return fail(out, slack_event_verdict::invalid,
                std::string{*type} + " without channel, ts or user");
  auto seconds = ts_seconds(*ts);
  m.observed_at = seconds ? rfc3339_of_unix_s(*seconds) : std::string{};
  if (m.observed_at.empty())
    return fail(out, slack_event_verdict::invalid,
                std::string{*type} + " whose ts is not a Slack timestamp");
  auto thread = member(ev, "thread_ts");
  if (thread != nullptr
      && (!thread->IsString() || !ts_seconds(thread->GetString())))
    return fail(out, slack_event_verdict::invalid,
                std::string{*type} + " whose thread_ts is not a timestamp");
  auto text = member(ev, "text");
  if (text == nullptr)
    return fail(out, slack_event_verdict::ignored,
                std::string{*type} + " without text",
                slack_ignore_reason::other);
  if (!text->IsString())
    return fail(out, slack_event_verdict::invalid,
                std::string{*type} + " whose text is not a string");
  m.channel = *channel;
  m.ts = *ts;
  m.user = *user;
  if (thread != nullptr)
    m.thread_ts = {thread->GetString(), thread->GetStringLength()};
  m.text = {text->GetString(), text->GetStringLength()};
  out.verdict = slack_event_verdict::envelope;
  out.envelope = make_envelope(bot, m, raw);
  return std::move(out);
}

} // namespace

const char* to_string(slack_signature_status x) {
  switch (x) {
    case slack_signature_status::valid: return "valid";
    case slack_signature_status::no_secret: return "no_secret";
    case slack_signature_status::missing: return "missing";
    case slack_signature_status::stale: return "stale";
    case slack_signature_status::mismatch: return "mismatch";
  }
  return "mismatch";
}

const char* to_string(slack_event_verdict x) {
  switch (x) {
    case slack_event_verdict::envelope: return "envelope";
    case slack_event_verdict::challenge: return "challenge";
    case slack_event_verdict::ignored: return "ignored";
    case slack_event_verdict::invalid: return "invalid";
  }
  return "invalid";
}

const char* to_string(slack_ignore_reason x) {
  switch (x) {
    case slack_ignore_reason::none: return "";
    case slack_ignore_reason::bot: return "bot";
    case slack_ignore_reason::edit: return "edit";
    case slack_ignore_reason::deletion: return "deletion";
    case slack_ignore_reason::other: return "other";
  }
  return "other";
}

std::string slack_signature(std::string_view secret, std::string_view timestamp,
                            std::string_view body) {
  std::string base = "v0:";
  base += timestamp;
  base += ':';
  base += body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(base.data()), base.size(),
           mac, &len)
      == nullptr)
    return {};
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "v0=";
  for (unsigned int i = 0; i < len; ++i) {
    out += digits[mac[i] >> 4];
    out += digits[mac[i] & 0x0F];
  }
  return out;
}

slack_signature_status verify_slack_signature(
  std::string_view secret, std::optional<std::string_view> timestamp,
  std::optional<std::string_view> signature, std::string_view body,
  int64_t now_s) {
  if (secret.empty())
    return slack_signature_status::no_secret;
  if (!timestamp || !signature || timestamp->empty())
    return slack_signature_status::missing;
  int64_t ts = 0;
  for (auto c : *timestamp) {
    if (c < '0' || c > '9' || ts > 100000000000)
      return slack_signature_status::missing;
    ts = ts * 10 + (c - '0');
  }
  if (std::llabs(now_s - ts) > slack_max_clock_skew_s)
    return slack_signature_status::stale;
  auto expected = slack_signature(secret, *timestamp, body);
  if (expected.empty() || signature->size() != expected.size()
      || CRYPTO_memcmp(expected.data(), signature->data(), expected.size())
           != 0)
    return slack_signature_status::mismatch;
  return slack_signature_status::valid;
}

slack_event_mapping map_slack_event(std::string_view body,
                                    std::string_view endpoint_identity) {
  slack_event_mapping out;
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = body.size();
  if (auto err = json::parse(body, doc, limits))
    return fail(out, slack_event_verdict::invalid, "not JSON: " + err->message);
  if (!doc.IsObject())
    return fail(out, slack_event_verdict::invalid, "not a JSON object");
  if (auto id = string_member(doc, "event_id"))
    out.event_id = std::string{id->substr(0, 64)};
  auto type = string_member(doc, "type");
  if (!type)
    return fail(out, slack_event_verdict::invalid, "no string type");
  if (*type == "url_verification") {
    auto challenge = string_member(doc, "challenge");
    if (!challenge)
      return fail(out, slack_event_verdict::invalid,
                  "url_verification without a string challenge");
    out.verdict = slack_event_verdict::challenge;
    out.challenge = std::string{*challenge};
    return out;
  }
  if (*type != "event_callback")
    return fail(out, slack_event_verdict::ignored,
                "callback type '" + std::string{type->substr(0, 64)}
                  + "' is not taken",
                slack_ignore_reason::other);
  auto ev = member(doc, "event");
  if (ev == nullptr)
    return fail(out, slack_event_verdict::invalid,
                "event_callback without event");
  return map_event(out, *ev, body, endpoint_identity);
}

} // namespace butlers
