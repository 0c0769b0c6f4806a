#include "runtime/route.hpp"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "runtime/attachments.hpp"
#include "runtime/json.hpp"
#include "runtime/threads.hpp"

namespace butlers {

namespace {

using json::quote;

std::string member(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject())
    return {};
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

const rapidjson::Value* object_at(const rapidjson::Value& obj,
                                  const char* key) {
  if (!obj.IsObject())
    return nullptr;
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsObject())
    return nullptr;
  return &i->value;
}

std::string join(const std::vector<violation>& xs, std::string_view prefix) {
  std::string out{prefix};
  for (size_t i = 0; i < xs.size(); ++i) {
    out += i == 0 ? "" : "; ";
    out += to_string(xs[i]);
  }
  return out;
}

/// Reads input.context.run_options (a thread turn's model and max_steps)
/// into `out`; a rejection naming what is wrong.
std::optional<route_rejection> read_run_options(const rapidjson::Value& context,
                                                route_envelope& out) {
  auto i = context.FindMember("run_options");
  if (i == context.MemberEnd())
    return std::nullopt;
  auto bad = [](std::string what) {
    return route_rejection{"validation_error",
                           "input.context.run_options" + std::move(what)};
  };
  if (!i->value.IsObject())
    return bad(" must be an object");
  for (auto& m : i->value.GetObject()) {
    std::string_view key{m.name.GetString(), m.name.GetStringLength()};
    if (key == "model") {
      if (!m.value.IsString()
          || !valid_model_name(
            {m.value.GetString(), m.value.GetStringLength()}))
        return bad(".model must be 1..128 of letters, digits and ._:/@+-");
      out.run_model = m.value.GetString();
    } else if (key == "max_steps") {
      if (!m.value.IsUint() || m.value.GetUint() < 1
          || m.value.GetUint() > max_turn_steps)
        return bad(".max_steps must be an integer in 1.."
                   + std::to_string(max_turn_steps));
      out.run_max_steps = m.value.GetUint();
    } else {
      return bad(" has an unknown field '" + std::string{key} + "'");
    }
  }
  return std::nullopt;
}

} // namespace

route_response make_error_response(std::string request_id, std::string cls,
                                   std::string message, bool retryable) {
  route_response r;
  r.status = "error";
  r.request_id = std::move(request_id);
  r.error_class = std::move(cls);
  r.error_message = std::move(message);
  r.retryable = retryable;
  return r;
}

std::string to_json(const route_response& x) {
  std::string out
    = R"({"schema_version":"route_response.v1","request_context":{)";
  bool first = true;
  auto field = [&](const char* key, const std::string& value) {
    if (value.empty())
      return;
    if (!first)
      out += ',';
    first = false;
    out += quote(key);
    out += ':';
    out += quote(value);
  };
  field("request_id", x.request_id);
  field("subrequest_id", x.subrequest_id);
  field("segment_id", x.segment_id);
  out += R"(},"status":)";
  out += quote(x.status);
  if (x.status == "error") {
    out += R"(,"error":{"class":)";
    out += quote(x.error_class);
    out += R"(,"message":)";
    out += quote(x.error_message);
    out += R"(,"retryable":)";
    out += x.retryable ? "true" : "false";
    out += '}';
  } else if (x.status == "accepted") {
    out += R"(,"result":{"work_id":)";
    out += quote(x.work_id);
    out += R"(,"duplicate":)";
    out += x.duplicate ? "true" : "false";
    out += '}';
  } else {
    out += R"(,"result":)";
    out += x.result.empty() ? std::string{"{}"} : x.result;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), R"(,"timing":{"duration_ms":%.3f}})",
                x.duration_ms < 0 ? 0.0 : x.duration_ms);
  out += buf;
  return out;
}

std::optional<route_response> parse_route_response(std::string_view text,
                                                   std::string* error) {
  rapidjson::Document doc;
  if (auto err = json::parse(text, doc)) {
    if (error)
      *error = "route_response.v1 is not JSON: " + err->message;
    return std::nullopt;
  }
  auto violations = schema::get("route_response.v1").validate(doc);
  if (!violations.empty()) {
    if (error)
      *error = join(violations, "route_response.v1 violates its schema: ");
    return std::nullopt;
  }
  route_response r;
  r.status = member(doc, "status");
  auto& ctx = doc["request_context"];
  r.request_id = member(ctx, "request_id");
  r.subrequest_id = member(ctx, "subrequest_id");
  r.segment_id = member(ctx, "segment_id");
  if (auto err = object_at(doc, "error")) {
    r.error_class = member(*err, "class");
    r.error_message = member(*err, "message");
    auto i = err->FindMember("retryable");
    r.retryable = i != err->MemberEnd() && i->value.IsBool()
                  && i->value.GetBool();
  }
  if (auto res = object_at(doc, "result")) {
    r.result = json::to_string(*res);
    if (r.status == "accepted")
      r.work_id = member(*res, "work_id");
  }
  auto& timing = doc["timing"]["duration_ms"];
  r.duration_ms = timing.IsNumber() ? timing.GetDouble() : 0;
  return r;
}

std::optional<route_rejection> parse_route(std::string_view text,
                                           route_envelope& out) {
  rapidjson::Document doc;
  if (auto err = json::parse(text, doc))
    return route_rejection{"validation_error",
                           "route.v1 is not JSON: " + err->message};
  auto violations = schema::get("route.v1").validate(doc);
  if (!violations.empty())
    return route_rejection{"validation_error",
                           join(violations, "route.v1 violates its schema: ")};
  auto& ctx = doc["request_context"];
  out.request_id = member(ctx, "request_id");
  out.received_at = member(ctx, "received_at");
  out.source_channel = member(ctx, "source_channel");
  out.source_endpoint_identity = member(ctx, "source_endpoint_identity");
  out.source_sender_identity = member(ctx, "source_sender_identity");
  out.source_thread_identity = member(ctx, "source_thread_identity");
  if (auto sub = object_at(doc, "subrequest")) {
    out.subrequest_id = member(*sub, "subrequest_id");
    out.segment_id = member(*sub, "segment_id");
    out.fanout_mode = member(*sub, "fanout_mode");
  }
  if (auto tc = object_at(doc, "trace_context")) {
    out.trace_parent = member(*tc, "traceparent");
    out.trace_state = member(*tc, "tracestate");
  }
  out.butler = member(doc["target"], "butler");
  out.tool = member(doc["target"], "tool");
  out.prompt = member(doc["input"], "prompt");
  out.notify_request.clear();
  out.run_model.clear();
  out.run_max_steps = 0;
  out.attachments.clear();
  if (auto context = object_at(doc["input"], "context")) {
    if (auto bad = read_run_options(*context, out))
      return bad;
    if (auto a = context->FindMember("attachments");
        a != context->MemberEnd()) {
      auto xs = parse_attachments(a->value);
      if (!xs.empty())
        out.attachments = attachments_json(xs);
    }
    auto i = context->FindMember("notify_request");
    if (i != context->MemberEnd()) {
      auto nv = schema::get("notify.v1").validate(i->value);
      if (!nv.empty())
        return route_rejection{"validation_error",
                               join(nv, "input.context.notify_request violates "
                                        "notify.v1: ")};
      out.notify_request = json::to_string(i->value);
    }
  }
  return std::nullopt;
}

std::string make_route_json(const route_envelope& x) {
  std::string out = R"({"schema_version":"route.v1","request_context":{)";
  out += R"("request_id":)" + quote(x.request_id);
  out += R"(,"received_at":)" + quote(x.received_at);
  out += R"(,"source_channel":)" + quote(x.source_channel);
  out += R"(,"source_endpoint_identity":)" + quote(x.source_endpoint_identity);
  out += R"(,"source_sender_identity":)" + quote(x.source_sender_identity);
  if (!x.source_thread_identity.empty())
    out += R"(,"source_thread_identity":)" + quote(x.source_thread_identity);
  out += '}';
  if (!x.segment_id.empty()) {
    out += R"(,"subrequest":{"subrequest_id":)" + quote(x.subrequest_id);
    out += R"(,"segment_id":)" + quote(x.segment_id);
    if (!x.fanout_mode.empty())
      out += R"(,"fanout_mode":)" + quote(x.fanout_mode);
    out += '}';
  }
  out += R"(,"target":{"butler":)" + quote(x.butler);
  out += R"(,"tool":)" + quote(x.tool.empty() ? "route.execute" : x.tool);
  out += R"(},"input":{"prompt":)" + quote(x.prompt);
  std::string context;
  if (!x.notify_request.empty())
    context += R"("notify_request":)" + x.notify_request;
  if (!x.run_model.empty() || x.run_max_steps > 0) {
    context += context.empty() ? R"("run_options":{)" : R"(,"run_options":{)";
    if (!x.run_model.empty())
      context += R"("model":)" + quote(x.run_model);
    if (x.run_max_steps > 0)
      context += (x.run_model.empty() ? R"("max_steps":)" : R"(,"max_steps":)")
                 + std::to_string(x.run_max_steps);
    context += '}';
  }
  if (!x.attachments.empty())
    context += std::string{context.empty() ? "" : ","} + R"("attachments":)"
               + x.attachments;
  if (!context.empty())
    out += R"(,"context":{)" + context + '}';
  out += '}';
  if (!x.trace_parent.empty()) {
    out += R"(,"trace_context":{"traceparent":)" + quote(x.trace_parent);
    if (!x.trace_state.empty())
      out += R"(,"tracestate":)" + quote(x.trace_state);
    out += '}';
  }
  out += '}';
  return out;
}

std::string make_notify_json(const route_envelope& route,
                             std::string_view origin_butler,
                             std::string_view message,
                             std::string_view idempotency_key) {
  std::string out = R"({"schema_version":"notify.v1","origin_butler":)";
  out += quote(origin_butler);
  out += R"(,"request_context":{"request_id":)" + quote(route.request_id);
  if (!route.received_at.empty())
    out += R"(,"received_at":)" + quote(route.received_at);
  out += R"(,"source_channel":)" + quote(route.source_channel);
  out += R"(,"source_endpoint_identity":)"
         + quote(route.source_endpoint_identity);
  out += R"(,"source_sender_identity":)" + quote(route.source_sender_identity);
  if (!route.source_thread_identity.empty())
    out += R"(,"source_thread_identity":)"
           + quote(route.source_thread_identity);
  out += R"(},"delivery":{"intent":"reply","channel":)";
  out += quote(route.source_channel);
  out += R"(,"recipient":)" + quote(route.source_sender_identity);
  out += R"(,"message":)" + quote(message.empty() ? "(empty)" : message);
  out += '}';
  if (!idempotency_key.empty())
    out += R"(,"idempotency_key":)" + quote(idempotency_key);
  out += '}';
  return out;
}

namespace {

notify_view read_notify(const rapidjson::Value& doc) {
  notify_view v;
  v.origin_butler = member(doc, "origin_butler");
  v.idempotency_key = member(doc, "idempotency_key");
  if (auto d = object_at(doc, "delivery")) {
    v.intent = member(*d, "intent");
    v.channel = member(*d, "channel");
    v.recipient = member(*d, "recipient");
    v.subject = member(*d, "subject");
    v.message = member(*d, "message");
    if (auto r = object_at(*d, "reaction")) {
      v.reaction_state = member(*r, "state");
      auto at = r->FindMember("at_us");
      if (at != r->MemberEnd() && at->value.IsInt64())
        v.reaction_at_us = at->value.GetInt64();
    }
  }
  if (auto ctx = object_at(doc, "request_context")) {
    v.request_id = member(*ctx, "request_id");
    v.received_at = member(*ctx, "received_at");
    v.source_channel = member(*ctx, "source_channel");
    v.source_endpoint_identity = member(*ctx, "source_endpoint_identity");
    v.source_sender_identity = member(*ctx, "source_sender_identity");
    v.source_thread_identity = member(*ctx, "source_thread_identity");
    if (v.recipient.empty())
      v.recipient = v.source_sender_identity;
  }
  return v;
}

} // namespace

std::optional<notify_view> read_notify(std::string_view text) {
  rapidjson::Document doc;
  if (json::parse(text, doc) || !doc.IsObject())
    return std::nullopt;
  return read_notify(doc);
}

std::optional<route_rejection> make_delivery_route(std::string_view notify,
                                                   std::string_view fresh_id,
                                                   int64_t now_us,
                                                   std::string& out,
                                                   route_envelope* parsed) {
  rapidjson::Document doc;
  if (auto err = json::parse(notify, doc))
    return route_rejection{"validation_error",
                           "notify.v1 is not JSON: " + err->message};
  auto violations = schema::get("notify.v1").validate(doc);
  if (!violations.empty())
    return route_rejection{"validation_error",
                           join(violations, "notify.v1 violates its schema: ")};
  auto v = read_notify(doc);
  route_envelope env;
  if (!v.request_id.empty()) {
    env.request_id = v.request_id;
    env.received_at = v.received_at;
    env.source_channel = v.source_channel;
    env.source_endpoint_identity = v.source_endpoint_identity;
    env.source_sender_identity = v.source_sender_identity;
    env.source_thread_identity = v.source_thread_identity;
  } else {
    env.request_id = std::string{fresh_id};
    env.source_channel = v.channel;
    env.source_endpoint_identity = "switchboard";
    env.source_sender_identity = v.origin_butler;
  }
  // received_at is optional in notify.v1 but required by route.v1.
  if (env.received_at.empty())
    env.received_at = rfc3339_utc(now_us);
  env.subrequest_id = std::string{fresh_id};
  auto key = v.idempotency_key.empty() ? std::string{fresh_id}
                                       : v.idempotency_key;
  // segment_id: at most 64 characters of [A-Za-z0-9_.:-].
  std::string seg = "notify:";
  for (auto c : key) {
    if (seg.size() >= 64)
      break;
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_'
              || c == '.' || c == ':' || c == '-';
    seg += ok ? c : '_';
  }
  env.segment_id = seg;
  env.butler = "messenger";
  env.tool = "route.execute";
  env.prompt = "deliver a notify.v1 from " + v.origin_butler;
  env.notify_request = json::to_string(doc);
  out = make_route_json(env);
  if (parsed)
    *parsed = std::move(env);
  return std::nullopt;
}

std::string rfc3339_utc(int64_t unix_us) {
  auto secs = static_cast<time_t>(unix_us / 1000000);
  auto frac = static_cast<long>(unix_us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, frac);
  return buf;
}

} // namespace butlers
