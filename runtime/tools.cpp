#include "runtime/tools.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include <openssl/rand.h>

#include "runtime/dedupe.hpp"
#include "runtime/schema.hpp"
#include "runtime/threads.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

// -- tokens -------------------------------------------------------------------

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    return {};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (auto b : raw) {
    out += hex[b >> 4];
    out += hex[b & 0x0f];
  }
  return out;
}

std::string string_arg(const rapidjson::Value& v, const char* name,
                       std::string fallback) {
  auto i = v.FindMember(name);
  if (i == v.MemberEnd() || !i->value.IsString())
    return fallback;
  return {i->value.GetString(), i->value.GetStringLength()};
}

std::string tool_tokens::mint(tool_scope scope) {
  auto random = random_hex(32);
  if (random.empty())
    return {};
  auto token = "bt_" + random;
  auto grant = std::make_shared<tool_grant>(std::move(scope));
  std::lock_guard<std::mutex> guard{mtx_};
  if (live_.size() >= capacity)
    return {};
  live_.emplace(token, std::move(grant));
  return token;
}

tool_grant_ptr tool_tokens::find(std::string_view token) const {
  if (token.empty())
    return nullptr;
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = live_.find(std::string{token});
  return i == live_.end() ? nullptr : i->second;
}

void tool_tokens::revoke(const std::string& token) {
  std::lock_guard<std::mutex> guard{mtx_};
  live_.erase(token);
}

size_t tool_tokens::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return live_.size();
}

// -- results ------------------------------------------------------------------

tool_result tool_ok(std::string structured) {
  tool_result r;
  r.status = tool_status::ok;
  r.text = structured;
  r.structured = std::move(structured);
  return r;
}

tool_result tool_failed(std::string reason, std::string message,
                        std::string structured) {
  tool_result r;
  r.status = tool_status::tool_error;
  r.reason = std::move(reason);
  if (structured.empty())
    structured = R"({"error":)" + json::quote(r.reason) + R"(,"message":)"
                 + json::quote(message) + "}";
  r.structured = std::move(structured);
  r.text = std::move(message);
  return r;
}

std::string outcome_label(const tool_result& r) {
  switch (r.status) {
    case tool_status::ok: return "ok";
    case tool_status::unknown_tool: return "unknown_tool";
    case tool_status::unauthorized: return "unauthorized";
    case tool_status::tool_error: break;
  }
  return r.reason.empty() ? "error" : r.reason;
}

// -- the catalogue ------------------------------------------------------------

namespace {

constexpr const char* key_schema
  = R"({"type":"string","minLength":1,"maxLength":256,)"
    R"("description":"The key, at most 256 characters."})";

constexpr const char* scope_schema
  = R"({"type":"string","enum":["butler","sender"],)"
    R"("description":"butler (default): the butler's shared namespace; )"
    R"(sender: the asking person's own namespace."})";

void add_later_tools(std::vector<tool_spec>& out);

std::vector<tool_spec> make_catalogue() {
  std::string key = key_schema;
  std::string scope = scope_schema;
  std::vector<tool_spec> out;
  out.push_back(
    {"notify", "Send a message",
     "Sends a message to the person who asked (the default: a reply to "
     "their message), or to a recipient this butler is allowed to reach. "
     "Call it as often as needed; messages arrive in the order of the "
     "calls. intent react sets a reaction on the asker's message instead.",
     R"({"type":"object","additionalProperties":false,"properties":{)"
     R"("message":{"type":"string","minLength":1,"maxLength":65536,)"
     R"("description":"The text to send (send, reply)."},)"
     R"("intent":{"type":"string","enum":["reply","send","react"],)"
     R"("description":"reply (default with no recipient), send, or react."},)"
     R"("channel":{"type":"string","minLength":1,"maxLength":32,)"
     R"("description":"The channel of recipient (telegram, email, ...)."},)"
     R"("recipient":{"type":"string","minLength":1,"maxLength":256,)"
     R"("description":"Chat id or address; omit to answer the asker."},)"
     R"("subject":{"type":"string","maxLength":998},)"
     R"("reaction":{"type":"string","enum":["progress","queued","parsed",)"
     R"("errored"],"description":"react: the state to show."}}})",
     R"({"type":"object","properties":{"delivery_id":{"type":"string"},)"
     R"("status":{"type":"string","enum":["delivered","queued","failed"]},)"
     R"("channel":{"type":"string"},"recipient":{"type":"string"},)"
     R"("intent":{"type":"string"},"sequence":{"type":"integer"}},)"
     R"("required":["delivery_id","status","sequence"]})",
     false});
  out.push_back(
    {"state_get", "Read a remembered value",
     "Reads a value this butler stored under key, with its version.",
     R"({"type":"object","additionalProperties":false,"required":["key"],)"
     R"("properties":{"key":)"
       + key + R"(,"scope":)" + scope + "}}",
     R"({"type":"object","properties":{"key":{"type":"string"},)"
     R"("found":{"type":"boolean"},"value":{},"version":{"type":"integer"},)"
     R"("updated_at":{"type":"string"}},"required":["key","found","version"]})",
     true});
  out.push_back(
    {"state_put", "Remember a value",
     "Stores a JSON value under key. With expected_version it only writes "
     "if the stored version is that one (0: only if absent), else it fails "
     "with a conflict naming the current version.",
     R"({"type":"object","additionalProperties":false,)"
     R"("required":["key","value"],"properties":{"key":)"
       + key
       + R"(,"value":{"description":"Any JSON value."},)"
         R"("expected_version":{"type":"integer","minimum":0},"scope":)"
       + scope + "}}",
     R"({"type":"object","properties":{"key":{"type":"string"},)"
     R"("version":{"type":"integer"}},"required":["key","version"]})",
     false});
  out.push_back(
    {"state_list", "List remembered keys",
     "Lists this butler's keys that start with prefix, in key order, a page "
     "at a time (pass next_cursor back as cursor).",
     R"({"type":"object","additionalProperties":false,"properties":{)"
     R"("prefix":{"type":"string","maxLength":256},)"
     R"("cursor":{"type":"string","maxLength":256},)"
     R"("limit":{"type":"integer","minimum":1,"maximum":100},"scope":)"
       + scope + "}}",
     R"({"type":"object","properties":{"items":{"type":"array","items":)"
     R"({"type":"object","properties":{"key":{"type":"string"},)"
     R"("version":{"type":"integer"},"value":{}}}},)"
     R"("next_cursor":{"type":"string"}},"required":["items","next_cursor"]})",
     true});
  out.push_back(
    {"state_delete", "Forget a value",
     "Deletes the value under key (only at expected_version, if given).",
     R"({"type":"object","additionalProperties":false,"required":["key"],)"
     R"("properties":{"key":)"
       + key + R"(,"expected_version":{"type":"integer","minimum":1},"scope":)"
       + scope + "}}",
     R"({"type":"object","properties":{"key":{"type":"string"},)"
     R"("deleted":{"type":"boolean"},"version":{"type":"integer"}},)"
     R"("required":["key","deleted"]})",
     false});
  add_later_tools(out);
  return out;
}

/// The tools of reminders, hand-offs and recall.
void add_later_tools(std::vector<tool_spec>& out) {
  out.push_back(
    {"remind", "Set a reminder",
     "Wakes this butler once, at a time (at, RFC 3339) or after a delay "
     "(after_s seconds), with message as the prompt; the session then may "
     "notify the person who asked now.",
     R"({"type":"object","additionalProperties":false,"required":["message"],)"
     R"("properties":{"message":{"type":"string","minLength":1,)"
     R"("maxLength":65536},"at":{"type":"string","maxLength":64,)"
     R"("description":"RFC 3339 time, e.g. 2026-11-28T21:00:00+01:00."},)"
     R"("after_s":{"type":"integer","minimum":1}}})",
     R"({"type":"object","properties":{"reminder_id":{"type":"string"},)"
     R"("due_at":{"type":"string"}},"required":["reminder_id","due_at"]})",
     false});
  out.push_back(
    {"remind_cancel", "Cancel a reminder",
     "Cancels a pending reminder this butler set for the person who asked.",
     R"({"type":"object","additionalProperties":false,)"
     R"("required":["reminder_id"],"properties":{"reminder_id":)"
     R"({"type":"string","maxLength":36}}})",
     R"({"type":"object","properties":{"reminder_id":{"type":"string"},)"
     R"("cancelled":{"type":"boolean"},"state":{"type":"string"}},)"
     R"("required":["reminder_id","cancelled"]})",
     false});
  out.push_back(
    {"remind_list", "List reminders",
     "Lists the pending reminders this butler set for the person who asked, "
     "soonest first.",
     R"({"type":"object","additionalProperties":false,"properties":{)"
     R"("limit":{"type":"integer","minimum":1,"maximum":100}}})",
     R"({"type":"object","properties":{"reminders":{"type":"array","items":)"
     R"({"type":"object","properties":{"reminder_id":{"type":"string"},)"
     R"("due_at":{"type":"string"},"message":{"type":"string"}}}}},)"
     R"("required":["reminders"]})",
     true});
  out.push_back(
    {"route_to", "Hand work to another butler",
     "Hands a sub-task to another butler by name, as part of the same "
     "request; that butler answers the person itself.",
     R"({"type":"object","additionalProperties":false,)"
     R"("required":["butler","prompt"],"properties":{)"
     R"("butler":{"type":"string","minLength":1,"maxLength":64},)"
     R"("prompt":{"type":"string","minLength":1,"maxLength":65536}}})",
     R"({"type":"object","properties":{"work_id":{"type":"string"},)"
     R"("butler":{"type":"string"},"status":{"type":"string"}},)"
     R"("required":["work_id","butler","status"]})",
     false});
  out.push_back(
    {"recall", "Recall the conversation",
     "Reads this request's context and, for a conversation thread, its "
     "latest messages (at most limit, oldest first).",
     R"({"type":"object","additionalProperties":false,"properties":{)"
     R"("limit":{"type":"integer","minimum":1,"maximum":100}}})",
     R"({"type":"object","properties":{"request":{"type":"object"},)"
     R"("messages":{"type":"array"}},"required":["request","messages"]})",
     true});
  // Claude Code's `--permission-prompt-tool`: it calls this itself before
  // a tool that is not pre-approved; the answer is the JSON it expects.
  out.push_back(
    {"approval_prompt", "Ask permission to use a tool",
     "Asks whether this session may use tool_name with input: the butler's "
     "approval policy answers, or the person who started the run does. "
     "Answers behavior allow (with updatedInput) or deny (with message).",
     R"({"type":"object","required":["tool_name"],"properties":{)"
     R"("tool_name":{"type":"string","minLength":1,"maxLength":256},)"
     R"("input":{"type":"object"},"tool_use_id":{"type":"string",)"
     R"("maxLength":256}}})",
     R"({"type":"object","properties":{"behavior":{"type":"string",)"
     R"("enum":["allow","deny"]},"updatedInput":{"type":"object"},)"
     R"("message":{"type":"string"}},"required":["behavior"]})",
     false});
}

/// The compiled input schemas, in catalogue order.
const std::vector<schema>& input_schemas() {
  static const std::vector<schema> compiled = [] {
    std::vector<schema> out;
    for (auto& t : tool_catalogue())
      out.push_back(schema::compile(t.name, t.input_schema));
    return out;
  }();
  return compiled;
}

} // namespace

const std::vector<tool_spec>& tool_catalogue() {
  static const std::vector<tool_spec> list = make_catalogue();
  return list;
}

const tool_spec* find_tool(std::string_view name) {
  for (auto& t : tool_catalogue())
    if (t.name == name)
      return &t;
  return nullptr;
}

std::string check_arguments(const tool_spec& tool, std::string_view arguments,
                            rapidjson::Document& parsed) {
  if (arguments.empty())
    arguments = "{}";
  if (auto err = json::parse(arguments, parsed))
    return "arguments are not JSON: " + err->message;
  if (!parsed.IsObject())
    return "arguments must be a JSON object";
  auto& catalogue = tool_catalogue();
  auto index = static_cast<size_t>(&tool - catalogue.data());
  auto violations = input_schemas().at(index).validate(parsed);
  if (violations.empty())
    return {};
  std::string out = "invalid arguments for " + tool.name + ":";
  for (auto& v : violations)
    out += " " + to_string(v) + ";";
  out.pop_back();
  return out;
}

// -- steps --------------------------------------------------------------------

namespace {} // namespace

std::string state_scope(const tool_scope& s, std::string_view scope_arg) {
  if (scope_arg == "sender")
    return "sender:" + s.channel + ":" + s.sender;
  return {};
}

std::variant<notify_target, tool_result> decide_notify_target(
  const tool_scope& s, const rapidjson::Value& args) {
  auto intent = string_arg(args, "intent");
  auto channel = string_arg(args, "channel");
  auto recipient = string_arg(args, "recipient");
  if (intent == "react") {
    if (!channel.empty() || !recipient.empty())
      return tool_failed("invalid_arguments",
                         "intent react sets a reaction on the asker's "
                         "message: give no channel or recipient");
    return notify_target{s.channel, s.sender, "react"};
  }
  // No address: the asker.
  if (channel.empty() && recipient.empty())
    return notify_target{s.channel, s.sender,
                         intent.empty() ? "reply" : intent};
  if (channel.empty())
    channel = s.channel;
  if (channel == s.channel && (recipient.empty() || recipient == s.sender))
    return notify_target{channel, s.sender, intent.empty() ? "reply" : intent};
  auto address = channel + ":" + recipient;
  bool allowed = std::find(s.recipients.begin(), s.recipients.end(), address)
                 != s.recipients.end();
  if (!allowed) {
    std::string may = s.channel + ":" + s.sender + " (the asker)";
    for (auto& r : s.recipients)
      may += ", " + r;
    return tool_failed("recipient_refused", "butler '" + s.butler
                                              + "' may not notify " + address
                                              + "; it may reach " + may
                                              + " ([[butler]] recipients)");
  }
  if (recipient.empty())
    return tool_failed("invalid_arguments",
                       "a channel other than the asker's needs a recipient");
  return notify_target{channel, recipient, "send"};
}

std::string make_tool_notify(const tool_scope& s, const notify_target& t,
                             const rapidjson::Value& args, uint32_t seq) {
  using json::quote;
  std::string out = R"({"schema_version":"notify.v1","origin_butler":)"
                    + quote(s.butler);
  out += R"(,"request_context":{"request_id":)" + quote(s.request_id);
  if (!s.received_at.empty())
    out += R"(,"received_at":)" + quote(s.received_at);
  out += R"(,"source_channel":)" + quote(s.channel);
  out += R"(,"source_endpoint_identity":)" + quote(s.endpoint);
  out += R"(,"source_sender_identity":)" + quote(s.sender);
  if (!s.thread.empty())
    out += R"(,"source_thread_identity":)" + quote(s.thread);
  out += R"(},"delivery":{"intent":)" + quote(t.intent);
  out += R"(,"channel":)" + quote(t.channel);
  if (!t.recipient.empty())
    out += R"(,"recipient":)" + quote(t.recipient);
  auto subject = string_arg(args, "subject");
  if (!subject.empty())
    out += R"(,"subject":)" + quote(subject);
  if (t.intent == "react") {
    out += R"(,"reaction":{"state":)"
           + quote(string_arg(args, "reaction", "progress")) + R"(,"at_us":)"
           + std::to_string(unix_now_us()) + "}";
  } else {
    out += R"(,"message":)" + quote(string_arg(args, "message"));
  }
  out += R"(},"idempotency_key":)"
         + quote(s.work_id + ":" + std::to_string(seq)) + "}";
  return out;
}

std::string derived_uuid(std::string_view key, int64_t unix_ms) {
  auto digest = sha256_hex(key);
  uuid u;
  auto ms = static_cast<uint64_t>(std::max<int64_t>(unix_ms, 0));
  for (int i = 0; i < 6; ++i)
    u.bytes[i] = static_cast<uint8_t>(ms >> (8 * (5 - i)));
  for (size_t i = 6; i < 16; ++i)
    u.bytes[i] = static_cast<uint8_t>(
      std::stoi(digest.substr(2 * i, 2), nullptr, 16));
  u.bytes[6] = static_cast<uint8_t>(0x70 | (u.bytes[6] & 0x0f));
  u.bytes[8] = static_cast<uint8_t>(0x80 | (u.bytes[8] & 0x3f));
  return u.to_string();
}

namespace {

/// Parses RFC 3339 ("2026-11-28T21:00:00Z", fractions and offsets allowed)
/// into Unix ms.
std::optional<int64_t> parse_rfc3339(const std::string& s) {
  int y, mo, d, h, mi, sec;
  int n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d,
                  &h, &mi, &sec, &n)
        != 6
      || n != 19)
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return std::nullopt;
  size_t i = 19;
  int64_t frac_ms = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (digits < 3)
        frac_ms = frac_ms * 10 + (s[i] - '0');
      ++digits;
      ++i;
    }
    if (digits == 0)
      return std::nullopt;
    for (; digits < 3; ++digits)
      frac_ms *= 10;
  }
  int64_t offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-')
             && s[i + 3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2 || oh > 23
        || om > 59)
      return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (s[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size())
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  auto t = timegm(&tm);
  return (static_cast<int64_t>(t) - offset_s) * 1000 + frac_ms;
}

} // namespace

std::variant<int64_t, std::string> remind_due(const rapidjson::Value& args,
                                              int64_t now_ms,
                                              const tool_limits& limits) {
  auto at = args.FindMember("at");
  auto after = args.FindMember("after_s");
  bool has_at = at != args.MemberEnd();
  bool has_after = after != args.MemberEnd();
  if (has_at == has_after)
    return std::string{"give exactly one of at (RFC 3339) and after_s"};
  auto max_ms = static_cast<int64_t>(limits.max_remind_delay.count()) * 1000;
  if (has_after) {
    auto s = after->value.GetInt64();
    if (s * 1000 > max_ms)
      return "after_s is over the longest delay ("
             + std::to_string(limits.max_remind_delay.count()) + " s)";
    return now_ms + s * 1000;
  }
  auto text = std::string{at->value.GetString(), at->value.GetStringLength()};
  auto due = parse_rfc3339(text);
  if (!due)
    return "at '" + text
           + "' is not an RFC 3339 time such as 2026-11-28T21:00:00Z";
  if (*due - now_ms > max_ms)
    return "at is further away than the longest delay ("
           + std::to_string(limits.max_remind_delay.count()) + " s)";
  // A time just past fires at once.
  return std::max(*due, now_ms);
}

} // namespace butlers
