#include "runtime/claude_stream.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/json.hpp"
#include "runtime/text.hpp"

namespace butlers {

namespace {

using rapidjson::Value;

const Value* member(const Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(name);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

std::string_view string_member(const Value& v, const char* name) {
  auto m = member(v, name);
  if (m == nullptr || !m->IsString())
    return {};
  return {m->GetString(), m->GetStringLength()};
}

/// A non-negative integer member; 0 when absent or of another type.
uint64_t count_member(const Value& v, const char* name) {
  auto m = member(v, name);
  if (m == nullptr)
    return 0;
  if (m->IsUint64())
    return m->GetUint64();
  if (m->IsDouble() && m->GetDouble() > 0
      && m->GetDouble()
           < static_cast<double>(std::numeric_limits<uint64_t>::max()))
    return static_cast<uint64_t>(m->GetDouble());
  return 0;
}

void read_init(const Value& doc, claude_event& ev) {
  ev.kind = claude_event_kind::init;
  ev.model = string_member(doc, "model");
  ev.session_id = string_member(doc, "session_id");
}

void read_stream_event(const Value& doc, claude_event& ev) {
  auto event = member(doc, "event");
  if (event == nullptr
      || string_member(*event, "type") != "content_block_delta")
    return;
  auto delta = member(*event, "delta");
  if (delta == nullptr || string_member(*delta, "type") != "text_delta")
    return;
  ev.kind = claude_event_kind::text_delta;
  ev.text = string_member(*delta, "text");
}

void read_assistant(const Value& doc, claude_event& ev) {
  auto message = member(doc, "message");
  auto content = message != nullptr ? member(*message, "content") : nullptr;
  if (content == nullptr || !content->IsArray())
    return;
  ev.kind = claude_event_kind::assistant;
  ev.model = message != nullptr ? string_member(*message, "model") : "";
  for (auto& block : content->GetArray()) {
    auto type = string_member(block, "type");
    if (type == "text")
      ev.text += string_member(block, "text");
    else if (type == "tool_use")
      ev.tools.emplace_back(string_member(block, "name"));
  }
}

/// The failure message of an error result: its `result` text, else its
/// `errors`, prefixed with the subtype when it says more than "success".
std::string result_error(const Value& doc, const std::string& subtype,
                         std::string_view result) {
  std::string detail{trim(result)};
  if (auto errors = member(doc, "errors");
      detail.empty() && errors != nullptr && errors->IsArray()) {
    for (auto& e : errors->GetArray()) {
      if (!e.IsString())
        continue;
      if (!detail.empty())
        detail += "; ";
      detail.append(e.GetString(), e.GetStringLength());
    }
  }
  if (subtype.empty() || subtype == "success")
    return detail.empty() ? "claude reported an error" : detail;
  return detail.empty() ? subtype : subtype + ": " + detail;
}

void read_result(const Value& doc, claude_event& ev) {
  ev.kind = claude_event_kind::result;
  ev.subtype = string_member(doc, "subtype");
  auto result = string_member(doc, "result");
  ev.text = result;
  auto is_error = member(doc, "is_error");
  // Error subtypes may come with is_error false (cli_output.cpp).
  ev.is_error = (is_error != nullptr && is_error->IsBool()
                 && is_error->GetBool())
                || ev.subtype.compare(0, 5, "error") == 0;
  if (ev.is_error)
    ev.error = result_error(doc, ev.subtype, result);
  if (auto usage = member(doc, "usage")) {
    ev.tokens.input = count_member(*usage, "input_tokens");
    ev.tokens.output = count_member(*usage, "output_tokens");
    ev.tokens.cache_read = count_member(*usage, "cache_read_input_tokens");
    ev.tokens.cache_write = count_member(*usage, "cache_creation_input_tokens");
  }
  if (auto cost = member(doc, "total_cost_usd");
      cost != nullptr && cost->IsNumber() && std::isfinite(cost->GetDouble())
      && cost->GetDouble() >= 0) {
    ev.cost_usd = cost->GetDouble();
    ev.cost_known = true;
  }
  ev.num_turns = static_cast<uint32_t>(
    std::min<uint64_t>(count_member(doc, "num_turns"),
                       std::numeric_limits<uint32_t>::max()));
}

} // namespace

std::vector<std::string> claude_stream_command() {
  return {"claude",          "-p",
          "--input-format",  "stream-json",
          "--output-format", "stream-json",
          "--verbose",       "--include-partial-messages"};
}

std::string claude_user_message(std::string_view text,
                                const std::vector<attachment_data>& xs) {
  std::string out = R"({"type":"user","message":{"role":"user","content":)";
  out += anthropic_content(text, xs);
  out += R"(},"parent_tool_use_id":null,"session_id":"default"})";
  out += '\n';
  return out;
}

claude_event parse_claude_line(std::string_view line) {
  claude_event ev;
  line = trim(line);
  if (line.empty())
    return ev;
  json::parse_limits limits;
  limits.max_bytes = std::max(limits.max_bytes, line.size());
  limits.max_depth = 256; // tool inputs nest
  rapidjson::Document doc;
  if (auto err = json::parse(line, doc, limits)) {
    ev.kind = claude_event_kind::invalid;
    ev.error = "not JSON: " + err->message;
    return ev;
  }
  auto type = string_member(doc, "type");
  if (!doc.IsObject() || type.empty()) {
    ev.kind = claude_event_kind::invalid;
    ev.error = "not an object with a \"type\"";
    return ev;
  }
  if (type == "system") {
    if (string_member(doc, "subtype") == "init")
      read_init(doc, ev);
  } else if (type == "stream_event") {
    read_stream_event(doc, ev);
  } else if (type == "assistant") {
    read_assistant(doc, ev);
  } else if (type == "result") {
    read_result(doc, ev);
  }
  return ev;
}

} // namespace butlers
