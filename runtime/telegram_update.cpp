#include "runtime/telegram_update.hpp"

#include <ctime>

#include "runtime/json.hpp"

namespace butlers {

namespace {

/// The kinds that become an envelope, in the order they are looked for.
constexpr const char* taken_kinds[] = {"message", "edited_message",
                                       "channel_post"};

const rapidjson::Value* member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(name);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

/// An integer member (JSON integer within int64).
std::optional<int64_t> int_member(const rapidjson::Value& v, const char* name) {
  auto m = member(v, name);
  if (m == nullptr || !m->IsInt64())
    return std::nullopt;
  return m->GetInt64();
}

/// `obj.id` where `obj` is member `name` of `v`.
std::optional<int64_t> id_of(const rapidjson::Value& v, const char* name) {
  auto m = member(v, name);
  return m == nullptr ? std::nullopt : int_member(*m, "id");
}

telegram_update_mapping fail(telegram_update_mapping& out,
                             update_verdict verdict, std::string reason) {
  out.verdict = verdict;
  out.reason = std::move(reason);
  return std::move(out);
}

/// The envelope's text, built around the verbatim Update.
std::string make_envelope(std::string_view bot, int64_t update_id,
                          int64_t chat_id, const std::string& observed_at,
                          int64_t sender, std::string_view raw,
                          std::string_view text) {
  std::string out;
  out.reserve(raw.size() + text.size() + 384);
  out += R"({"schema_version":"ingest.v1","source":{"channel":"telegram",)";
  out += R"("provider":"telegram","endpoint_identity":)";
  out += json::quote(bot);
  out += R"(},"event":{"external_event_id":")";
  out += std::to_string(update_id);
  out += R"(","external_thread_id":")";
  out += std::to_string(chat_id);
  out += R"(","observed_at":")";
  out += observed_at;
  out += R"("},"sender":{"identity":")";
  out += std::to_string(sender);
  out += R"("},"payload":{"raw":)";
  out += raw;
  out += R"(,"normalized_text":)";
  out += json::quote(text);
  out += "}}";
  return out;
}

} // namespace

const char* to_string(update_verdict x) {
  switch (x) {
    case update_verdict::envelope: return "envelope";
    case update_verdict::ignored: return "ignored";
    case update_verdict::invalid: return "invalid";
  }
  return "unknown";
}

std::string rfc3339_of_unix_s(int64_t unix_s) {
  // 9999-12-31T23:59:59Z; the schema's pattern wants four year digits.
  if (unix_s < 0 || unix_s > 253402300799)
    return {};
  auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr)
    return {};
  char buf[32];
  auto n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string{buf, n};
}

telegram_update_mapping map_telegram_update(
  std::string_view update_json, std::string_view endpoint_identity) {
  rapidjson::Document doc;
  // The webhook's body is as big as the HTTP server allows; the depth
  // limit keeps the parse bounded whatever it holds.
  json::parse_limits limits;
  limits.max_bytes = update_json.size();
  if (auto err = json::parse(update_json, doc, limits)) {
    telegram_update_mapping out;
    return fail(out, update_verdict::invalid, "not JSON: " + err->message);
  }
  return map_telegram_update(doc, update_json, endpoint_identity);
}

telegram_update_mapping map_telegram_update(
  const rapidjson::Value& update, std::string_view update_json,
  std::string_view endpoint_identity) {
  telegram_update_mapping out;
  if (!update.IsObject())
    return fail(out, update_verdict::invalid, "not a JSON object");
  out.update_id = int_member(update, "update_id");
  if (!out.update_id || *out.update_id < 0) {
    out.update_id.reset();
    return fail(out, update_verdict::invalid, "no integer update_id");
  }
  const rapidjson::Value* msg = nullptr;
  for (auto kind : taken_kinds) {
    if ((msg = member(update, kind)) != nullptr) {
      out.kind = kind;
      break;
    }
  }
  if (msg == nullptr) {
    for (auto& m : update.GetObject())
      if (std::string_view{m.name.GetString(), m.name.GetStringLength()}
          != "update_id") {
        out.kind.assign(m.name.GetString(), m.name.GetStringLength());
        break;
      }
    return fail(out, update_verdict::ignored,
                "kind '" + out.kind + "' is not taken");
  }
  if (!msg->IsObject())
    return fail(out, update_verdict::invalid, out.kind + " is not an object");
  auto chat = id_of(*msg, "chat");
  if (!chat)
    return fail(out, update_verdict::invalid, out.kind + " without chat.id");
  auto date = int_member(*msg, "date");
  if (auto edited = int_member(*msg, "edit_date"); edited && *edited > 0)
    date = edited;
  auto observed_at = date ? rfc3339_of_unix_s(*date) : std::string{};
  if (observed_at.empty())
    return fail(out, update_verdict::invalid,
                out.kind + " without a valid date");
  const rapidjson::Value* text = member(*msg, "text");
  if (text == nullptr)
    text = member(*msg, "caption");
  if (text == nullptr)
    return fail(out, update_verdict::ignored,
                out.kind + " without text or caption");
  if (!text->IsString())
    return fail(out, update_verdict::invalid,
                out.kind + " whose text or caption is not a string");
  auto sender = id_of(*msg, "from");
  if (!sender)
    sender = id_of(*msg, "sender_chat");
  if (!sender)
    sender = chat;
  out.verdict = update_verdict::envelope;
  out.envelope = make_envelope(endpoint_identity, *out.update_id, *chat,
                               observed_at, *sender, update_json,
                               {text->GetString(), text->GetStringLength()});
  return out;
}

} // namespace butlers
