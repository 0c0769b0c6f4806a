// Operations from envelopes and turns: their keys, paths and dedupe
// identities.

#include <cctype>
#include <cstdio>
#include <random>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "runtime/client/butlers_client.hpp"

namespace butlers::client {

namespace {

using rapidjson::Value;

const Value* member(const Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string string_at(const Value& root, const char* obj, const char* name) {
  auto* o = member(root, obj);
  auto* s = o != nullptr ? member(*o, name) : nullptr;
  return s != nullptr && s->IsString() ? s->GetString() : std::string{};
}

std::string random_uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;               // version 4
  lo = (lo & ~(0xC0ULL << 56U)) | (0x80ULL << 56U); // variant 10
  char out[37];
  std::snprintf(out, sizeof out, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32U),
                static_cast<unsigned>((hi >> 16U) & 0xFFFFU),
                static_cast<unsigned>(hi & 0xFFFFU),
                static_cast<unsigned>(lo >> 48U),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return out;
}

std::string path_escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4U];
      out += hex[c & 15U];
    }
  }
  return out;
}

std::string to_json(const Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

} // namespace

std::optional<operation> ingest_operation(std::string_view envelope,
                                          std::string key,
                                          std::string* error) {
  rapidjson::Document doc;
  doc.Parse(envelope.data(), envelope.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    if (error != nullptr)
      *error = "the envelope is not a JSON object";
    return std::nullopt;
  }
  operation op;
  op.kind = op_kind::ingest;
  op.path = "/v1/ingest";
  op.key = std::move(key);
  if (op.key.empty())
    op.key = string_at(doc, "event", "external_thread_id");
  if (op.key.empty())
    op.key = string_at(doc, "sender", "identity");
  if (op.key.empty())
    op.key = "default";
  auto channel = string_at(doc, "source", "channel");
  auto event_id = string_at(doc, "event", "external_event_id");
  auto idem = string_at(doc, "control", "idempotency_key");
  if (!idem.empty()) {
    op.identity = idem;
  } else if ((channel == "telegram" || channel == "email")
             && !event_id.empty()) {
    op.identity = channel + ":" + event_id;
  }
  if (!op.identity.empty()) {
    op.body.assign(envelope.data(), envelope.size());
    return op;
  }
  // No identity of its own: give it one, so a resend is deduplicated.
  op.identity = event_id.empty() ? random_uuid() : "evt:" + event_id;
  auto& alloc = doc.GetAllocator();
  auto* control = member(doc, "control");
  if (control == nullptr || !control->IsObject()) {
    doc.RemoveMember("control");
    doc.AddMember("control", Value{rapidjson::kObjectType}, alloc);
  }
  auto& c = doc["control"];
  c.RemoveMember("idempotency_key");
  c.AddMember("idempotency_key", Value{op.identity.c_str(), alloc}, alloc);
  op.body = to_json(doc);
  return op;
}

operation turn_operation(const turn& t, std::string key) {
  operation op;
  op.kind = op_kind::thread_turn;
  op.key = key.empty() ? t.thread_id : std::move(key);
  op.path = "/v1/threads/" + path_escape(t.thread_id) + "/turns";
  op.identity = t.message_id.empty() ? random_uuid() : t.message_id;
  rapidjson::Document doc{rapidjson::kObjectType};
  auto& alloc = doc.GetAllocator();
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty())
      doc.AddMember(Value{name, alloc}, Value{value.c_str(), alloc}, alloc);
  };
  add("message_id", op.identity);
  doc.AddMember("text", Value{t.text.c_str(), alloc}, alloc);
  add("mode", t.mode);
  add("butler", t.butler);
  add("expected_run_id", t.expected_run_id);
  op.body = to_json(doc);
  return op;
}

} // namespace butlers::client
