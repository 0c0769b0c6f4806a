#include "runtime/cli_output.hpp"

#include <algorithm>

#include "runtime/json.hpp"
#include "runtime/text.hpp"

// Output shapes, as documented by the tools and the projects that parse them:
//
// - claude -p --output-format json: one result object, {"type":"result",
//   "subtype":"success"|"error_max_turns"|"error_during_execution"|...,
//   "is_error":bool, "result":"...", "session_id", "total_cost_usd", ...};
//   error subtypes may lack "result" and carry "errors":[...] instead, and
//   is_error can be false on them (hrntknr/claude-code-protocol,
//   docs/13_error.md). With --verbose it prints an array of all messages
//   and stream-json prints one per line; the result object is the last.
// - codex exec --json: JSON lines (openai/codex codex-rs/exec/src/
//   exec_events.rs): thread.started, turn.started, item.started|updated|
//   completed {"item":{"id","type":"agent_message","text"}}, turn.completed,
//   turn.failed {"error":{"message"}}, error {"message"}. Releases around
//   openai/codex#4525 (2025-09) spelled the item "item_type":
//   "assistant_message"; before that, --json printed {"id","msg":{"type":
//   "agent_message","message"}} and {"msg":{"type":"task_complete",
//   "last_agent_message"}}. Codex prints notes ("Reading prompt from
//   stdin...") that are not JSON.
// - opencode run: the answer as plain text. With --format json, JSON lines
//   {"type":"step_start"|"text"|"tool_use"|"step_finish"|"error",
//   "timestamp","sessionID","part":{...}}; text in part.text, errors in
//   {"error":{"name","data":{"message"}}} (anomalyco/opencode
//   packages/opencode/src/cli/cmd/run.ts, as described by its parsers).

namespace butlers {

namespace {

using rapidjson::Value;

/// Our input is already bounded by the subprocess's output cap, so only the
/// nesting depth needs a limit; tool inputs inside messages can nest a bit.
json::parse_limits limits_for(std::string_view text) {
  json::parse_limits limits;
  limits.max_bytes = std::max(limits.max_bytes, text.size());
  limits.max_depth = 256;
  return limits;
}

/// Parses `text` as one JSON object; false if it is anything else.
bool parse_object(std::string_view text, rapidjson::Document& doc) {
  return !json::parse(text, doc, limits_for(text)) && doc.IsObject();
}

/// Calls `f` with each trimmed, non-empty line of `text`.
template<class F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = trim(text.substr(0, nl));
    if (!line.empty())
      f(line);
    if (nl == std::string_view::npos)
      break;
    text.remove_prefix(nl + 1);
  }
}

const Value* member(const Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(name);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

/// The member `name` of `v` if it is a string.
std::optional<std::string> string_member(const Value& v, const char* name) {
  auto m = member(v, name);
  if (m == nullptr || !m->IsString())
    return std::nullopt;
  return std::string{m->GetString(), m->GetStringLength()};
}

bool has_type(const Value& v, std::string_view type) {
  auto t = string_member(v, "type");
  return t && *t == type;
}

/// The start of `text` for an error message: what a CLI printed instead of
/// what we expected is usually the most useful part of the error.
std::string excerpt(std::string_view text) {
  constexpr size_t max_len = 200;
  text = trim(text);
  if (text.size() <= max_len)
    return std::string{text};
  return std::string{text.substr(0, max_len)} + "...";
}

cli_answer failure(std::string why) {
  cli_answer result;
  result.error = std::move(why);
  return result;
}

cli_answer answer(std::string text) {
  if (trim(text).empty())
    return failure("empty answer");
  cli_answer result;
  result.ok = true;
  result.text = std::move(text);
  return result;
}

// -- claude -------------------------------------------------------------------

cli_answer from_claude_result(const Value& msg) {
  auto subtype = string_member(msg, "subtype").value_or("");
  auto is_error_member = member(msg, "is_error");
  bool is_error = is_error_member != nullptr && is_error_member->IsBool()
                  && is_error_member->GetBool();
  auto result = string_member(msg, "result");
  if (is_error || subtype.compare(0, 5, "error") == 0) {
    std::string detail = result ? std::string{trim(*result)} : "";
    if (auto errors = member(msg, "errors");
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
      return failure(detail.empty() ? "claude reported an error" : detail);
    return failure(detail.empty() ? subtype : subtype + ": " + detail);
  }
  if (!result)
    return failure("result message without a \"result\" text");
  return answer(std::move(*result));
}

cli_answer parse_claude(std::string_view out) {
  auto text = trim(out);
  if (text.empty())
    return failure("empty output");
  rapidjson::Document doc;
  auto err = json::parse(text, doc, limits_for(text));
  if (!err && doc.IsObject()) {
    if (auto type = string_member(doc, "type"); type && *type != "result")
      return failure("expected a result message, got type \"" + *type + "\"");
    return from_claude_result(doc);
  }
  if (!err && doc.IsArray()) {
    auto arr = doc.GetArray();
    for (auto i = arr.Size(); i > 0; --i)
      if (has_type(arr[i - 1], "result"))
        return from_claude_result(arr[i - 1]);
    return failure("no result message in the output array");
  }
  // Not one document: stream-json, or stray lines around the object. The
  // last line that is a result message wins.
  std::optional<cli_answer> last;
  for_each_line(text, [&](std::string_view line) {
    rapidjson::Document line_doc;
    if (line.front() == '{' && parse_object(line, line_doc)
        && has_type(line_doc, "result"))
      last = from_claude_result(line_doc);
  });
  if (last)
    return std::move(*last);
  if (err)
    return failure("output is not JSON (" + err->message
                   + "): " + excerpt(text));
  return failure("expected a JSON object: " + excerpt(text));
}

// -- codex --------------------------------------------------------------------

cli_answer parse_codex(std::string_view out) {
  if (trim(out).empty())
    return failure("empty output");
  bool any_event = false;
  std::string last_message;
  // An error event ends the run unless a completed turn follows it.
  std::optional<std::string> pending_error;
  auto on_item = [&](const Value& item) {
    auto type = string_member(item, "type");
    if (!type)
      type = string_member(item, "item_type");
    if (type && (*type == "agent_message" || *type == "assistant_message"))
      if (auto text = string_member(item, "text"))
        last_message = std::move(*text);
  };
  auto on_legacy = [&](const Value& msg) {
    auto type = string_member(msg, "type").value_or("");
    if (type == "agent_message") {
      if (auto text = string_member(msg, "message"))
        last_message = std::move(*text);
    } else if (type == "task_complete") {
      if (auto text = string_member(msg, "last_agent_message");
          text && !trim(*text).empty())
        last_message = std::move(*text);
    } else if (type == "error") {
      pending_error = string_member(msg, "message")
                        .value_or("codex reported an error");
    }
  };
  for_each_line(out, [&](std::string_view line) {
    rapidjson::Document doc;
    if (line.front() != '{' || !parse_object(line, doc))
      return; // a note, or a line cut short
    any_event = true;
    if (auto msg = member(doc, "msg"); msg != nullptr && msg->IsObject()) {
      on_legacy(*msg);
      return;
    }
    auto type = string_member(doc, "type").value_or("");
    if (type == "item.completed") {
      if (auto item = member(doc, "item"))
        on_item(*item);
    } else if (type == "error") {
      pending_error = string_member(doc, "message")
                        .value_or("codex reported an error");
    } else if (type == "turn.failed") {
      std::optional<std::string> why;
      if (auto e = member(doc, "error"))
        why = string_member(*e, "message");
      pending_error = why.value_or("codex turn failed");
    } else if (type == "turn.completed") {
      pending_error.reset();
    }
  });
  if (pending_error)
    return failure(std::move(*pending_error));
  if (!any_event)
    return failure("no JSON events in the output: " + excerpt(out));
  if (last_message.empty())
    return failure("no agent message in the output");
  return answer(std::move(last_message));
}

// -- opencode -----------------------------------------------------------------

std::string opencode_error(const Value& event) {
  if (auto e = member(event, "error")) {
    if (e->IsString())
      return std::string{e->GetString(), e->GetStringLength()};
    if (auto data = member(*e, "data"))
      if (auto msg = string_member(*data, "message"))
        return *msg;
    if (auto msg = string_member(*e, "message"))
      return *msg;
    if (auto name = string_member(*e, "name"))
      return *name;
  }
  return string_member(event, "message")
    .value_or("opencode reported an "
              "error");
}

cli_answer parse_opencode(std::string_view out) {
  auto text = trim(out);
  if (text.empty())
    return failure("empty output");
  // Event output only if the first line is an event; a plain-text answer
  // may well be a JSON object itself.
  auto first_line = trim(text.substr(0, text.find('\n')));
  rapidjson::Document first;
  if (first_line.front() != '{' || !parse_object(first_line, first)
      || !string_member(first, "type"))
    return answer(std::string{text});
  std::string last_text;
  std::optional<std::string> error;
  for_each_line(text, [&](std::string_view line) {
    rapidjson::Document doc;
    if (line.front() != '{' || !parse_object(line, doc))
      return;
    auto type = string_member(doc, "type").value_or("");
    if (type == "text") {
      if (auto part = member(doc, "part"))
        if (auto t = string_member(*part, "text"); t && !trim(*t).empty())
          last_text = std::move(*t);
    } else if (type == "error") {
      error = opencode_error(doc);
    }
  });
  if (error)
    return failure(std::move(*error));
  if (last_text.empty())
    return failure("no text in the event output");
  return answer(std::string{trim(last_text)});
}

} // namespace

std::vector<std::string> default_command(cli_family family) {
  switch (family) {
    case cli_family::claude: return {"claude", "-p", "--output-format", "json"};
    case cli_family::codex: return {"codex", "exec", "--json"};
    case cli_family::opencode: return {"opencode", "run"};
  }
  return {};
}

cli_answer parse_cli_output(cli_family family, std::string_view out) {
  switch (family) {
    case cli_family::claude: return parse_claude(out);
    case cli_family::codex: return parse_codex(out);
    case cli_family::opencode: return parse_opencode(out);
  }
  return failure("unknown CLI family");
}

} // namespace butlers
