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

/// A tool call's arguments as a JSON object's text: "{}" for none.
std::string arguments_text(const model_tool_call& c) {
  return c.arguments.empty() ? std::string{"{}"} : c.arguments;
}

/// OpenAI: system first, an assistant message carries its `tool_calls`
/// (content null when it wrote no text), results become one `tool`
/// message per call.
std::string openai_messages(const std::string& system,
                            const std::vector<chat_message>& messages) {
  std::string out = "[";
  auto next = [&out] {
    if (out.size() > 1)
      out += ',';
  };
  if (!system.empty())
    out += R"({"role":"system","content":)" + json::quote(system) + "}";
  for (auto& m : messages) {
    if (m.role == "tool") {
      for (auto& r : m.tool_results) {
        next();
        out += R"({"role":"tool","tool_call_id":)" + json::quote(r.call_id)
               + R"(,"content":)"
               + json::quote(r.is_error ? "Error: " + r.content : r.content)
               + "}";
      }
      continue;
    }
    next();
    out += R"({"role":)" + json::quote(m.role) + R"(,"content":)";
    if (m.attachments && !m.attachments->empty()) {
      out += openai_content(m.content, *m.attachments) + "}";
      continue;
    }
    if (m.tool_calls.empty()) {
      out += json::quote(m.content) + "}";
      continue;
    }
    out += m.content.empty() ? std::string{"null"} : json::quote(m.content);
    out += R"(,"tool_calls":[)";
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      auto& c = m.tool_calls[i];
      if (i > 0)
        out += ',';
      out += R"({"id":)" + json::quote(c.id)
             + R"(,"type":"function","function":{"name":)" + json::quote(c.name)
             + R"(,"arguments":)" + json::quote(arguments_text(c)) + "}}";
    }
    out += "]}";
  }
  out += ']';
  return out;
}

/// A tool call's arguments as the Messages API's `input` object ({} when
/// they are not one).
std::string anthropic_input(const model_tool_call& c) {
  rapidjson::Document doc;
  if (json::parse(arguments_text(c), doc) || !doc.IsObject())
    return "{}";
  return json::to_string(doc);
}

/// Anthropic: an assistant turn with calls is a list of content blocks
/// (its text, then a `tool_use` per call); the results are a user turn of
/// `tool_result` blocks.
std::string anthropic_messages(const std::vector<chat_message>& messages) {
  std::string out = "[";
  for (auto& m : messages) {
    if (out.size() > 1)
      out += ',';
    if (m.role == "tool") {
      out += R"({"role":"user","content":[)";
      for (size_t i = 0; i < m.tool_results.size(); ++i) {
        auto& r = m.tool_results[i];
        if (i > 0)
          out += ',';
        out += R"({"type":"tool_result","tool_use_id":)"
               + json::quote(r.call_id) + R"(,"content":)"
               + json::quote(r.content) + R"(,"is_error":)"
               + (r.is_error ? "true" : "false") + "}";
      }
      out += "]}";
      continue;
    }
    out += R"({"role":)" + json::quote(m.role) + R"(,"content":)";
    if (m.attachments && !m.attachments->empty()) {
      out += anthropic_content(m.content, *m.attachments) + "}";
      continue;
    }
    if (m.tool_calls.empty()) {
      out += json::quote(m.content) + "}";
      continue;
    }
    out += '[';
    if (!m.content.empty())
      out += R"({"type":"text","text":)" + json::quote(m.content) + "},";
    for (size_t i = 0; i < m.tool_calls.size(); ++i) {
      auto& c = m.tool_calls[i];
      if (i > 0)
        out += ',';
      out += R"({"type":"tool_use","id":)" + json::quote(c.id) + R"(,"name":)"
             + json::quote(c.name) + R"(,"input":)" + anthropic_input(c) + "}";
    }
    out += "]}";
  }
  out += ']';
  return out;
}

/// The `tools` member (with its leading comma), "" without tools.
std::string tools_json(model_api api, const std::vector<model_tool>& tools) {
  if (tools.empty())
    return {};
  std::string out = R"(,"tools":[)";
  for (size_t i = 0; i < tools.size(); ++i) {
    auto& t = tools[i];
    if (i > 0)
      out += ',';
    auto schema = t.input_schema.empty() ? std::string{R"({"type":"object"})"}
                                         : t.input_schema;
    if (api == model_api::openai)
      out += R"({"type":"function","function":{"name":)" + json::quote(t.name)
             + R"(,"description":)" + json::quote(t.description)
             + R"(,"parameters":)" + schema + "}}";
    else
      out += R"({"name":)" + json::quote(t.name) + R"(,"description":)"
             + json::quote(t.description) + R"(,"input_schema":)" + schema
             + "}";
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
    body += R"(,"messages":)" + openai_messages(s.system_prompt, messages);
    body += tools_json(s.api, s.tools);
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
    body += R"(,"messages":)" + anthropic_messages(messages);
    body += tools_json(s.api, s.tools);
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

model_tool_call& model_stream::tool_slot(uint64_t index) {
  for (auto& [i, pos] : tool_slots_)
    if (i == index)
      return state_.tool_calls[pos];
  tool_slots_.emplace_back(index, state_.tool_calls.size());
  return state_.tool_calls.emplace_back();
}

bool model_stream::grow(size_t n) {
  if (answer_bytes_ + n > max_text_bytes_) {
    too_big_ = true;
    return false;
  }
  answer_bytes_ += n;
  return true;
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
        if (!grow(text.size()))
          return;
        st.text += text;
        on_delta(text);
      }
      // Each element names its call by `index`; the first carries the id
      // and the name, the arguments come as pieces of JSON text.
      auto* calls = member(*delta, "tool_calls");
      if (calls != nullptr && calls->IsArray()) {
        for (rapidjson::SizeType k = 0; k < calls->Size(); ++k) {
          auto& tc = (*calls)[k];
          auto& call = tool_slot(count_at(tc, "index", k));
          if (auto id = string_at(tc, "id"); !id.empty())
            call.id = std::move(id);
          if (auto* fn = member(tc, "function")) {
            if (auto name = string_at(*fn, "name");
                !name.empty() && call.name.empty())
              call.name = std::move(name);
            auto args = string_at(*fn, "arguments");
            if (!grow(args.size()))
              return;
            call.arguments += args;
          }
        }
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
  } else if (type == "content_block_start") {
    auto* block = member(doc, "content_block");
    if (block != nullptr && string_at(*block, "type") == "tool_use") {
      auto& call = tool_slot(count_at(doc, "index"));
      call.id = string_at(*block, "id");
      call.name = string_at(*block, "name");
    }
  } else if (type == "content_block_delta") {
    auto* delta = member(doc, "delta");
    if (delta == nullptr)
      return;
    auto dtype = string_at(*delta, "type");
    if (dtype == "input_json_delta") {
      // The input of a tool_use block begun before (other blocks with
      // JSON input, such as server tools, are not ours to run).
      auto index = count_at(doc, "index");
      for (auto& [i, pos] : tool_slots_) {
        if (i != index)
          continue;
        auto part = string_at(*delta, "partial_json");
        if (!grow(part.size()))
          return;
        st.tool_calls[pos].arguments += part;
      }
      return;
    }
    if (dtype != "text_delta")
      return; // thinking: not part of the answer's text
    auto text = string_at(*delta, "text");
    if (!grow(text.size()))
      return;
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
  // ping, content_block_stop: nothing to read.
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
