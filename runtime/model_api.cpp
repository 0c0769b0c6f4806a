#include "runtime/model_api.hpp"

#include <cstdio>

#include "runtime/json.hpp"

namespace butlers {

namespace {

using rapidjson::Value;

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

std::string messages_json(const std::string& system,
                          const std::vector<chat_message>& messages) {
  std::string out = "[";
  if (!system.empty())
    out += R"({"role":"system","content":)" + json::quote(system) + "}";
  for (auto& m : messages) {
    if (out.size() > 1)
      out += ',';
    out += R"({"role":)" + json::quote(m.role) + R"(,"content":)"
           + json::quote(m.content) + "}";
  }
  out += ']';
  return out;
}

const Value* member(const Value& v, const char* name) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(name);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

std::string string_at(const Value& v, const char* name) {
  auto* m = member(v, name);
  return m != nullptr && m->IsString() ? std::string{m->GetString()}
                                       : std::string{};
}

/// A non-negative integer member, or `fallback`.
uint64_t count_at(const Value& v, const char* name, uint64_t fallback = 0) {
  auto* m = member(v, name);
  return m != nullptr && m->IsUint64() ? m->GetUint64() : fallback;
}

/// `{"error": {...}}`, `{"error": "text"}` or a top-level error object.
void read_error(const Value& doc, model_stream_state& st) {
  st.error = true;
  auto* e = member(doc, "error");
  if (e != nullptr && e->IsString()) {
    st.error_message = e->GetString();
    st.error_type = string_at(doc, "error_type");
    return;
  }
  const Value& obj = e != nullptr && e->IsObject() ? *e : doc;
  st.error_message = string_at(obj, "message");
  st.error_type = string_at(obj, "type");
  if (st.error_type.empty())
    st.error_type = string_at(obj, "code");
}

} // namespace

const char* model_api_path(model_api api) {
  return api == model_api::openai ? "/v1/chat/completions" : "/v1/messages";
}

model_request build_model_request(const model_call_settings& s,
                                  const std::vector<chat_message>& messages) {
  model_request r;
  auto base = s.base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  r.url = base + model_api_path(s.api);
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Accept", "text/event-stream");
  std::string body = R"({"model":)" + json::quote(s.model);
  if (s.api == model_api::openai) {
    if (!s.api_key.empty())
      r.headers.emplace_back("Authorization", "Bearer " + s.api_key);
    body += R"(,"messages":)" + messages_json(s.system_prompt, messages);
    body += R"(,"stream":true,"stream_options":{"include_usage":true})";
    if (s.max_tokens > 0)
      body += R"(,"max_tokens":)" + std::to_string(s.max_tokens);
  } else {
    if (!s.api_key.empty())
      r.headers.emplace_back("x-api-key", s.api_key);
    r.headers.emplace_back("anthropic-version", anthropic_version);
    auto max = s.max_tokens > 0 ? s.max_tokens : default_anthropic_max_tokens;
    body += R"(,"max_tokens":)" + std::to_string(max);
    if (!s.system_prompt.empty())
      body += R"(,"system":)" + json::quote(s.system_prompt);
    body += R"(,"messages":)" + messages_json({}, messages);
    body += R"(,"stream":true)";
  }
  if (s.temperature >= 0)
    body += R"(,"temperature":)" + number_text(s.temperature);
  body += '}';
  r.body = std::move(body);
  return r;
}

model_stream::model_stream(model_api api, size_t max_text_bytes)
  : api_(api), max_text_bytes_(max_text_bytes), sse_(max_text_bytes) {
  // nop
}

bool model_stream::feed(std::string_view chunk, const delta_fn& on_delta) {
  if (too_big_)
    return false;
  bool ok = sse_.feed(chunk, [&](sse_event& ev) {
    on_event(ev, on_delta);
  });
  return ok && !too_big_;
}

bool model_stream::complete() const {
  return state_.done || !state_.stop_reason.empty();
}

void model_stream::on_event(const sse_event& ev, const delta_fn& on_delta) {
  if (too_big_)
    return;
  if (api_ == model_api::openai)
    on_openai(ev, on_delta);
  else
    on_anthropic(ev, on_delta);
}

void model_stream::on_openai(const sse_event& ev, const delta_fn& on_delta) {
  auto& st = state_;
  if (ev.data == "[DONE]") {
    st.done = true;
    return;
  }
  rapidjson::Document doc;
  if (json::parse(ev.data, doc) || !doc.IsObject()) {
    ++st.malformed;
    return;
  }
  if (ev.type == "error" || member(doc, "error") != nullptr
      || string_at(doc, "object") == "error") {
    read_error(doc, st);
    return;
  }
  if (auto m = string_at(doc, "model"); !m.empty())
    st.model = std::move(m);
  auto* choices = member(doc, "choices");
  if (choices != nullptr && choices->IsArray() && !choices->Empty()) {
    auto& choice = (*choices)[0];
    if (auto* delta = member(choice, "delta")) {
      auto text = string_at(*delta, "content");
      if (!text.empty()) {
        if (st.text.size() + text.size() > max_text_bytes_) {
          too_big_ = true;
          return;
        }
        st.text += text;
        on_delta(text);
      }
    }
    if (auto reason = string_at(choice, "finish_reason"); !reason.empty())
      st.stop_reason = std::move(reason);
  }
  auto* usage = member(doc, "usage");
  if (usage != nullptr && usage->IsObject()) {
    st.usage_seen = true;
    uint64_t cached = 0;
    if (auto* details = member(*usage, "prompt_tokens_details"))
      cached = count_at(*details, "cached_tokens");
    auto prompt = count_at(*usage, "prompt_tokens");
    st.cache_read_tokens = cached;
    st.input_tokens = prompt >= cached ? prompt - cached : 0;
    st.output_tokens = count_at(*usage, "completion_tokens");
  }
}

void model_stream::on_anthropic(const sse_event& ev, const delta_fn& on_delta) {
  auto& st = state_;
  rapidjson::Document doc;
  if (json::parse(ev.data, doc) || !doc.IsObject()) {
    ++st.malformed;
    return;
  }
  auto type = string_at(doc, "type");
  if (type.empty())
    type = ev.type;
  auto read_usage = [&st](const Value& u) {
    st.usage_seen = true;
    st.input_tokens = count_at(u, "input_tokens", st.input_tokens);
    st.output_tokens = count_at(u, "output_tokens", st.output_tokens);
    st.cache_read_tokens = count_at(u, "cache_read_input_tokens",
                                    st.cache_read_tokens);
    st.cache_write_tokens = count_at(u, "cache_creation_input_tokens",
                                     st.cache_write_tokens);
  };
  if (type == "message_start") {
    if (auto* msg = member(doc, "message")) {
      if (auto m = string_at(*msg, "model"); !m.empty())
        st.model = std::move(m);
      if (auto* u = member(*msg, "usage"); u != nullptr && u->IsObject())
        read_usage(*u);
    }
  } else if (type == "content_block_delta") {
    auto* delta = member(doc, "delta");
    if (delta == nullptr || string_at(*delta, "type") != "text_delta")
      return; // tool input, thinking: not part of the answer's text
    auto text = string_at(*delta, "text");
    if (st.text.size() + text.size() > max_text_bytes_) {
      too_big_ = true;
      return;
    }
    st.text += text;
    if (!text.empty())
      on_delta(text);
  } else if (type == "message_delta") {
    if (auto* delta = member(doc, "delta"))
      if (auto r = string_at(*delta, "stop_reason"); !r.empty())
        st.stop_reason = std::move(r);
    if (auto* u = member(doc, "usage"); u != nullptr && u->IsObject())
      read_usage(*u);
  } else if (type == "message_stop") {
    st.done = true;
  } else if (type == "error") {
    read_error(doc, st);
  }
  // ping, content_block_start, content_block_stop: nothing to read.
}

std::string model_error_text(std::string_view body) {
  rapidjson::Document doc;
  if (!json::parse(body, doc) && doc.IsObject()) {
    model_stream_state st;
    read_error(doc, st);
    if (!st.error_message.empty())
      return st.error_type.empty() ? st.error_message
                                   : st.error_type + ": " + st.error_message;
  }
  std::string out;
  for (char c : body.substr(0, 200))
    out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  return out;
}

} // namespace butlers
