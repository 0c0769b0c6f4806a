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

std::string parse_turn_body(std::string_view body, thread_turn& out) {
  rapidjson::Document doc;
  // The HTTP server bounded the body (http.max_body_bytes).
  json::parse_limits limits;
  limits.max_bytes = body.size();
  if (auto err = json::parse(body, doc, limits))
    return "body is not valid JSON: " + err->message;
  if (!doc.IsObject())
    return "body must be a JSON object";
  for (auto& m : doc.GetObject()) {
    std::string key{m.name.GetString(), m.name.GetStringLength()};
    // Files: read by parse_turn_attachments (runtime/attachments.hpp).
    if (key == "attachments")
      continue;
    std::string* target = nullptr;
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
    else
      return "unknown field '" + key + "'";
    if (!m.value.IsString())
      return "field '" + key + "' must be a string";
    target->assign(m.value.GetString(), m.value.GetStringLength());
  }
  if (out.message_id.empty() || out.message_id.size() > 128)
    return "field 'message_id' is required (1..128 characters)";
  if (out.text.empty())
    return "field 'text' is required and must not be empty";
  if (out.mode.empty())
    out.mode = "steer";
  if (out.mode != "steer" && out.mode != "queue" && out.mode != "interrupt"
      && out.mode != "reject")
    return "field 'mode' must be one of steer, queue, interrupt, reject";
  if (out.expected_run_id.size() > 64)
    return "field 'expected_run_id' is too long";
  if (out.butler.size() > 64)
    return "field 'butler' is too long";
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
