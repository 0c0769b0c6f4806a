// OTLP ExportTraceServiceRequest encoders (JSON and binary protobuf) for
// runtime/tracing.hpp. Field numbers and the JSON mapping follow
// opentelemetry-proto (trace/v1/trace.proto, common/v1/common.proto,
// docs/specification.md "JSON Protobuf Encoding"); see test/fixtures/otlp.

#include <cstring>
#include <string>
#include <type_traits>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "runtime/tracing.hpp"

namespace butlers {

// -- JSON ---------------------------------------------------------------------

namespace {

using json_writer = rapidjson::Writer<rapidjson::StringBuffer>;

void write_value(json_writer& w, const attribute_value& v) {
  w.StartObject();
  if (auto s = std::get_if<std::string>(&v)) {
    w.Key("stringValue");
    w.String(s->data(), static_cast<rapidjson::SizeType>(s->size()));
  } else if (auto i = std::get_if<int64_t>(&v)) {
    w.Key("intValue"); // int64 as a decimal string (proto3 JSON)
    w.String(std::to_string(*i));
  } else if (auto d = std::get_if<double>(&v)) {
    w.Key("doubleValue");
    w.Double(*d);
  } else {
    w.Key("boolValue");
    w.Bool(std::get<bool>(v));
  }
  w.EndObject();
}

void write_attributes(json_writer& w, const std::vector<attribute>& xs) {
  w.Key("attributes");
  w.StartArray();
  for (auto& x : xs) {
    w.StartObject();
    w.Key("key");
    w.String(x.key);
    w.Key("value");
    write_value(w, x.value);
    w.EndObject();
  }
  w.EndArray();
}

void write_link(json_writer& w, const span_link& l) {
  w.StartObject();
  w.Key("traceId");
  w.String(to_hex(l.context.trace));
  w.Key("spanId");
  w.String(to_hex(l.context.span));
  if (!l.context.tracestate.empty()) {
    w.Key("traceState");
    w.String(l.context.tracestate);
  }
  write_attributes(w, l.attributes);
  w.Key("flags");
  w.Uint(l.context.flags);
  w.EndObject();
}

void write_span(json_writer& w, const span& s) {
  w.StartObject();
  w.Key("traceId");
  w.String(to_hex(s.trace));
  w.Key("spanId");
  w.String(to_hex(s.id));
  if (!is_zero(s.parent)) {
    w.Key("parentSpanId");
    w.String(to_hex(s.parent));
  }
  if (!s.tracestate.empty()) {
    w.Key("traceState");
    w.String(s.tracestate);
  }
  w.Key("flags");
  w.Uint(s.flags);
  w.Key("name");
  w.String(s.name);
  w.Key("kind");
  w.Int(static_cast<int>(s.kind));
  w.Key("startTimeUnixNano"); // fixed64 as a decimal string
  w.String(std::to_string(s.start_ns));
  w.Key("endTimeUnixNano");
  w.String(std::to_string(s.end_ns));
  write_attributes(w, s.attributes);
  if (!s.links.empty()) {
    w.Key("links");
    w.StartArray();
    for (auto& l : s.links)
      write_link(w, l);
    w.EndArray();
  }
  w.Key("status");
  w.StartObject();
  if (!s.status_message.empty()) {
    w.Key("message");
    w.String(s.status_message);
  }
  w.Key("code");
  w.Int(static_cast<int>(s.status));
  w.EndObject();
  w.EndObject();
}

std::vector<attribute> resource_attributes(const otlp_resource& res) {
  std::vector<attribute> out;
  out.push_back({"service.name", res.service_name});
  if (!res.service_instance_id.empty())
    out.push_back({"service.instance.id", res.service_instance_id});
  return out;
}

} // namespace

std::string encode_otlp_json(const otlp_resource& res,
                             const std::vector<span>& spans) {
  rapidjson::StringBuffer buf;
  json_writer w{buf};
  w.StartObject();
  w.Key("resourceSpans");
  w.StartArray();
  w.StartObject();
  w.Key("resource");
  w.StartObject();
  write_attributes(w, resource_attributes(res));
  w.EndObject();
  w.Key("scopeSpans");
  w.StartArray();
  w.StartObject();
  w.Key("scope");
  w.StartObject();
  w.Key("name");
  w.String(res.scope_name);
  if (!res.scope_version.empty()) {
    w.Key("version");
    w.String(res.scope_version);
  }
  w.EndObject();
  w.Key("spans");
  w.StartArray();
  for (auto& s : spans)
    write_span(w, s);
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

// -- protobuf -----------------------------------------------------------------

namespace {

enum wire_type : uint32_t { varint = 0, fixed64 = 1, len = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_tag(std::string& out, uint32_t field, wire_type t) {
  put_varint(out, (uint64_t{field} << 3) | t);
}

void put_bytes(std::string& out, uint32_t field, const void* data,
               size_t size) {
  put_tag(out, field, len);
  put_varint(out, size);
  out.append(static_cast<const char*>(data), size);
}

void put_string(std::string& out, uint32_t field, const std::string& s) {
  put_bytes(out, field, s.data(), s.size());
}

void put_message(std::string& out, uint32_t field, const std::string& msg) {
  put_bytes(out, field, msg.data(), msg.size());
}

template<class T>
void put_fixed(std::string& out, uint32_t field, T v) {
  static_assert(std::is_unsigned_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
  put_tag(out, field, sizeof(T) == 8 ? fixed64 : fixed32);
  for (size_t i = 0; i < sizeof(T); ++i) // little endian
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

/// common.v1.AnyValue: string 1, bool 2, int 3, double 4.
std::string any_value(const attribute_value& v) {
  std::string out;
  if (auto s = std::get_if<std::string>(&v)) {
    put_string(out, 1, *s);
  } else if (auto b = std::get_if<bool>(&v)) {
    put_tag(out, 2, varint);
    put_varint(out, *b ? 1 : 0);
  } else if (auto i = std::get_if<int64_t>(&v)) {
    put_tag(out, 3, varint);
    put_varint(out, static_cast<uint64_t>(*i));
  } else {
    double d = std::get<double>(v);
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    put_fixed(out, 4, bits);
  }
  return out;
}

/// common.v1.KeyValue: key 1, value 2.
void put_attributes(std::string& out, uint32_t field,
                    const std::vector<attribute>& xs) {
  for (auto& x : xs) {
    std::string kv;
    put_string(kv, 1, x.key);
    put_message(kv, 2, any_value(x.value));
    put_message(out, field, kv);
  }
}

/// Span.Link: trace_id 1, span_id 2, trace_state 3, attributes 4, flags 6.
std::string link_message(const span_link& l) {
  std::string out;
  put_bytes(out, 1, l.context.trace.data(), l.context.trace.size());
  put_bytes(out, 2, l.context.span.data(), l.context.span.size());
  if (!l.context.tracestate.empty())
    put_string(out, 3, l.context.tracestate);
  put_attributes(out, 4, l.attributes);
  put_fixed(out, 6, uint32_t{l.context.flags});
  return out;
}

/// trace.v1.Span; see trace.proto for the field numbers.
std::string span_message(const span& s) {
  std::string out;
  put_bytes(out, 1, s.trace.data(), s.trace.size());
  put_bytes(out, 2, s.id.data(), s.id.size());
  if (!s.tracestate.empty())
    put_string(out, 3, s.tracestate);
  if (!is_zero(s.parent))
    put_bytes(out, 4, s.parent.data(), s.parent.size());
  put_string(out, 5, s.name);
  put_tag(out, 6, varint);
  put_varint(out, static_cast<uint64_t>(s.kind));
  put_fixed(out, 7, uint64_t{s.start_ns});
  put_fixed(out, 8, uint64_t{s.end_ns});
  put_attributes(out, 9, s.attributes);
  for (auto& l : s.links)
    put_message(out, 13, link_message(l));
  std::string status; // Status: message 2, code 3
  if (!s.status_message.empty())
    put_string(status, 2, s.status_message);
  if (s.status != span_status::unset) {
    put_tag(status, 3, varint);
    put_varint(status, static_cast<uint64_t>(s.status));
  }
  put_message(out, 15, status);
  put_fixed(out, 16, uint32_t{s.flags});
  return out;
}

} // namespace

std::string encode_otlp_protobuf(const otlp_resource& res,
                                 const std::vector<span>& spans) {
  std::string resource; // resource.v1.Resource: attributes 1
  put_attributes(resource, 1, resource_attributes(res));
  std::string scope; // InstrumentationScope: name 1, version 2
  put_string(scope, 1, res.scope_name);
  if (!res.scope_version.empty())
    put_string(scope, 2, res.scope_version);
  std::string scope_spans; // ScopeSpans: scope 1, spans 2
  put_message(scope_spans, 1, scope);
  for (auto& s : spans)
    put_message(scope_spans, 2, span_message(s));
  std::string resource_spans; // ResourceSpans: resource 1, scope_spans 2
  put_message(resource_spans, 1, resource);
  put_message(resource_spans, 2, scope_spans);
  std::string out; // ExportTraceServiceRequest: resource_spans 1
  put_message(out, 1, resource_spans);
  return out;
}

} // namespace butlers
