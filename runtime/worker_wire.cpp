#include "runtime/worker_wire.hpp"

#include <rapidjson/document.h>

#include "runtime/error.hpp"
#include "runtime/json.hpp"
#include "runtime/route.hpp"

namespace butlers {

namespace {

/// An integer field in lo..hi: "" when valid, else a message naming it.
std::string read_uint(const rapidjson::Value& v, const char* name, uint32_t lo,
                      uint32_t hi, uint32_t& out) {
  if (!v.IsUint64() || v.GetUint64() < lo || v.GetUint64() > hi)
    return std::string{"field '"} + name + "' must be an integer in "
           + std::to_string(lo) + ".." + std::to_string(hi);
  out = static_cast<uint32_t>(v.GetUint64());
  return {};
}

std::string read_text(const rapidjson::Value& v, const char* name,
                      size_t max_len, std::string& out) {
  if (!v.IsString() || v.GetStringLength() > max_len)
    return std::string{"field '"} + name + "' must be a string of at most "
           + std::to_string(max_len) + " bytes";
  out.assign(v.GetString(), v.GetStringLength());
  return {};
}

std::string read_recv(const std::string& key, const rapidjson::Value& v,
                      worker_call& out) {
  if (key == "max")
    return read_uint(v, "max", 1, 100, out.max);
  if (key == "visibility_ms")
    return read_uint(v, "visibility_ms", 250, 43200000, out.visibility_ms);
  if (key == "wait_ms")
    return read_uint(v, "wait_ms", 0, max_worker_wait_ms, out.wait_ms);
  return "unknown field '" + key + "'";
}

std::string read_ack(const std::string& key, const rapidjson::Value& v,
                     worker_call& out) {
  if (key == "reply")
    return read_text(v, "reply", 1 << 20, out.reply);
  if (key != "response")
    return "unknown field '" + key + "'";
  if (!v.IsObject())
    return "field 'response' must be a route_response.v1 object";
  out.response = json::to_string(v);
  std::string error;
  auto r = parse_route_response(out.response, &error);
  if (!r)
    return "field 'response': " + error;
  if (r->status != "ok" && r->status != "error")
    return "field 'response': status must be ok or error, got '" + r->status
           + "'";
  return {};
}

std::string read_nack(const std::string& key, const rapidjson::Value& v,
                      worker_call& out) {
  if (key == "retryable") {
    if (!v.IsBool())
      return "field 'retryable' must be true or false";
    out.retryable = v.GetBool();
    return {};
  }
  if (key == "delay_ms")
    return read_uint(v, "delay_ms", 0, 3600000, out.delay_ms);
  if (key == "error")
    return read_text(v, "error", 65536, out.error);
  if (key == "error_class") {
    if (auto bad = read_text(v, "error_class", 64, out.error_class);
        !bad.empty())
      return bad;
    auto cls = normalize_error_class(out.error_class);
    if (to_string(cls) != out.error_class)
      return "field 'error_class' must be a class of the error taxonomy "
             "(classification_error, validation_error, routing_error, "
             "target_unavailable, timeout, overload_rejected, "
             "internal_error), got '"
             + out.error_class + "'";
    return {};
  }
  return "unknown field '" + key + "'";
}

std::string read_field(worker_op op, const std::string& key,
                       const rapidjson::Value& v, worker_call& out) {
  if (op != worker_op::recv && key == "lease_token")
    return read_text(v, "lease_token", 128, out.lease_token);
  switch (op) {
    case worker_op::recv: return read_recv(key, v, out);
    case worker_op::ack: return read_ack(key, v, out);
    case worker_op::nack: return read_nack(key, v, out);
    case worker_op::extend:
      if (key == "visibility_ms")
        return read_uint(v, "visibility_ms", 250, 43200000, out.visibility_ms);
      break;
  }
  return "unknown field '" + key + "'";
}

} // namespace

bool parse_worker_verb(std::string_view verb, worker_op& out) {
  if (verb == "ack")
    out = worker_op::ack;
  else if (verb == "nack")
    out = worker_op::nack;
  else if (verb == "extend")
    out = worker_op::extend;
  else
    return false;
  return true;
}

std::string parse_worker_body(worker_op op, std::string_view body,
                              worker_call& out) {
  out.op = static_cast<uint8_t>(op);
  rapidjson::Document doc;
  if (op == worker_op::recv && body.empty())
    return {};
  if (auto err = json::parse(body, doc))
    return "body is not valid JSON: " + err->message;
  if (!doc.IsObject())
    return "body must be a JSON object";
  for (auto& m : doc.GetObject()) {
    std::string key{m.name.GetString(), m.name.GetStringLength()};
    if (auto bad = read_field(op, key, m.value, out); !bad.empty())
      return bad;
  }
  if (op == worker_op::recv)
    return {};
  if (out.lease_token.empty())
    return "field 'lease_token' is required";
  if (op == worker_op::ack && out.response.empty() == out.reply.empty())
    return "exactly one of the fields 'response' (a route_response.v1 "
           "object) and 'reply' (text) is required";
  if (op == worker_op::nack && out.error_class.empty())
    out.error_class = "internal_error";
  return {};
}

std::string render_deliveries(const std::vector<worker_delivery>& xs) {
  std::string out = R"({"items":[)";
  bool first = true;
  for (auto& x : xs) {
    out += first ? "{" : ",{";
    first = false;
    out += R"("work_id":)" + json::quote(x.work_id);
    out += R"(,"lease_token":)" + json::quote(x.lease_token);
    out += R"(,"envelope":)" + (x.envelope.empty() ? "{}" : x.envelope);
    out += R"(,"attempt":)" + std::to_string(x.attempt);
    out += R"(,"visible_until_ms":)" + std::to_string(x.visible_until_ms);
    if (!x.mcp_token.empty())
      out += R"(,"tools":{"url":)" + json::quote(x.mcp_url) + R"(,"token":)"
             + json::quote(x.mcp_token) + "}";
    out += R"(,"steer_inputs":[)";
    bool first_in = true;
    for (auto& in : x.steer_inputs) {
      out += first_in ? "{" : ",{";
      first_in = false;
      out += R"("message_id":)" + json::quote(in.message_id);
      out += R"(,"text":)" + json::quote(in.text);
      out += R"(,"accepted_us":)" + std::to_string(in.accepted_us) + "}";
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

} // namespace butlers
