// butlers-fake-claude: stands in for `claude -p --input-format stream-json
// --output-format stream-json --verbose --include-partial-messages` in
// tests. It reads NDJSON user messages from stdin and answers each as
// Claude Code does (the shapes of test/fixtures/claude/): the first time a
// `system`/`init` line, then `stream_event` lines (message_start,
// content_block_start, one text_delta per piece of the reply,
// content_block_stop, message_delta, message_stop) with the `assistant`
// message among them, and a `result` with usage and the running cost. The
// reply echoes the user text it got: "echo: <text>", so tests see what
// reached the model. It exits 0 at EOF on stdin.
//
// Switches (environment):
//   FAKE_CLAUDE_DELTA_DELAY_MS  sleep before each text delta
//   FAKE_CLAUDE_TURN_DELAY_MS   sleep before each answer
//   FAKE_CLAUDE_FAIL            1: every result is an error (is_error true,
//                               subtype success, as for an API error)
//   FAKE_CLAUDE_CRASH           1: exit 3 after the first delta of an answer
//   FAKE_CLAUDE_IGNORE_TERM     1: ignore SIGTERM (so only SIGKILL ends it)
//   FAKE_CLAUDE_PIDFILE         write our pid and a child's (a `sleep` in
//                               our process group) here, one per line,
//                               before reading stdin
//   FAKE_CLAUDE_INPUT_LOG       append each user text received (and a line
//                               "[image image/jpeg sha256=... bytes=N]" per
//                               image or document block), then a line
//                               "--- end of message ---"
//   FAKE_CLAUDE_MODEL           the model to report (fake-claude-model)
//   FAKE_CLAUDE_MCP_CALLS       a JSON array of {"name", "arguments"}: before
//                               answering the first user message, act as
//                               Claude Code's MCP client towards the
//                               server `--mcp-config FILE` names (its url
//                               and headers; `butlers`, else the first):
//                               POST initialize (2025-06-18), POST
//                               notifications/initialized, POST
//                               tools/list, then one tools/call per entry
//                               in order, over Streamable HTTP with
//                               Mcp-Session-Id and MCP-Protocol-Version
//   FAKE_CLAUDE_MCP_LOG         append each tools/call's JSON-RPC response
//                               (one line; a line {"fake_claude_error":..}
//                               when a step failed)
//   FAKE_CLAUDE_MCP_DELAY_MS    sleep between two tools/call
//   FAKE_CLAUDE_PERMISSION      a JSON array of {"tool_name", "input"}: the
//                               tools the model "wants" to use that are not
//                               pre-approved. Before answering the first
//                               message, each is put to the tool that
//                               `--permission-prompt-tool mcp__S__T` names
//                               (tools/call T on server S, arguments
//                               tool_name, input and tool_use_id) as Claude
//                               Code does; the answer's text is the JSON
//                               {"behavior":"allow"|"deny",...}. The reply
//                               then starts "[permission TOOL: BEHAVIOR] ".
//
// Arguments: `--mcp-config FILE` as Claude Code takes it,
// `--permission-prompt-tool NAME`; `--allowedTools VALUE` and anything else
// is ignored.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "runtime/attachments.hpp"
#include "runtime/json.hpp"
#include "test/support/http_client.hpp"

namespace {

std::string env_or(const char* name, std::string fallback = {}) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string{v} : fallback;
}

long env_ms(const char* name) {
  return std::strtol(env_or(name, "0").c_str(), nullptr, 10);
}

void sleep_ms(long ms) {
  if (ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds{ms});
}

void emit(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

const std::string session_id = "fake-session-0001";

std::string envelope_tail() {
  return R"(,"parent_tool_use_id":null,"session_id":")" + session_id
         + R"(","uuid":"00000000-0000-4000-8000-000000000000"})";
}

void emit_stream_event(const std::string& event) {
  emit(R"({"type":"stream_event","event":)" + event + envelope_tail());
}

/// The user text of one input line: `message.content` as a string, or its
/// text blocks joined.
std::string user_text(std::string_view line) {
  rapidjson::Document doc;
  butlers::json::parse_limits limits;
  limits.max_bytes = line.size() + 1;
  if (butlers::json::parse(line, doc, limits) || !doc.IsObject())
    return "(not JSON)";
  auto msg = doc.FindMember("message");
  if (msg == doc.MemberEnd() || !msg->value.IsObject())
    return "(no message)";
  auto content = msg->value.FindMember("content");
  if (content == msg->value.MemberEnd())
    return "(no content)";
  if (content->value.IsString())
    return content->value.GetString();
  std::string out;
  if (content->value.IsArray())
    for (auto& block : content->value.GetArray()) {
      auto text = block.FindMember("text");
      if (block.IsObject() && text != block.MemberEnd()
          && text->value.IsString())
        out += text->value.GetString();
    }
  return out;
}

/// The content blocks of a user message that are not text, one line each:
/// "[<type> <media_type> sha256=<hash of the decoded data> bytes=<n>]", so
/// a test sees exactly which bytes arrived.
std::string user_blocks(std::string_view line) {
  rapidjson::Document doc;
  butlers::json::parse_limits limits;
  limits.max_bytes = line.size() + 1;
  if (butlers::json::parse(line, doc, limits) || !doc.IsObject())
    return {};
  auto msg = doc.FindMember("message");
  if (msg == doc.MemberEnd() || !msg->value.IsObject())
    return {};
  auto content = msg->value.FindMember("content");
  if (content == msg->value.MemberEnd() || !content->value.IsArray())
    return {};
  std::string out;
  for (auto& block : content->value.GetArray()) {
    if (!block.IsObject() || !block.HasMember("source"))
      continue;
    auto& src = block["source"];
    if (!src.IsObject() || !src.HasMember("data") || !src["data"].IsString()
        || !src.HasMember("media_type") || !src["media_type"].IsString())
      continue;
    auto bytes = butlers::base64_decode(src["data"].GetString());
    out += "\n[" + std::string{block["type"].GetString()} + " "
           + src["media_type"].GetString() + " sha256="
           + (bytes ? butlers::attachment_hash(*bytes) : "(not base64)")
           + " bytes=" + std::to_string(bytes ? bytes->size() : 0) + "]";
  }
  return out;
}

/// The reply in pieces of up to 12 bytes (never inside a UTF-8 sequence).
std::vector<std::string> pieces(const std::string& reply) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < reply.size()) {
    size_t n = std::min<size_t>(12, reply.size() - i);
    while (i + n < reply.size()
           && (static_cast<unsigned char>(reply[i + n]) & 0xC0) == 0x80)
      ++n;
    out.push_back(reply.substr(i, n));
    i += n;
  }
  return out;
}

struct fake_state {
  bool init_sent = false;
  int turns = 0;
  std::string model = env_or("FAKE_CLAUDE_MODEL", "fake-claude-model");
};

void answer(fake_state& st, const std::string& text) {
  using butlers::json::quote;
  if (!st.init_sent) {
    emit(R"({"type":"system","subtype":"init","cwd":"/fake","session_id":")"
         + session_id + R"(","tools":["Read","Bash"],"mcp_servers":[],)"
         + R"("model":)" + quote(st.model)
         + R"(,"permissionMode":"default","apiKeySource":"none",)"
         + R"("uuid":"00000000-0000-4000-8000-000000000001"})");
    st.init_sent = true;
  }
  ++st.turns;
  sleep_ms(env_ms("FAKE_CLAUDE_TURN_DELAY_MS"));
  bool fail = env_or("FAKE_CLAUDE_FAIL") == "1";
  std::string reply = "echo: " + text;
  auto msg_id = "msg_fake_" + std::to_string(st.turns);
  emit_stream_event(
    R"({"type":"message_start","message":{"id":")" + msg_id
    + R"(","type":"message","role":"assistant","model":)" + quote(st.model)
    + R"(,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}})");
  emit_stream_event(
    R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})");
  bool first = true;
  for (auto& piece : pieces(reply)) {
    sleep_ms(env_ms("FAKE_CLAUDE_DELTA_DELAY_MS"));
    emit_stream_event(
      R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":)"
      + quote(piece) + "}}");
    if (first && env_or("FAKE_CLAUDE_CRASH") == "1")
      std::_Exit(3);
    first = false;
  }
  emit(
    R"({"type":"assistant","message":{"id":")" + msg_id
    + R"(","type":"message","role":"assistant","model":)" + quote(st.model)
    + R"(,"content":[{"type":"text","text":)" + quote(reply)
    + R"(}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}})"
    + envelope_tail());
  emit_stream_event(R"({"type":"content_block_stop","index":0})");
  emit_stream_event(
    R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}})");
  emit_stream_event(R"({"type":"message_stop"})");
  // The cost is the process's running total (anthropics/claude-code#83239).
  char cost[32];
  std::snprintf(cost, sizeof(cost), "%.4f", 0.0125 * st.turns);
  emit(
    std::string{R"({"type":"result","subtype":"success","is_error":)"}
    + (fail ? "true" : "false")
    + R"(,"duration_ms":12,"duration_api_ms":10,"num_turns":1,"result":)"
    + quote(fail ? "fake error: " + text : reply) + R"(,"session_id":")"
    + session_id + R"(","total_cost_usd":)" + cost
    + R"(,"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":100,"output_tokens":5},"permission_denials":[],"uuid":"00000000-0000-4000-8000-000000000002"})");
}

/// A child in our process group, so tests can check that the whole group
/// dies; its pid and ours go to `path`.
void start_child(const std::string& path) {
  pid_t child = ::fork();
  if (child == 0) {
    ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  std::ofstream out{path + ".tmp"};
  out << ::getpid() << '\n' << child << '\n';
  out.close();
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// -- MCP client ---------------------------------------------------------------

/// Where the MCP server is and what to send it, from `--mcp-config`.
struct mcp_server {
  std::string host;
  uint16_t port = 80;
  std::string path = "/";
  butlers::test::http_headers headers;
};

/// Writes one line to FAKE_CLAUDE_MCP_LOG (newlines in `line` flattened).
void mcp_log(std::string line) {
  for (auto& c : line)
    if (c == '\n' || c == '\r')
      c = ' ';
  if (auto path = env_or("FAKE_CLAUDE_MCP_LOG"); !path.empty()) {
    std::ofstream log{path, std::ios::app};
    log << line << '\n';
  }
}

/// Logs first: once the node is gone, writing to stderr raises SIGPIPE.
void mcp_error(const std::string& what) {
  mcp_log(R"({"fake_claude_error":)" + butlers::json::quote(what) + "}");
  std::fprintf(stderr, "fake-claude: MCP: %s\n", what.c_str());
}

/// The server of an `--mcp-config` file: `mcpServers.butlers`, else the
/// first; only `http://host[:port]/path` URLs.
std::optional<mcp_server> read_mcp_config(const std::string& file) {
  std::ifstream in{file};
  std::string text{std::istreambuf_iterator<char>{in},
                   std::istreambuf_iterator<char>{}};
  rapidjson::Document doc;
  if (butlers::json::parse(text, doc) || !doc.IsObject()) {
    mcp_error("--mcp-config " + file + " is not a JSON object");
    return std::nullopt;
  }
  auto servers = doc.FindMember("mcpServers");
  if (servers == doc.MemberEnd() || !servers->value.IsObject()
      || servers->value.MemberCount() == 0) {
    mcp_error("--mcp-config " + file + " has no mcpServers");
    return std::nullopt;
  }
  auto entry = servers->value.FindMember("butlers");
  if (entry == servers->value.MemberEnd())
    entry = servers->value.MemberBegin();
  auto& srv = entry->value;
  auto url = srv.IsObject() && srv.HasMember("url") && srv["url"].IsString()
               ? std::string{srv["url"].GetString()}
               : std::string{};
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    mcp_error("not an http:// url: '" + url + "'");
    return std::nullopt;
  }
  mcp_server out;
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  if (slash != std::string::npos)
    out.path = rest.substr(slash);
  auto colon = authority.rfind(':');
  out.host = authority.substr(0, colon);
  if (colon != std::string::npos)
    out.port = static_cast<uint16_t>(
      std::strtoul(authority.c_str() + colon + 1, nullptr, 10));
  if (auto h = srv.FindMember("headers");
      h != srv.MemberEnd() && h->value.IsObject())
    for (auto& m : h->value.GetObject())
      if (m.value.IsString())
        out.headers.emplace_back(m.name.GetString(), m.value.GetString());
  return out;
}

/// The JSON-RPC message of a response: its body, or for an event stream
/// the data of its last event.
std::string rpc_body(const butlers::test::http_response& r) {
  auto type = r.headers.find("content-type");
  if (type == r.headers.end()
      || type->second.rfind("text/event-stream", 0) != 0)
    return r.body;
  std::string last;
  size_t pos = 0;
  while (pos < r.body.size()) {
    auto eol = r.body.find('\n', pos);
    auto line = r.body.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.rfind("data:", 0) == 0)
      last = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    if (eol == std::string::npos)
      break;
    pos = eol + 1;
  }
  return last;
}

/// One MCP session over Streamable HTTP, as Claude Code holds it.
class mcp_client {
 public:
  explicit mcp_client(mcp_server srv)
    : srv_(std::move(srv)),
      http_(srv_.host, srv_.port, std::chrono::seconds{30}) {
    // nop
  }

  /// initialize, then notifications/initialized; false (logged) on failure.
  bool open() {
    auto r = post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++)
                  + R"(,"method":"initialize","params":{"protocolVersion":)"
                    R"("2025-06-18","capabilities":{},"clientInfo":)"
                    R"({"name":"butlers-fake-claude","version":"0.1.0"}}})");
    if (r.status != 200)
      return failed("initialize", r);
    auto sid = r.headers.find("mcp-session-id");
    if (sid == r.headers.end() || sid->second.empty())
      return failed("initialize answered no Mcp-Session-Id", r);
    session_ = sid->second;
    rapidjson::Document doc;
    if (butlers::json::parse(rpc_body(r), doc) || !doc.IsObject()
        || !doc.HasMember("result") || !doc["result"].IsObject()
        || !doc["result"].HasMember("protocolVersion")
        || !doc["result"]["protocolVersion"].IsString())
      return failed("initialize answered no protocolVersion", r);
    version_ = doc["result"]["protocolVersion"].GetString();
    r = post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    if (r.status != 202)
      return failed("notifications/initialized (expected 202)", r);
    return true;
  }

  bool list_tools() {
    auto r = post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++)
                  + R"(,"method":"tools/list"})");
    if (r.status != 200 || rpc_body(r).find(R"("tools")") == std::string::npos)
      return failed("tools/list", r);
    return true;
  }

  /// tools/call of `name` with `arguments` (JSON text): the JSON-RPC
  /// response, "" when the request failed (logged).
  std::string call(const std::string& name, const std::string& arguments) {
    auto r = post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++)
                  + R"(,"method":"tools/call","params":{"name":)"
                  + butlers::json::quote(name) + R"(,"arguments":)" + arguments
                  + "}}");
    if (r.status == 0) {
      failed("tools/call " + name, r);
      return {};
    }
    return rpc_body(r);
  }

  /// tools/call of `call` ({"name","arguments"} as JSON text); its
  /// response goes to the log.
  void call_tool(const rapidjson::Value& call) {
    auto name = call.HasMember("name") ? butlers::json::to_string(call["name"])
                                       : std::string{R"("")"};
    auto args = call.HasMember("arguments")
                  ? butlers::json::to_string(call["arguments"])
                  : std::string{"{}"};
    auto r = post(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id_++)
                  + R"(,"method":"tools/call","params":{"name":)" + name
                  + R"(,"arguments":)" + args + "}}");
    if (r.status == 0) {
      failed("tools/call " + name, r);
      return;
    }
    mcp_log(rpc_body(r));
  }

 private:
  butlers::test::http_response post(const std::string& body) {
    auto headers = srv_.headers;
    headers.emplace_back("Accept", "application/json, text/event-stream");
    if (!session_.empty())
      headers.emplace_back("Mcp-Session-Id", session_);
    if (!version_.empty())
      headers.emplace_back("MCP-Protocol-Version", version_);
    return http_.post(srv_.path, body, "application/json", headers);
  }

  bool failed(const std::string& step, const butlers::test::http_response& r) {
    mcp_error(step + ": HTTP " + std::to_string(r.status) + " " + r.error + " "
              + r.body);
    return false;
  }

  mcp_server srv_;
  butlers::test::http_client http_;
  int next_id_ = 1;
  std::string session_;
  std::string version_;
};

/// FAKE_CLAUDE_MCP_CALLS against the server of `config_file`, in order.
void run_mcp_calls(const std::string& config_file) {
  auto calls_text = env_or("FAKE_CLAUDE_MCP_CALLS");
  if (calls_text.empty())
    return;
  rapidjson::Document calls;
  if (butlers::json::parse(calls_text, calls) || !calls.IsArray()) {
    mcp_error("FAKE_CLAUDE_MCP_CALLS is not a JSON array");
    return;
  }
  if (config_file.empty()) {
    mcp_error("no --mcp-config");
    return;
  }
  auto srv = read_mcp_config(config_file);
  if (!srv)
    return;
  mcp_client client{std::move(*srv)};
  if (!client.open() || !client.list_tools())
    return;
  auto delay = env_ms("FAKE_CLAUDE_MCP_DELAY_MS");
  bool first = true;
  for (auto& call : calls.GetArray()) {
    if (!first)
      sleep_ms(delay);
    first = false;
    if (!call.IsObject()) {
      mcp_error("a call is not an object");
      continue;
    }
    client.call_tool(call);
  }
}

/// FAKE_CLAUDE_PERMISSION through the tool `prompt_tool` names: "[permission
/// TOOL: BEHAVIOR] " for each, in order.
std::string ask_permissions(const std::string& config_file,
                            const std::string& prompt_tool) {
  auto wanted_text = env_or("FAKE_CLAUDE_PERMISSION");
  if (wanted_text.empty())
    return {};
  rapidjson::Document wanted;
  if (butlers::json::parse(wanted_text, wanted) || !wanted.IsArray()) {
    mcp_error("FAKE_CLAUDE_PERMISSION is not a JSON array");
    return {};
  }
  // "mcp__<server>__<tool>"
  auto sep = prompt_tool.rfind("__");
  if (prompt_tool.rfind("mcp__", 0) != 0 || sep == std::string::npos
      || sep < 5) {
    mcp_error("no --permission-prompt-tool mcp__SERVER__TOOL: '" + prompt_tool
              + "'");
    return {};
  }
  auto srv = config_file.empty() ? std::nullopt : read_mcp_config(config_file);
  if (!srv)
    return {};
  mcp_client client{std::move(*srv)};
  if (!client.open() || !client.list_tools())
    return {};
  std::string out;
  int n = 0;
  for (auto& w : wanted.GetArray()) {
    if (!w.IsObject() || !w.HasMember("tool_name")
        || !w["tool_name"].IsString())
      continue;
    std::string tool = w["tool_name"].GetString();
    auto input = w.HasMember("input") ? butlers::json::to_string(w["input"])
                                      : std::string{"{}"};
    auto body = client.call(prompt_tool.substr(sep + 2),
                            R"({"tool_name":)" + butlers::json::quote(tool)
                              + R"(,"input":)" + input
                              + R"(,"tool_use_id":"toolu_fake_)"
                              + std::to_string(++n) + "\"}");
    mcp_log(body);
    // Claude Code reads the first text block as the decision.
    std::string behavior = "unreadable";
    rapidjson::Document rpc;
    rapidjson::Document decision;
    if (!butlers::json::parse(body, rpc) && rpc.IsObject()
        && rpc.HasMember("result") && rpc["result"].IsObject()
        && rpc["result"].HasMember("content")
        && rpc["result"]["content"].IsArray()
        && !rpc["result"]["content"].Empty()) {
      auto& block = rpc["result"]["content"][0];
      if (block.IsObject() && block.HasMember("text")
          && block["text"].IsString()
          && !butlers::json::parse(block["text"].GetString(), decision)
          && decision.IsObject() && decision.HasMember("behavior")
          && decision["behavior"].IsString())
        behavior = decision["behavior"].GetString();
    }
    out += "[permission " + tool + ": " + behavior + "] ";
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  std::string mcp_config;
  std::string prompt_tool;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--mcp-config" && i + 1 < argc)
      mcp_config = argv[++i];
    else if (arg == "--permission-prompt-tool" && i + 1 < argc)
      prompt_tool = argv[++i];
    else if (arg == "--allowedTools" && i + 1 < argc)
      ++i;
  }
  if (env_or("FAKE_CLAUDE_IGNORE_TERM") == "1")
    ::signal(SIGTERM, SIG_IGN); // inherited by the child, too
  if (auto pidfile = env_or("FAKE_CLAUDE_PIDFILE"); !pidfile.empty())
    start_child(pidfile);
  auto log_path = env_or("FAKE_CLAUDE_INPUT_LOG");
  fake_state st;
  bool tools_called = false;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty())
      continue;
    auto text = user_text(line);
    if (!tools_called) {
      tools_called = true;
      run_mcp_calls(mcp_config);
      text = ask_permissions(mcp_config, prompt_tool) + text;
    }
    if (!log_path.empty()) {
      std::ofstream log{log_path, std::ios::app};
      log << text << user_blocks(line) << "\n--- end of message ---\n";
    }
    answer(st, text);
  }
  return 0;
}
