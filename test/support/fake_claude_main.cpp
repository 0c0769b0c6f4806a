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
//   FAKE_CLAUDE_INPUT_LOG       append each user text received, then a line
//                               "--- end of message ---"
//   FAKE_CLAUDE_MODEL           the model to report (fake-claude-model)

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "runtime/json.hpp"

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

} // namespace

int main() {
  if (env_or("FAKE_CLAUDE_IGNORE_TERM") == "1")
    ::signal(SIGTERM, SIG_IGN); // inherited by the child, too
  if (auto pidfile = env_or("FAKE_CLAUDE_PIDFILE"); !pidfile.empty())
    start_child(pidfile);
  auto log_path = env_or("FAKE_CLAUDE_INPUT_LOG");
  fake_state st;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty())
      continue;
    auto text = user_text(line);
    if (!log_path.empty()) {
      std::ofstream log{log_path, std::ios::app};
      log << text << "\n--- end of message ---\n";
    }
    answer(st, text);
  }
  return 0;
}
