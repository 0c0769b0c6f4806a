#include "runtime/slack.hpp"

#include <algorithm>

#include "runtime/json.hpp"
#include "runtime/telegram.hpp"

namespace butlers {

namespace {

const rapidjson::Value* object_member(const rapidjson::Value& v,
                                      const char* key) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(key);
  if (i == v.MemberEnd() || !i->value.IsObject())
    return nullptr;
  return &i->value;
}

std::string string_member(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject())
    return {};
  auto i = v.FindMember(key);
  if (i == v.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

slack_answer answer(slack_answer::outcome what, std::string cls,
                    std::string description, bool ambiguous = false) {
  slack_answer a;
  a.what = what;
  a.error_class = std::move(cls);
  a.description = std::move(description);
  a.ambiguous = ambiguous;
  return a;
}

slack_answer transport_failure(const http_response& r) {
  using o = slack_answer::outcome;
  auto what = std::string{"Web API: "} + to_string(r.failure) + ": " + r.error;
  switch (r.failure) {
    case http_failure::timeout: return answer(o::retry, "timeout", what, true);
    case http_failure::protocol:
      return answer(o::retry, "target_unavailable", what, true);
    case http_failure::connect:
      return answer(o::retry, "target_unavailable", what);
    case http_failure::tls:
    case http_failure::cancelled:
      return answer(o::fail, "target_unavailable", what);
    default: break;
  }
  return answer(o::fail, "internal_error", what);
}

/// The class of an `ok:false` error.
std::string class_of_error(std::string_view error) {
  if (error == "not_in_channel" || error == "is_archived")
    return "target_unavailable";
  if (error == "invalid_auth" || error == "not_authed"
      || error == "account_inactive" || error == "token_revoked"
      || error == "missing_scope")
    return "internal_error";
  return "validation_error";
}

} // namespace

std::vector<std::string> split_slack_text(std::string_view text, size_t limit) {
  return split_telegram_text(text, std::min(limit, slack_text_limit));
}

std::optional<slack_message_ref> slack_source(std::string_view raw_payload) {
  rapidjson::Document doc;
  if (json::parse(raw_payload, doc) || !doc.IsObject())
    return std::nullopt;
  const rapidjson::Value* callback = &doc;
  if (auto payload = object_member(doc, "payload"))
    if (auto raw = object_member(*payload, "raw"))
      callback = raw;
  auto ev = object_member(*callback, "event");
  if (ev == nullptr)
    return std::nullopt;
  slack_message_ref m;
  m.channel = string_member(*ev, "channel");
  m.ts = string_member(*ev, "ts");
  m.thread_ts = string_member(*ev, "thread_ts");
  if (m.channel.empty() || m.ts.empty())
    return std::nullopt;
  if (m.thread_ts.empty())
    m.thread_ts = m.ts;
  return m;
}

std::string slack_post_message_body(std::string_view channel,
                                    std::string_view text,
                                    std::string_view thread_ts) {
  std::string out = R"({"channel":)" + json::quote(channel);
  out += R"(,"text":)" + json::quote(text);
  if (!thread_ts.empty())
    out += R"(,"thread_ts":)" + json::quote(thread_ts);
  out += '}';
  return out;
}

std::string slack_reaction_body(const slack_message_ref& msg,
                                std::string_view name) {
  return R"({"channel":)" + json::quote(msg.channel) + R"(,"timestamp":)"
         + json::quote(msg.ts) + R"(,"name":)" + json::quote(name) + "}";
}

bool is_slack_emoji_name(std::string_view name) {
  auto tone = name.find("::skin-tone-");
  if (tone != std::string_view::npos) {
    auto rest = name.substr(tone + 12);
    if (rest.size() != 1 || rest[0] < '2' || rest[0] > '6')
      return false;
    name = name.substr(0, tone);
  }
  if (name.empty() || name.size() > 100)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
           || c == '+' || c == '-' || c == '\'';
  });
}

slack_answer read_slack_answer(const http_response& r) {
  using o = slack_answer::outcome;
  if (r.failure != http_failure::none)
    return transport_failure(r);
  rapidjson::Document doc;
  bool json_body = !json::parse(r.body, doc) && doc.IsObject();
  auto description = "HTTP " + std::to_string(r.status);
  if (r.status == 429) {
    auto a = answer(o::retry, "overload_rejected", description);
    auto after = r.retry_after();
    a.wait = after ? std::chrono::milliseconds{*after}
                   : std::chrono::milliseconds{0};
    return a;
  }
  if (r.status >= 500)
    return answer(o::retry, "target_unavailable", description,
                  r.status == 502 || r.status == 504);
  if (r.status != 200 || !json_body || !doc.HasMember("ok")
      || !doc["ok"].IsBool())
    return answer(o::fail, "internal_error",
                  description + " without an ok field: "
                    + json::quote(r.body.substr(0, 200)));
  if (doc["ok"].GetBool()) {
    slack_answer a;
    a.what = o::ok;
    a.ts = string_member(doc, "ts");
    return a;
  }
  auto error = string_member(doc, "error");
  if (error.empty())
    error = "unknown_error";
  if (error == "ratelimited") {
    auto a = answer(o::retry, "overload_rejected", error);
    a.slack_error = error;
    if (auto after = r.retry_after())
      a.wait = std::chrono::milliseconds{*after};
    return a;
  }
  auto a = answer(o::fail, class_of_error(error), error);
  a.slack_error = error.substr(0, 100);
  return a;
}

} // namespace butlers
