#include "runtime/http_checks.hpp"

#include <cctype>

#include "runtime/json.hpp"

namespace butlers {

bool bearer_matches(std::string_view expected,
                    std::optional<std::string_view> authorization) {
  if (expected.empty())
    return true;
  if (!authorization || authorization->size() != expected.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>((*authorization)[i] ^ expected[i]);
  return diff == 0;
}

bool secret_matches(std::string_view expected,
                    std::optional<std::string_view> given) {
  if (expected.empty() || !given || given->size() != expected.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>((*given)[i] ^ expected[i]);
  return diff == 0;
}

bool is_json_media_type(std::string_view value) {
  auto type = value.substr(0, value.find(';'));
  while (!type.empty() && type.back() == ' ')
    type.remove_suffix(1);
  std::string lower;
  for (char c : type)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "application/json";
}

bool is_uuid(std::string_view x) {
  if (x.size() != 36)
    return false;
  for (size_t i = 0; i < x.size(); ++i) {
    auto c = x[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-')
        return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

http_reply bad_uuid_reply(std::string_view what) {
  return validation_reply(std::string{what} + " id must be a UUID");
}

http_reply bad_thread_id_reply() {
  return validation_reply("thread id must be 1..128 of [A-Za-z0-9._:-]");
}

std::optional<int64_t> query_int(std::string_view query, std::string_view key,
                                 int64_t fallback) {
  size_t pos = 0;
  while (pos <= query.size()) {
    auto end = query.find('&', pos);
    if (end == std::string_view::npos)
      end = query.size();
    auto part = query.substr(pos, end - pos);
    if (part.size() > key.size() && part.substr(0, key.size()) == key
        && part[key.size()] == '=') {
      auto value = part.substr(key.size() + 1);
      // At most 18 digits: no overflow of int64_t.
      if (value.empty() || value.size() > 18)
        return std::nullopt;
      int64_t x = 0;
      for (char c : value) {
        if (c < '0' || c > '9')
          return std::nullopt;
        x = x * 10 + (c - '0');
      }
      return x;
    }
    pos = end + 1;
  }
  return fallback;
}

std::optional<http_reply> refuse_json_body(
  std::optional<std::string_view> content_type, size_t size,
  uint64_t max_bytes) {
  if (!content_type || !is_json_media_type(*content_type))
    return not_json_reply();
  if (size > max_bytes)
    return body_too_large_reply();
  return std::nullopt;
}

std::optional<transcript_window> parse_transcript_query(
  std::string_view query) {
  auto after = query_int(query, "after", 0);
  auto limit = query_int(query, "limit", 500);
  if (!after || !limit || *limit < 1 || *limit > 1000)
    return std::nullopt;
  return transcript_window{*after, *limit};
}

http_reply transcript_query_reply() {
  return validation_reply("query parameters: after (cursor, a non-negative "
                          "integer) and limit (1..1000)");
}

std::optional<operator_action> parse_operator_body(operator_verb verb,
                                                   std::string request_id,
                                                   std::string_view body) {
  rapidjson::Document doc;
  if (json::parse(body, doc) || !doc.IsObject())
    return std::nullopt;
  auto field = [&](const char* key) {
    auto i = doc.FindMember(key);
    return i != doc.MemberEnd() && i->value.IsString()
             ? std::string{i->value.GetString()}
             : std::string{};
  };
  operator_action out;
  out.verb = verb;
  out.request_id = std::move(request_id);
  out.who = field("who");
  out.why = field("why");
  if (verb == operator_verb::force_complete) {
    out.state = field("state");
  } else if (verb == operator_verb::reroute) {
    out.segment_id = field("segment_id");
    out.butler = field("butler");
  }
  return out;
}

http_reply operator_body_reply() {
  return validation_reply("body must be a JSON object with 'who' and 'why'");
}

} // namespace butlers
