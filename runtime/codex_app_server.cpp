#include "runtime/codex_app_server.hpp"

#include <algorithm>
#include <utility>

#include "runtime/json.hpp"
#include "runtime/text.hpp"

namespace butlers {

namespace {

using rapidjson::Value;

const Value* member(const Value& v, const char* key) {
  if (!v.IsObject())
    return nullptr;
  auto i = v.FindMember(key);
  return i == v.MemberEnd() ? nullptr : &i->value;
}

std::string string_at(const Value& v, const char* key) {
  auto* m = member(v, key);
  return m != nullptr && m->IsString()
           ? std::string{m->GetString(), m->GetStringLength()}
           : std::string{};
}

uint64_t count_at(const Value& v, const char* key) {
  auto* m = member(v, key);
  if (m == nullptr)
    return 0;
  if (m->IsUint64())
    return m->GetUint64();
  if (m->IsDouble() && m->GetDouble() > 0)
    return static_cast<uint64_t>(m->GetDouble());
  return 0;
}

/// `{"type":"text","text":...}` per text.
std::string text_items(const std::vector<std::string>& texts) {
  std::string out = "[";
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0)
      out += ',';
    out += R"({"type":"text","text":)" + json::quote(texts[i]) + "}";
  }
  return out + "]";
}

std::string request(int64_t id, std::string_view method,
                    const std::string& params) {
  return R"({"method":)" + json::quote(method) + R"(,"id":)"
         + std::to_string(id) + R"(,"params":)" + params + "}";
}

codex_token_usage breakdown(const Value& v) {
  codex_token_usage u;
  u.total = count_at(v, "totalTokens");
  u.input = count_at(v, "inputTokens");
  u.cached_input = count_at(v, "cachedInputTokens");
  u.output = count_at(v, "outputTokens");
  u.reasoning_output = count_at(v, "reasoningOutputTokens");
  return u;
}

/// What an approval request asks for: `command` (a string, or the older
/// argv array) in `cwd`, else the files of `fileChanges`, else `reason`.
std::string approval_text(const Value& params) {
  std::string out;
  if (auto* cmd = member(params, "command"); cmd != nullptr) {
    if (cmd->IsString())
      out = cmd->GetString();
    else if (cmd->IsArray())
      for (auto& a : cmd->GetArray())
        if (a.IsString())
          out += (out.empty() ? "" : " ") + std::string{a.GetString()};
  }
  if (auto* files = member(params, "fileChanges");
      out.empty() && files != nullptr && files->IsObject())
    for (auto& f : files->GetObject())
      out += (out.empty() ? "" : ", ") + std::string{f.name.GetString()};
  if (out.empty())
    out = string_at(params, "reason");
  auto cwd = string_at(params, "cwd");
  if (!out.empty() && !cwd.empty())
    out += " (in " + cwd + ")";
  return out.empty() ? std::string{"(no details)"} : out;
}

/// Fills the notification or request fields from `params`.
void read_params(const Value& params, codex_message& m) {
  m.thread_id = string_at(params, "threadId");
  m.turn_id = string_at(params, "turnId");
  m.item_id = string_at(params, "itemId");
  if (auto* turn = member(params, "turn"); turn != nullptr) {
    m.turn_id = string_at(*turn, "id");
    m.status = string_at(*turn, "status");
    if (auto* err = member(*turn, "error"); err != nullptr)
      m.error = string_at(*err, "message");
  }
  if (auto* item = member(params, "item"); item != nullptr) {
    m.item_id = string_at(*item, "id");
    m.item_type = string_at(*item, "type");
    m.text = string_at(*item, "text");
  }
  if (m.method == "item/agentMessage/delta")
    m.text = string_at(params, "delta");
  if (m.method == "error") {
    if (auto* err = member(params, "error"); err != nullptr)
      m.error = err->IsString() ? std::string{err->GetString()}
                                : string_at(*err, "message");
    auto* retry = member(params, "willRetry");
    m.will_retry = retry != nullptr && retry->IsBool() && retry->GetBool();
  }
  if (auto* usage = member(params, "tokenUsage"); usage != nullptr)
    if (auto* total = member(*usage, "total"); total != nullptr)
      m.usage = breakdown(*total);
  if (codex_is_approval(m.method))
    m.summary = approval_text(params);
}

void read_result(const Value& result, codex_message& m) {
  if (auto* thread = member(result, "thread"); thread != nullptr)
    m.thread_id = string_at(*thread, "id");
  if (auto* turn = member(result, "turn"); turn != nullptr) {
    m.turn_id = string_at(*turn, "id");
    m.status = string_at(*turn, "status");
  }
  if (auto* id = member(result, "turnId"); id != nullptr && id->IsString())
    m.turn_id = id->GetString();
  m.model = string_at(result, "model");
}

} // namespace

// -- builders -----------------------------------------------------------------

std::string codex_initialize(int64_t id, std::string_view version) {
  return request(id, "initialize",
                 R"({"clientInfo":{"name":"butlers","title":"Butlers",)"
                 R"("version":)"
                   + json::quote(version) + "}}");
}

std::string codex_initialized() {
  return R"({"method":"initialized"})";
}

std::string codex_thread_start(int64_t id, bool ask_approvals) {
  return request(id, "thread/start",
                 ask_approvals ? R"({"approvalPolicy":"on-request"})"
                               : R"({"approvalPolicy":"never"})");
}

bool codex_is_approval(std::string_view method) {
  return method == "item/commandExecution/requestApproval"
         || method == "item/fileChange/requestApproval"
         || method == "execCommandApproval" || method == "applyPatchApproval";
}

std::string codex_approval_tool(std::string_view method) {
  return method == "item/commandExecution/requestApproval"
             || method == "execCommandApproval"
           ? "shell"
           : "apply_patch";
}

std::string codex_approval_answer(std::string_view id_json,
                                  std::string_view method, bool approved) {
  bool v2 = method.find('/') != std::string_view::npos;
  const char* decision = v2 ? (approved ? "accept" : "decline")
                            : (approved ? "approved" : "denied");
  return R"({"id":)" + std::string{id_json} + R"(,"result":{"decision":")"
         + decision + R"("}})";
}

std::string codex_turn_start(int64_t id, std::string_view thread_id,
                             const std::vector<std::string>& texts) {
  return request(id, "turn/start",
                 R"({"threadId":)" + json::quote(thread_id) + R"(,"input":)"
                   + text_items(texts) + "}");
}

std::string codex_turn_steer(int64_t id, std::string_view thread_id,
                             std::string_view expected_turn_id,
                             const std::vector<std::string>& texts) {
  return request(id, "turn/steer",
                 R"({"threadId":)" + json::quote(thread_id) + R"(,"input":)"
                   + text_items(texts) + R"(,"expectedTurnId":)"
                   + json::quote(expected_turn_id) + "}");
}

std::string codex_turn_interrupt(int64_t id, std::string_view thread_id,
                                 std::string_view turn_id) {
  return request(id, "turn/interrupt",
                 R"({"threadId":)" + json::quote(thread_id) + R"(,"turnId":)"
                   + json::quote(turn_id) + "}");
}

std::string codex_decline(std::string_view id_json, std::string_view method) {
  std::string result;
  if (method == "item/commandExecution/requestApproval"
      || method == "item/fileChange/requestApproval")
    result = R"({"decision":"decline"})";
  else if (method == "execCommandApproval" || method == "applyPatchApproval")
    result = R"({"decision":"denied"})";
  else if (method == "mcpServer/elicitation/request")
    result = R"({"action":"decline","content":null})";
  else if (method == "item/permissions/requestApproval")
    result = R"({"permissions":{}})";
  else if (method == "item/tool/requestUserInput")
    result = R"({"answers":{}})";
  else if (method == "item/tool/call")
    result = R"({"contentItems":[],"success":false})";
  if (result.empty())
    return R"({"id":)" + std::string{id_json}
           + R"(,"error":{"code":-32601,"message":)"
           + json::quote(std::string{method} + " is not supported by butlers")
           + "}}";
  return R"({"id":)" + std::string{id_json} + R"(,"result":)" + result + "}";
}

// -- parser -------------------------------------------------------------------

codex_message parse_codex_line(std::string_view line) {
  codex_message m;
  line = trim(line);
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = std::max(limits.max_bytes, line.size());
  limits.max_depth = 256;
  if (auto err = json::parse(line, doc, limits)) {
    m.error = err->message;
    return m;
  }
  if (!doc.IsObject()) {
    m.error = "not a JSON object";
    return m;
  }
  auto* id = member(doc, "id");
  if (id != nullptr) {
    m.id = json::to_string(*id);
    if (id->IsInt64())
      m.number = id->GetInt64();
  }
  m.method = string_at(doc, "method");
  static const Value empty{rapidjson::kObjectType};
  auto* params = member(doc, "params");
  if (!m.method.empty()) {
    m.kind = id != nullptr ? codex_message_kind::request
                           : codex_message_kind::notification;
    read_params(params != nullptr ? *params : empty, m);
    return m;
  }
  if (id == nullptr) {
    m.error = "neither a method nor an id";
    return m;
  }
  if (auto* err = member(doc, "error"); err != nullptr) {
    m.kind = codex_message_kind::error_response;
    m.error = string_at(*err, "message");
    if (auto* code = member(*err, "code"); code != nullptr && code->IsInt64())
      m.code = code->GetInt64();
    return m;
  }
  if (auto* result = member(doc, "result"); result != nullptr) {
    m.kind = codex_message_kind::response;
    read_result(*result, m);
    return m;
  }
  m.error = "an id without result or error";
  return m;
}

// -- codex_conversation -------------------------------------------------------

codex_conversation::codex_conversation(std::string prompt, std::string version,
                                       bool ask_approvals)
  : prompt_(std::move(prompt)), version_(std::move(version)),
    ask_approvals_(ask_approvals) {
  // nop
}

void codex_conversation::answer_approval(const std::string& key, bool approved,
                                         codex_step& out) {
  auto i = approvals_.find(key);
  if (i == approvals_.end() || phase_ == phase::finished)
    return;
  out.writes.push_back(codex_approval_answer(key, i->second, approved));
  approvals_.erase(i);
}

void codex_conversation::start(codex_step& out) {
  if (phase_ != phase::idle)
    return;
  phase_ = phase::initializing;
  initialize_id_ = next_id_++;
  out.writes.push_back(codex_initialize(initialize_id_, version_));
}

void codex_conversation::on_line(std::string_view line, codex_step& out) {
  if (phase_ == phase::finished || trim(line).empty())
    return;
  auto m = parse_codex_line(line);
  switch (m.kind) {
    case codex_message_kind::response: on_response(m, out); return;
    case codex_message_kind::error_response: on_error_response(m, out); return;
    case codex_message_kind::notification: on_notification(m, out); return;
    case codex_message_kind::request:
      if (ask_approvals_ && codex_is_approval(m.method)
          && approvals_.size() < 64 && approvals_.count(m.id) == 0) {
        approvals_.emplace(m.id, m.method);
        out.approvals.push_back(
          {m.id, codex_approval_tool(m.method), m.summary});
        return;
      }
      out.writes.push_back(codex_decline(m.id, m.method));
      return;
    case codex_message_kind::invalid: return; // not ours to read
  }
}

void codex_conversation::on_input(std::vector<steer_input> inputs,
                                  codex_step& out) {
  if (phase_ == phase::finished || inputs.empty())
    return;
  for (auto& in : inputs)
    waiting_.push_back(std::move(in));
  if (phase_ == phase::in_turn)
    steer(out);
  // Before the first turn, input joins it; while a turn starts, it waits
  // for the turn's id; after a turn, `settle` starts the next one.
}

void codex_conversation::on_exit(const std::string& why, codex_step& out) {
  if (phase_ == phase::finished)
    return;
  fail("codex app-server ended before the run did: " + why, out);
}

void codex_conversation::interrupt(codex_step& out) {
  if (phase_ != phase::in_turn || turn_id_.empty())
    return;
  out.writes.push_back(codex_turn_interrupt(next_id_++, thread_id_, turn_id_));
}

void codex_conversation::on_response(const codex_message& m, codex_step& out) {
  if (m.number == initialize_id_ && phase_ == phase::initializing) {
    out.writes.push_back(codex_initialized());
    thread_start_id_ = next_id_++;
    out.writes.push_back(codex_thread_start(thread_start_id_, ask_approvals_));
    phase_ = phase::starting_thread;
    return;
  }
  if (m.number == thread_start_id_ && phase_ == phase::starting_thread) {
    if (m.thread_id.empty()) {
      fail("thread/start answered without a thread id", out);
      return;
    }
    thread_id_ = m.thread_id;
    model_ = m.model;
    auto inputs = std::exchange(waiting_, {});
    std::vector<std::string> texts{prompt_};
    for (auto& in : inputs)
      texts.push_back(in.text);
    start_turn(std::move(texts), std::move(inputs), out);
    return;
  }
  if (m.number == turn_start_id_ && phase_ == phase::starting_turn) {
    if (m.turn_id.empty()) {
      fail("turn/start answered without a turn id", out);
      return;
    }
    turn_id_ = m.turn_id;
    phase_ = phase::in_turn;
    steer(out); // input that arrived while the turn started
    return;
  }
  auto s = steering_.find(m.number);
  if (s == steering_.end())
    return; // e.g. turn/interrupt's {}
  steer_applied a;
  a.turn = turns_;
  a.inputs = std::move(s->second);
  steering_.erase(s);
  out.applied.push_back(std::move(a));
  if (phase_ == phase::settling && steering_.empty())
    settle(out);
}

void codex_conversation::on_error_response(const codex_message& m,
                                           codex_step& out) {
  auto s = steering_.find(m.number);
  if (s != steering_.end()) {
    // The turn ended (or will not take input): the input starts the next
    // turn, ahead of what arrived after it.
    auto refused = std::move(s->second);
    steering_.erase(s);
    waiting_.insert(waiting_.begin(), std::make_move_iterator(refused.begin()),
                    std::make_move_iterator(refused.end()));
    if (phase_ == phase::settling && steering_.empty())
      settle(out);
    return;
  }
  const char* what = nullptr;
  if (m.number == initialize_id_)
    what = "initialize";
  else if (m.number == thread_start_id_)
    what = "thread/start";
  else if (m.number == turn_start_id_)
    what = "turn/start";
  if (what != nullptr)
    fail(std::string{what} + " failed: " + m.error, out);
}

void codex_conversation::on_notification(const codex_message& m,
                                         codex_step& out) {
  if (!thread_id_.empty() && !m.thread_id.empty() && m.thread_id != thread_id_)
    return; // another thread's
  if (m.method == "item/agentMessage/delta") {
    if (m.item_id != streaming_item_) {
      streaming_item_ = m.item_id;
      streaming_text_.clear();
    }
    streaming_text_ += m.text;
    out.delta += m.text;
  } else if (m.method == "item/completed") {
    if (m.item_type == "agentMessage") {
      last_text_ = m.text.empty() && m.item_id == streaming_item_
                     ? streaming_text_
                     : m.text;
      streaming_item_.clear();
      streaming_text_.clear();
    }
  } else if (m.method == "thread/tokenUsage/updated") {
    if (m.usage) {
      tokens_ = m.usage;
      out.usage = usage();
    }
  } else if (m.method == "error") {
    if (!m.will_retry)
      last_error_ = m.error;
  } else if (m.method == "turn/completed") {
    on_turn_completed(m, out);
  }
}

void codex_conversation::on_turn_completed(const codex_message& m,
                                           codex_step& out) {
  if (phase_ != phase::in_turn || (!m.turn_id.empty() && m.turn_id != turn_id_))
    return;
  if (!streaming_text_.empty()) // a message that never completed
    last_text_ = std::exchange(streaming_text_, {});
  if (m.status == "failed") {
    auto why = !m.error.empty() ? m.error : last_error_;
    fail("codex turn failed" + (why.empty() ? std::string{} : ": " + why), out);
    return;
  }
  if (m.status == "interrupted") {
    fail("codex turn was interrupted", out);
    return;
  }
  phase_ = phase::settling;
  if (steering_.empty())
    settle(out);
}

void codex_conversation::settle(codex_step& out) {
  if (!waiting_.empty()) {
    auto inputs = std::exchange(waiting_, {});
    std::vector<std::string> texts;
    texts.reserve(inputs.size());
    for (auto& in : inputs)
      texts.push_back(in.text);
    start_turn(std::move(texts), std::move(inputs), out);
    return;
  }
  phase_ = phase::finished;
  adapter_result r;
  r.usage = usage();
  if (last_text_.empty()) {
    r.error_class = "internal_error";
    r.message = "codex app-server finished without an agent message";
  } else {
    r.ok = true;
    r.text = last_text_;
  }
  out.done = std::move(r);
}

void codex_conversation::start_turn(std::vector<std::string> texts,
                                    std::vector<steer_input> inputs,
                                    codex_step& out) {
  ++turns_;
  turn_id_.clear();
  turn_start_id_ = next_id_++;
  out.writes.push_back(codex_turn_start(turn_start_id_, thread_id_, texts));
  phase_ = phase::starting_turn;
  if (!inputs.empty()) {
    steer_applied a;
    a.turn = turns_;
    a.inputs = std::move(inputs);
    out.applied.push_back(std::move(a));
  }
}

void codex_conversation::steer(codex_step& out) {
  if (waiting_.empty() || turn_id_.empty())
    return;
  std::vector<std::string> texts;
  texts.reserve(waiting_.size());
  for (auto& in : waiting_)
    texts.push_back(in.text);
  auto id = next_id_++;
  out.writes.push_back(codex_turn_steer(id, thread_id_, turn_id_, texts));
  steering_[id] = std::exchange(waiting_, {});
}

void codex_conversation::fail(std::string message, codex_step& out) {
  phase_ = phase::finished;
  adapter_result r;
  r.error_class = "internal_error";
  r.message = std::move(message);
  r.usage = usage();
  out.done = std::move(r);
}

session_usage codex_conversation::usage() const {
  session_usage u;
  u.model = model_;
  u.calls = turns_;
  if (tokens_) {
    auto cached = std::min(tokens_->cached_input, tokens_->input);
    u.input_tokens = tokens_->input - cached;
    u.cache_read_tokens = cached;
    u.output_tokens = tokens_->output;
  }
  return u;
}

} // namespace butlers
