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

/// A string member, "" when absent or not a string.
std::string text_member(const rapidjson::Value& v, const char* name) {
  auto m = member(v, name);
  if (m == nullptr || !m->IsString())
    return {};
  return {m->GetString(), m->GetStringLength()};
}

/// The media entry of a file object (document, voice, ...), if it has a
/// file_id.
std::optional<telegram_media> file_of(const rapidjson::Value& f,
                                      const char* kind,
                                      const char* default_type,
                                      const char* default_name) {
  telegram_media m;
  m.kind = kind;
  m.file_id = text_member(f, "file_id");
  if (m.file_id.empty())
    return std::nullopt;
  if (auto n = int_member(f, "file_size"); n && *n >= 0)
    m.file_size = static_cast<uint64_t>(*n);
  m.media_type = text_member(f, "mime_type");
  if (m.media_type.empty() || m.media_type.size() > 255)
    m.media_type = default_type;
  m.name = text_member(f, "file_name");
  if (m.name.empty() || m.name.size() > 255)
    m.name = default_name;
  return m;
}

/// The size of a photo to fetch (see telegram_media_of).
const rapidjson::Value* pick_photo(const rapidjson::Value& sizes,
                                   uint64_t max_bytes) {
  const rapidjson::Value* best = nullptr;
  const rapidjson::Value* smallest = nullptr;
  int64_t best_area = -1;
  uint64_t smallest_size = UINT64_MAX;
  for (auto& s : sizes.GetArray()) {
    if (text_member(s, "file_id").empty())
      continue;
    auto size = int_member(s, "file_size");
    auto area = int_member(s, "width").value_or(0)
                * int_member(s, "height").value_or(0);
    auto bytes = size && *size >= 0 ? static_cast<uint64_t>(*size) : 0;
    if (bytes < smallest_size || smallest == nullptr) {
      smallest = &s;
      smallest_size = bytes;
    }
    if (bytes <= max_bytes && area > best_area) {
      best = &s;
      best_area = area;
    }
  }
  return best != nullptr ? best : smallest;
}

} // namespace

std::vector<telegram_media> telegram_media_of(const rapidjson::Value& msg,
                                              uint64_t max_bytes) {
  std::vector<telegram_media> out;
  if (auto photo = member(msg, "photo"); photo && photo->IsArray()) {
    if (auto p = pick_photo(*photo, max_bytes))
      if (auto m = file_of(*p, "photo", "image/jpeg", "photo.jpg"))
        out.push_back(std::move(*m));
  }
  struct kind_info {
    const char* kind;
    const char* type;
    const char* name;
  };
  static constexpr kind_info kinds[] = {
    {"document", "application/octet-stream", "document"},
    {"voice", "audio/ogg", "voice.ogg"},
    {"audio", "audio/mpeg", "audio.mp3"},
    {"video", "video/mp4", "video.mp4"},
    {"video_note", "video/mp4", "video_note.mp4"},
  };
  for (auto& k : kinds)
    if (auto f = member(msg, k.kind); f && f->IsObject())
      if (auto m = file_of(*f, k.kind, k.type, k.name))
        out.push_back(std::move(*m));
  return out;
}

std::string with_attachments(std::string envelope,
                             const std::vector<attachment_ref>& xs) {
  // make_envelope ends with the payload's and the envelope's "}}".
  if (xs.empty() || envelope.size() < 2)
    return envelope;
  envelope.insert(envelope.size() - 2,
                  R"(,"attachments":)" + attachments_json(xs));
  return envelope;
}

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

telegram_update_mapping map_telegram_update(std::string_view update_json,
                                            std::string_view endpoint_identity,
                                            uint64_t max_attachment_bytes) {
  rapidjson::Document doc;
  // The webhook's body is as big as the HTTP server allows; the depth
  // limit keeps the parse bounded whatever it holds.
  json::parse_limits limits;
  limits.max_bytes = update_json.size();
  if (auto err = json::parse(update_json, doc, limits)) {
    telegram_update_mapping out;
    return fail(out, update_verdict::invalid, "not JSON: " + err->message);
  }
  return map_telegram_update(doc, update_json, endpoint_identity,
                             max_attachment_bytes);
}

telegram_update_mapping map_telegram_update(const rapidjson::Value& update,
                                            std::string_view update_json,
                                            std::string_view endpoint_identity,
                                            uint64_t max_attachment_bytes) {
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
  auto media = telegram_media_of(*msg, max_attachment_bytes);
  if (text == nullptr && media.empty())
    return fail(out, update_verdict::ignored,
                out.kind + " without text, caption or media");
  if (text != nullptr && !text->IsString())
    return fail(out, update_verdict::invalid,
                out.kind + " whose text or caption is not a string");
  auto sender = id_of(*msg, "from");
  if (!sender)
    sender = id_of(*msg, "sender_chat");
  if (!sender)
    sender = chat;
  out.verdict = update_verdict::envelope;
  out.media = std::move(media);
  out.chat_id = *chat;
  out.has_text = text != nullptr;
  std::string_view body;
  if (text != nullptr)
    body = {text->GetString(), text->GetStringLength()};
  out.envelope = make_envelope(endpoint_identity, *out.update_id, *chat,
                               observed_at, *sender, update_json, body);
  return out;
}

} // namespace butlers
