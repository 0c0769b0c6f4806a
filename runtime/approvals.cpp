#include "runtime/approvals.hpp"

#include <rapidjson/document.h>

#include "runtime/config.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

std::string member_text(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject())
    return {};
  auto i = v.FindMember(key);
  if (i == v.MemberEnd())
    return {};
  if (i->value.IsString())
    return {i->value.GetString(), i->value.GetStringLength()};
  if (i->value.IsInt64())
    return std::to_string(i->value.GetInt64());
  return {};
}

const rapidjson::Value* object_at(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsObject() ? &i->value : nullptr;
}

/// chat_id as a JSON number when it is one, else a string.
std::string chat_json(std::string_view chat_id) {
  bool numeric = !chat_id.empty() && chat_id.size() < 20;
  for (size_t i = 0; i < chat_id.size() && numeric; ++i)
    numeric = (chat_id[i] >= '0' && chat_id[i] <= '9')
              || (i == 0 && chat_id[i] == '-' && chat_id.size() > 1);
  return numeric ? std::string{chat_id} : json::quote(chat_id);
}

} // namespace

const char* to_string(approval_mode x) {
  switch (x) {
    case approval_mode::ask: return "ask";
    case approval_mode::allow: return "allow";
    case approval_mode::deny: return "deny";
  }
  return "deny";
}

std::optional<approval_mode> parse_approval_mode(std::string_view x) {
  if (x == "ask")
    return approval_mode::ask;
  if (x == "allow")
    return approval_mode::allow;
  if (x == "deny")
    return approval_mode::deny;
  return std::nullopt;
}

approval_policy approval_policy::of(const butler_config& cfg) {
  approval_policy p;
  p.mode = parse_approval_mode(cfg.approvals).value_or(approval_mode::deny);
  p.allow = cfg.approvals_allow;
  p.deny = cfg.approvals_deny;
  p.timeout_s = cfg.approval_timeout_s;
  return p;
}

approval_mode approval_policy::decide(std::string_view tool) const {
  for (auto& p : deny)
    if (glob_match(p, tool))
      return approval_mode::deny;
  for (auto& p : allow)
    if (glob_match(p, tool))
      return approval_mode::allow;
  return mode;
}

bool glob_match(std::string_view pattern, std::string_view name) {
  // Iterative match with backtracking to the last `*`.
  size_t p = 0;
  size_t n = 0;
  size_t star = std::string_view::npos;
  size_t mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

std::string approval_summary(std::string_view text, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 1;
    if (i + len > text.size())
      len = 1;
    if (chars == max_chars) {
      out += "\xe2\x80\xa6"; // …
      return out;
    }
    if (len == 1 && (c < 0x20 || c == 0x7f))
      out += ' ';
    else if (len == 1 && c >= 0x80)
      out += "\xef\xbf\xbd"; // not UTF-8: U+FFFD
    else
      out.append(text.substr(i, len));
    ++chars;
    i += len;
  }
  return out;
}

bool approval_granted(std::string_view status) {
  return status == "approved";
}

std::string api_caller_identity(std::string_view body_sender) {
  return body_sender.empty() ? std::string{"api"} : std::string{body_sender};
}

bool approval_caller_matches(std::string_view channel, std::string_view sender,
                             std::string_view caller) {
  if (sender.empty() || caller.empty())
    return false;
  if (caller == sender)
    return true;
  return caller.size() == channel.size() + 1 + sender.size()
         && caller.substr(0, channel.size()) == channel
         && caller[channel.size()] == ':'
         && caller.substr(channel.size() + 1) == sender;
}

std::optional<approval_post_body> parse_approval_post(std::string_view body,
                                                      std::string& error) {
  rapidjson::Document doc;
  if (json::parse(body, doc) || !doc.IsObject()) {
    error = "the body must be a JSON object";
    return std::nullopt;
  }
  approval_post_body out;
  auto d = doc.FindMember("decision");
  if (d == doc.MemberEnd() || !d->value.IsString()) {
    error = "decision: required, \"approve\" or \"deny\"";
    return std::nullopt;
  }
  std::string_view decision{d->value.GetString(), d->value.GetStringLength()};
  if (decision != "approve" && decision != "deny") {
    error = "decision: must be \"approve\" or \"deny\"";
    return std::nullopt;
  }
  out.approve = decision == "approve";
  auto s = doc.FindMember("sender");
  if (s != doc.MemberEnd()) {
    if (!s->value.IsString() || s->value.GetStringLength() == 0
        || s->value.GetStringLength() > 256) {
      error = "sender: must be a string of 1 to 256 characters";
      return std::nullopt;
    }
    out.sender = s->value.GetString();
  }
  return out;
}

std::string approval_callback_data(std::string_view approval_id, bool approve) {
  return "ap:" + std::string{approval_id} + (approve ? ":y" : ":n");
}

std::string approval_question_body(std::string_view chat_id,
                                   std::string_view text,
                                   std::string_view approval_id) {
  return R"({"chat_id":)" + chat_json(chat_id) + R"(,"text":)"
         + json::quote(text)
         + R"(,"reply_markup":{"inline_keyboard":[[{"text":"Approve",)"
           R"("callback_data":)"
         + json::quote(approval_callback_data(approval_id, true))
         + R"(},{"text":"Deny","callback_data":)"
         + json::quote(approval_callback_data(approval_id, false)) + "}]]}}";
}

std::string approval_question_text(std::string_view butler,
                                   std::string_view tool,
                                   std::string_view summary,
                                   uint32_t timeout_s) {
  return std::string{butler} + " asks to use " + std::string{tool} + ": "
         + std::string{summary} + "\nApprove? (denied without an answer in "
         + std::to_string(timeout_s) + " s)";
}

std::string answer_callback_body(std::string_view callback_id,
                                 std::string_view text) {
  return R"({"callback_query_id":)" + json::quote(callback_id) + R"(,"text":)"
         + json::quote(text) + "}";
}

std::string approval_outcome_body(std::string_view chat_id, int64_t message_id,
                                  std::string_view text) {
  return R"({"chat_id":)" + chat_json(chat_id) + R"(,"message_id":)"
         + std::to_string(message_id) + R"(,"text":)" + json::quote(text)
         + R"(,"reply_markup":{"inline_keyboard":[]}})";
}

std::optional<approval_press> parse_approval_callback(
  std::string_view update_json) {
  rapidjson::Document doc;
  if (json::parse(update_json, doc) || !doc.IsObject())
    return std::nullopt;
  auto* cq = object_at(doc, "callback_query");
  if (cq == nullptr)
    return std::nullopt;
  approval_press out;
  out.callback_id = member_text(*cq, "id");
  if (auto* from = object_at(*cq, "from"))
    out.from = member_text(*from, "id");
  auto data = member_text(*cq, "data");
  // "ap:" + 36 + ":y"
  if (out.callback_id.empty() || data.size() != 41
      || data.compare(0, 3, "ap:") != 0 || data[39] != ':'
      || (data[40] != 'y' && data[40] != 'n'))
    return std::nullopt;
  out.approval_id = data.substr(3, 36);
  out.approve = data[40] == 'y';
  return out;
}

std::string approval_mail_text(std::string_view butler, std::string_view tool,
                               std::string_view summary, uint32_t timeout_s) {
  return approval_question_text(butler, tool, summary, timeout_s)
         + "\n\nTo answer, reply to this mail with \"approve\" or \"deny\" "
           "on the first line.";
}

std::optional<bool> mail_approval_decision(std::string_view text) {
  auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!text.empty()) {
    auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{}
                                         : text.substr(eol + 1);
    while (!line.empty() && blank(line.front()))
      line.remove_prefix(1);
    while (!line.empty() && blank(line.back()))
      line.remove_suffix(1);
    if (line.empty())
      continue;
    std::string word;
    for (auto c : line)
      word += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (word == "approve")
      return true;
    if (word == "deny")
      return false;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string approval_mail_notice(std::string_view message_id) {
  return "email:" + std::string{message_id};
}

} // namespace butlers
