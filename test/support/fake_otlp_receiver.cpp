#include "test/support/fake_otlp_receiver.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/loopback_http.hpp"
#include "test/support/loopback_server.hpp"

namespace butlers::test {

namespace {

using rj = rapidjson::Value;

std::string str(const rj& obj, const char* key) {
  if (!obj.IsObject())
    return {};
  auto i = obj.FindMember(key);
  if (i == obj.MemberEnd() || !i->value.IsString())
    return {};
  return {i->value.GetString(), i->value.GetStringLength()};
}

const rj* member(const rj& obj, const char* key) {
  if (!obj.IsObject())
    return nullptr;
  auto i = obj.FindMember(key);
  return i == obj.MemberEnd() ? nullptr : &i->value;
}

otlp_value value_of(const rj& v) {
  if (auto s = member(v, "stringValue"); s && s->IsString())
    return {"string", s->GetString()};
  if (auto s = member(v, "intValue"); s && s->IsString())
    return {"int", s->GetString()};
  if (auto s = member(v, "doubleValue"); s && s->IsNumber())
    return {"double", std::to_string(s->GetDouble())};
  if (auto s = member(v, "boolValue"); s && s->IsBool())
    return {"bool", s->GetBool() ? "true" : "false"};
  return {"other", json::to_string(v)};
}

std::map<std::string, otlp_value> attributes_of(const rj& obj) {
  std::map<std::string, otlp_value> out;
  auto xs = member(obj, "attributes");
  if (xs == nullptr || !xs->IsArray())
    return out;
  for (auto& kv : xs->GetArray()) {
    auto v = member(kv, "value");
    out[str(kv, "key")] = v ? value_of(*v) : otlp_value{"other", ""};
  }
  return out;
}

otlp_span span_of(const rj& s) {
  otlp_span out;
  out.trace_id = str(s, "traceId");
  out.span_id = str(s, "spanId");
  out.parent_span_id = str(s, "parentSpanId");
  out.trace_state = str(s, "traceState");
  out.name = str(s, "name");
  if (auto k = member(s, "kind"); k && k->IsInt())
    out.kind = k->GetInt();
  out.start_ns = str(s, "startTimeUnixNano");
  out.end_ns = str(s, "endTimeUnixNano");
  if (auto f = member(s, "flags"); f && f->IsUint())
    out.flags = f->GetUint();
  out.attributes = attributes_of(s);
  if (auto ls = member(s, "links"); ls && ls->IsArray())
    for (auto& l : ls->GetArray()) {
      out.links.emplace_back(str(l, "traceId"), str(l, "spanId"));
      out.link_trace_states.push_back(str(l, "traceState"));
    }
  if (auto st = member(s, "status")) {
    if (auto c = member(*st, "code"); c && c->IsInt())
      out.status_code = c->GetInt();
    out.status_message = str(*st, "message");
  }
  return out;
}

} // namespace

std::string otlp_span::attr(const std::string& key) const {
  auto i = attributes.find(key);
  return i == attributes.end() ? "<absent>" : i->second.text;
}

std::string parse_otlp_json(const std::string& body,
                            std::vector<otlp_span>& out) {
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = 64 << 20;
  if (auto err = json::parse(body, doc, limits))
    return err->message;
  auto rs = member(doc, "resourceSpans");
  if (rs == nullptr || !rs->IsArray())
    return "no resourceSpans array";
  for (auto& r : rs->GetArray()) {
    std::map<std::string, otlp_value> resource;
    if (auto res = member(r, "resource"))
      resource = attributes_of(*res);
    auto ss = member(r, "scopeSpans");
    if (ss == nullptr || !ss->IsArray())
      return "resourceSpans without a scopeSpans array";
    for (auto& scope : ss->GetArray()) {
      auto spans = member(scope, "spans");
      if (spans == nullptr || !spans->IsArray())
        return "scopeSpans without a spans array";
      for (auto& s : spans->GetArray()) {
        out.push_back(span_of(s));
        out.back().resource = resource;
      }
    }
  }
  return {};
}

fake_otlp_receiver::fake_otlp_receiver() {
  server_ = std::make_unique<loopback_server>([this](loopback_connection& c) {
    serve_http(c,
               [this](
                 const http_request_in& req) -> std::optional<http_reply_out> {
                 otlp_request rec;
                 rec.path = req.path;
                 rec.content_type = req.header("content-type");
                 rec.headers = req.headers;
                 rec.body = req.body;
                 if (rec.content_type.rfind("application/json", 0) == 0)
                   rec.parse_error = parse_otlp_json(rec.body, rec.spans);
                 http_reply_out reply;
                 {
                   std::lock_guard<std::mutex> guard{mtx_};
                   reply.status = req.method == "POST"
                                      && req.path == "/v1/traces"
                                    ? status_
                                    : 404;
                   if (reply.status >= 200 && reply.status < 300)
                     spans_.insert(spans_.end(), rec.spans.begin(),
                                   rec.spans.end());
                   requests_.push_back(std::move(rec));
                 }
                 cv_.notify_all();
                 reply.body = reply.status == 200 ? "{}" : R"({"code":14})";
                 return reply;
               });
  });
}

fake_otlp_receiver::~fake_otlp_receiver() {
  server_->stop();
}

uint16_t fake_otlp_receiver::port() const {
  return server_->port();
}

std::string fake_otlp_receiver::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port());
}

void fake_otlp_receiver::respond_with(int status) {
  std::lock_guard<std::mutex> guard{mtx_};
  status_ = status;
}

std::vector<otlp_request> fake_otlp_receiver::requests() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

std::vector<otlp_span> fake_otlp_receiver::spans() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return spans_;
}

uint16_t fake_otlp_receiver::closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() failed");
  }
  ::close(fd); // never listened: connecting is refused
  return ntohs(addr.sin_port);
}

} // namespace butlers::test
