#include "runtime/ingest.hpp"

#include "runtime/dedupe.hpp"
#include "runtime/json.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

/// Returns the string at `pointer`-like path, or empty when absent or not a
/// string (the schema already vouched for the required ones).
std::string_view get_string(const rapidjson::Value& root,
                            std::initializer_list<const char*> path) {
  const rapidjson::Value* v = &root;
  for (auto key : path) {
    if (!v->IsObject())
      return {};
    auto i = v->FindMember(key);
    if (i == v->MemberEnd())
      return {};
    v = &i->value;
  }
  if (!v->IsString())
    return {};
  return {v->GetString(), v->GetStringLength()};
}

} // namespace

ingest_parse_result parse_ingest(std::string_view body, size_t max_bytes,
                                 uint32_t dedupe_window_s, int64_t now_us) {
  ingest_parse_result result;
  json::scratch_document scratch;
  auto& doc = scratch.doc();
  json::parse_limits limits;
  limits.max_bytes = max_bytes;
  if (auto err = json::parse(body, doc, limits)) {
    result.parse_error = err->message;
    return result;
  }
  result.violations = schema::get("ingest.v1").validate(doc);
  if (!result.violations.empty())
    return result;
  auto text = get_string(doc, {"payload", "normalized_text"});
  if (text.find('\0') != std::string_view::npos) {
    result.violations.push_back(violation{"/payload/normalized_text", "nul",
                                          "normalized_text must not contain "
                                          "U+0000 (it cannot be stored)"});
    return result;
  }
  inbox_record rec;
  auto& ctx = rec.context;
  ctx.request_id = make_uuid_v7().to_string();
  ctx.received_at_us = now_us;
  ctx.source_channel = std::string{get_string(doc, {"source", "channel"})};
  ctx.source_endpoint_identity = std::string{
    get_string(doc, {"source", "endpoint_identity"})};
  ctx.source_sender_identity = std::string{
    get_string(doc, {"sender", "identity"})};
  ctx.source_thread_identity = std::string{
    get_string(doc, {"event", "external_thread_id"})};
  ctx.trace_parent = std::string{
    get_string(doc, {"control", "trace_context", "traceparent"})};
  for (auto* field : {&ctx.source_channel, &ctx.source_endpoint_identity,
                      &ctx.source_sender_identity, &ctx.source_thread_identity,
                      &ctx.trace_parent})
    if (field->find('\0') != std::string::npos) {
      result.violations.push_back(
        violation{"", "nul", "identities must not contain U+0000"});
      return result;
    }
  dedupe_input key;
  key.channel = ctx.source_channel;
  key.endpoint_identity = ctx.source_endpoint_identity;
  key.external_event_id = get_string(doc, {"event", "external_event_id"});
  key.sender_identity = ctx.source_sender_identity;
  key.idempotency_key = get_string(doc, {"control", "idempotency_key"});
  key.normalized_text = text;
  key.received_at_s = now_us / 1000000;
  rec.dedupe_key = dedupe_key(key, dedupe_window_s);
  rec.raw_payload = std::string{body};
  rec.normalized_text = std::string{text};
  auto tier = get_string(doc, {"control", "policy_tier"});
  rec.policy_tier = tier.empty() ? "default" : std::string{tier};
  rec.schema_version = "ingest.v1";
  result.record = std::move(rec);
  return result;
}

} // namespace butlers
