#include "runtime/telegram.hpp"

#include <algorithm>

#include "runtime/json.hpp"

namespace butlers {

namespace {

/// Bytes of the UTF-8 sequence at `s[i]`; 1 for a byte that does not start
/// a complete, well-formed sequence.
size_t sequence_length(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80           ? 1
             : (b >> 5) == 0x6  ? 2
             : (b >> 4) == 0xE  ? 3
             : (b >> 3) == 0x1E ? 4
                                : 1;
  if (i + n > s.size())
    return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 1;
  return n;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), is_space);
}

/// Where the chunk starting at `pos` ends (see split_telegram_text).
size_t chunk_end(std::string_view text, size_t pos, size_t limit) {
  size_t i = pos;
  size_t count = 0;
  size_t after_newline = std::string_view::npos;
  size_t after_space = std::string_view::npos;
  while (i < text.size() && count < limit) {
    bool second_half = count >= limit / 2;
    if (second_half && text[i] == '\n')
      after_newline = i + 1;
    else if (second_half && is_space(text[i]))
      after_space = i + 1;
    i += sequence_length(text, i);
    ++count;
  }
  if (i >= text.size())
    return text.size();
  if (text[i] == '\n')
    return i;
  if (after_newline != std::string_view::npos)
    return after_newline;
  if (is_space(text[i]))
    return i;
  if (after_space != std::string_view::npos)
    return after_space;
  return i;
}

const rapidjson::Value* object_member(const rapidjson::Value& v,
                                      const char* key) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(key);
  if (i == v.MemberEnd() || !i->value.IsObject())
    return nullptr;
  return &i->value;
}

std::optional<int64_t> int_member(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject())
    return std::nullopt;
  auto i = v.FindMember(key);
  if (i == v.MemberEnd() || !i->value.IsInt64())
    return std::nullopt;
  return i->value.GetInt64();
}

/// The chat id as JSON: a number when it is one, else a string.
std::string chat_json(const std::string& chat_id) {
  bool numeric = !chat_id.empty() && chat_id.size() <= 20;
  for (size_t i = 0; i < chat_id.size() && numeric; ++i)
    numeric = (chat_id[i] >= '0' && chat_id[i] <= '9')
              || (i == 0 && chat_id[i] == '-' && chat_id.size() > 1);
  return numeric ? chat_id : json::quote(chat_id);
}

telegram_answer retry(std::string cls, std::string description,
                      bool ambiguous) {
  telegram_answer a;
  a.what = telegram_answer::outcome::retry;
  a.error_class = std::move(cls);
  a.description = std::move(description);
  a.ambiguous = ambiguous;
  return a;
}

telegram_answer fail(std::string cls, std::string description) {
  telegram_answer a;
  a.what = telegram_answer::outcome::fail;
  a.error_class = std::move(cls);
  a.description = std::move(description);
  return a;
}

telegram_answer transport_failure(const http_response& r) {
  auto what = std::string{"Bot API: "} + to_string(r.failure) + ": " + r.error;
  switch (r.failure) {
    case http_failure::timeout: return retry("timeout", what, true);
    case http_failure::protocol: return retry("target_unavailable", what, true);
    case http_failure::connect: return retry("target_unavailable", what, false);
    case http_failure::tls:
    case http_failure::cancelled: return fail("target_unavailable", what);
    default: break;
  }
  return fail("internal_error", what);
}

} // namespace

size_t telegram_length(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); i += sequence_length(text, i))
    ++n;
  return n;
}

std::vector<std::string> split_telegram_text(std::string_view text,
                                             size_t limit) {
  std::vector<std::string> out;
  limit = std::max<size_t>(limit, 1);
  for (size_t pos = 0; pos < text.size();) {
    auto end = chunk_end(text, pos, limit);
    auto chunk = text.substr(pos, end - pos);
    if (!all_space(chunk))
      out.emplace_back(chunk);
    pos = end;
  }
  if (out.empty())
    out.emplace_back(text);
  return out;
}

std::optional<telegram_message_ref> telegram_source(
  std::string_view raw_payload) {
  rapidjson::Document doc;
  if (json::parse(raw_payload, doc) || !doc.IsObject())
    return std::nullopt;
  const rapidjson::Value* update = &doc;
  if (auto payload = object_member(doc, "payload"))
    if (auto raw = object_member(*payload, "raw"))
      update = raw;
  for (auto kind :
       {"message", "edited_message", "channel_post", "edited_channel_post"}) {
    auto msg = object_member(*update, kind);
    if (!msg)
      continue;
    auto id = int_member(*msg, "message_id");
    auto chat = object_member(*msg, "chat");
    auto chat_id = chat ? int_member(*chat, "id") : std::nullopt;
    if (!id || !chat_id)
      return std::nullopt;
    return telegram_message_ref{std::to_string(*chat_id), *id};
  }
  return std::nullopt;
}

std::string telegram_send_message_body(const std::string& chat_id,
                                       std::string_view text,
                                       int64_t reply_to) {
  std::string out = R"({"chat_id":)" + chat_json(chat_id);
  out += R"(,"text":)" + json::quote(text);
  if (reply_to != 0)
    out += R"(,"reply_parameters":{"message_id":)" + std::to_string(reply_to)
           + R"(,"allow_sending_without_reply":true})";
  out += '}';
  return out;
}

std::string telegram_reaction_body(const telegram_message_ref& msg,
                                   std::string_view emoji) {
  return R"({"chat_id":)" + chat_json(msg.chat_id) + R"(,"message_id":)"
         + std::to_string(msg.message_id)
         + R"(,"reaction":[{"type":"emoji","emoji":)" + json::quote(emoji)
         + "}]}";
}

std::string telegram_chat_action_body(const std::string& chat_id,
                                      std::string_view action) {
  return R"({"chat_id":)" + chat_json(chat_id) + R"(,"action":)"
         + json::quote(action) + "}";
}

telegram_answer read_telegram_answer(const http_response& r) {
  if (r.failure != http_failure::none)
    return transport_failure(r);
  rapidjson::Document doc;
  bool json_body = !json::parse(r.body, doc) && doc.IsObject();
  std::string description = "HTTP " + std::to_string(r.status);
  if (json_body && doc.HasMember("description")
      && doc["description"].IsString())
    description += ": " + std::string{doc["description"].GetString()};
  if (r.status == 200) {
    auto ok = json_body && doc.HasMember("ok") && doc["ok"].IsBool()
              && doc["ok"].GetBool();
    if (!ok)
      return fail("internal_error",
                  "Bot API answered 200 without ok: " + r.body.substr(0, 200));
    telegram_answer a;
    a.what = telegram_answer::outcome::ok;
    if (auto res = object_member(doc, "result"))
      if (auto id = int_member(*res, "message_id"))
        a.message_id = std::to_string(*id);
    return a;
  }
  if (r.status == 429) {
    auto a = retry("overload_rejected", description, false);
    std::optional<int64_t> after;
    if (json_body)
      if (auto params = object_member(doc, "parameters"))
        after = int_member(*params, "retry_after");
    if (!after)
      if (auto header = r.retry_after())
        after = header->count();
    a.wait = std::chrono::seconds{std::max<int64_t>(after.value_or(0), 0)};
    return a;
  }
  if (r.status >= 500)
    return retry("target_unavailable", description,
                 r.status == 502 || r.status == 504);
  if (r.status == 400)
    return fail("validation_error", description);
  if (r.status == 401 || r.status == 403 || r.status == 404)
    return fail("target_unavailable", description);
  return fail("internal_error", description);
}

} // namespace butlers
