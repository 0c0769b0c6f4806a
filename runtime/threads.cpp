#include "runtime/threads.hpp"

#include <cctype>
#include <chrono>

#include "runtime/json.hpp"

namespace butlers {

bool valid_thread_id(std::string_view x) {
  if (x.empty() || x.size() > 128)
    return false;
  for (char c : x) {
    auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '.' && c != '_' && c != ':' && c != '-')
      return false;
  }
  return true;
}

bool valid_model_name(std::string_view x) {
  if (x.empty() || x.size() > 128)
    return false;
  for (char c : x) {
    auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u)
        && std::string_view{"._:/@+-"}.find(c) == std::string_view::npos)
      return false;
  }
  return true;
}

namespace {

/// Reads `options` (`{max_steps?, mode?}`) into `out`; `mode` is where its
/// mode goes. "" when valid, else the message.
std::string parse_turn_options(const rapidjson::Value& v, thread_turn& out,
                               std::string& mode) {
  if (!v.IsObject())
    return "field 'options' must be an object";
  for (auto& m : v.GetObject()) {
    std::string key{m.name.GetString(), m.name.GetStringLength()};
    if (key == "max_steps") {
      if (!m.value.IsUint() || m.value.GetUint() < 1
          || m.value.GetUint() > max_turn_steps)
        return "field 'options.max_steps' must be an integer in 1.."
               + std::to_string(max_turn_steps);
      out.max_steps = m.value.GetUint();
    } else if (key == "mode") {
      if (!m.value.IsString())
        return "field 'options.mode' must be a string";
      mode.assign(m.value.GetString(), m.value.GetStringLength());
    } else {
      return "unknown field 'options." + key + "'";
    }
  }
  return {};
}

} // namespace

std::string parse_turn_body(std::string_view body, thread_turn& out) {
  rapidjson::Document doc;
  // The HTTP server bounded the body (http.max_body_bytes).
  json::parse_limits limits;
  limits.max_bytes = body.size();
  if (auto err = json::parse(body, doc, limits))
    return "body is not valid JSON: " + err->message;
  if (!doc.IsObject())
    return "body must be a JSON object";
  bool has_mode = false;
  std::string options_mode;
  for (auto& m : doc.GetObject()) {
    std::string key{m.name.GetString(), m.name.GetStringLength()};
    // Files: read by parse_turn_attachments (runtime/attachments.hpp).
    if (key == "attachments")
      continue;
    std::string* target = nullptr;
    if (key == "options") {
      if (auto bad = parse_turn_options(m.value, out, options_mode);
          !bad.empty())
        return bad;
      continue;
    }
    if (key == "message_id")
      target = &out.message_id;
    else if (key == "text")
      target = &out.text;
    else if (key == "mode")
      target = &out.mode;
    else if (key == "expected_run_id")
      target = &out.expected_run_id;
    else if (key == "butler")
      target = &out.butler;
    else if (key == "sender")
      target = &out.sender;
    else if (key == "model")
      target = &out.model;
    else
      return "unknown field '" + key + "'";
    if (!m.value.IsString())
      return "field '" + key + "' must be a string";
    has_mode = has_mode || key == "mode";
    target->assign(m.value.GetString(), m.value.GetStringLength());
  }
  if (out.message_id.empty() || out.message_id.size() > 128)
    return "field 'message_id' is required (1..128 characters)";
  if (out.text.empty())
    return "field 'text' is required and must not be empty";
  if (!options_mode.empty()) {
    if (has_mode && out.mode != options_mode)
      return "field 'options.mode' disagrees with field 'mode'";
    out.mode = options_mode;
  }
  if (out.mode.empty())
    out.mode = "steer";
  if (out.mode != "steer" && out.mode != "queue" && out.mode != "interrupt"
      && out.mode != "reject")
    return "field 'mode' must be one of steer, queue, interrupt, reject";
  if (out.expected_run_id.size() > 64)
    return "field 'expected_run_id' is too long";
  if (out.butler.size() > 64)
    return "field 'butler' is too long";
  if (out.sender.size() > 128)
    return "field 'sender' is too long (at most 128 bytes)";
  if (!out.model.empty() && !valid_model_name(out.model))
    return "field 'model' must be 1..128 of letters, digits and ._:/@+-";
  return {};
}

std::string sse_frame(std::string_view type, std::string_view json,
                      std::string_view id) {
  std::string out;
  out.reserve(type.size() + json.size() + id.size() + 24);
  if (!id.empty()) {
    out += "id: ";
    out += id;
    out += '\n';
  }
  out += "event: ";
  out += type;
  out += "\ndata: ";
  // Our JSON is compact (no newlines), so one data line carries it.
  out += json;
  out += "\n\n";
  return out;
}

int64_t unix_now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

} // namespace butlers
