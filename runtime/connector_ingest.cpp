#include "runtime/connector_ingest.hpp"

namespace butlers {

ingest_parse_result parse_connector_envelope(std::string_view body,
                                             const connector_ingest_rules& r,
                                             std::string_view dedupe_hint,
                                             int64_t now_us) {
  auto out = parse_ingest(body, r.max_bytes, r.dedupe_window_s, now_us);
  if (!out.record)
    return out;
  auto& rec = *out.record;
  if (!r.endpoint_identity.empty()
      && rec.context.source_endpoint_identity != r.endpoint_identity) {
    out.violations.push_back(
      violation{"/source/endpoint_identity", "const",
                "must be this connector's endpoint_identity '"
                  + r.endpoint_identity + "'"});
    out.record.reset();
    return out;
  }
  if (!dedupe_hint.empty() && rec.dedupe_key.rfind("hash:", 0) == 0)
    rec.dedupe_key = connector_dedupe_key(r.connector, dedupe_hint);
  return out;
}

std::string connector_dedupe_key(std::string_view connector,
                                 std::string_view hint) {
  std::string key = "src:";
  key += std::to_string(connector.size());
  key += ':';
  key += connector;
  key += ':';
  key += hint;
  return key;
}

std::string describe_rejection(const ingest_parse_result& r) {
  if (!r.parse_error.empty())
    return "not JSON: " + r.parse_error;
  std::string out;
  for (auto& v : r.violations) {
    if (!out.empty())
      out += "; ";
    out += to_string(v);
  }
  return out.empty() ? "not a valid ingest.v1 envelope" : out;
}

} // namespace butlers
