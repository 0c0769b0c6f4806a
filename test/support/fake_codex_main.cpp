// butlers-fake-codex: stands in for `codex app-server` in tests. It speaks
// the app-server protocol on stdio (JSON-RPC without the "jsonrpc" member,
// one message per line; the shapes of test/fixtures/codex/, which
// codex_app_server_test checks it against) and answers every turn with
// "echo: " followed by the input texts the turn received, in order,
// joined by " | " — the turn/start texts and then every turn/steer the turn
// accepted. A turn streams "echo: " at once as item/agentMessage/delta, the
// rest when it ends, then item/completed, thread/tokenUsage/updated and
// turn/completed. It exits when stdin closes (after finishing a running
// turn).
//
// Switches (environment):
//   FAKE_CODEX_TURN_MS      how long each turn runs before it answers
//                           (default 0), so that tests can steer it
//   FAKE_CODEX_FAIL=1       every turn fails: an `error` notification, then
//                           turn/completed with status "failed"
//   FAKE_CODEX_EXIT         "initialize": exit 3 right after answering
//                           initialize; "turn": exit 3 after a turn's first
//                           delta
//   FAKE_CODEX_APPROVAL=1   each turn first asks
//                           item/commandExecution/requestApproval and waits
//                           for the answer; its decision joins the reply
//                           ("approval: <decision>")
//   FAKE_CODEX_PIDFILE      start a child that sleeps (a "tool"), then write
//                           our pid and the child's, one per line
//   FAKE_CODEX_IGNORE_TERM=1  we and the child ignore SIGTERM
//   FAKE_CODEX_LOG          append every line received to this file
//   FAKE_CODEX_THREAD_ID    the thread id (default "thr_fake")

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "runtime/json.hpp"

namespace {

using namespace butlers;
using clock_type = std::chrono::steady_clock;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string{v} : fallback;
}

void emit(const std::string& line) {
  std::string out = line + "\n";
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    auto n = ::write(STDOUT_FILENO, p, left);
    if (n <= 0)
      std::_Exit(4); // nobody reads us any more
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string str(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject())
    return {};
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

std::vector<std::string> input_texts(const rapidjson::Value& params) {
  std::vector<std::string> out;
  auto i = params.FindMember("input");
  if (i == params.MemberEnd() || !i->value.IsArray())
    return out;
  for (auto& item : i->value.GetArray())
    if (str(item, "type") == "text")
      out.push_back(str(item, "text"));
  return out;
}

struct usage_counts {
  uint64_t input = 0;
  uint64_t output = 0;

  std::string json() const {
    return R"({"totalTokens":)" + std::to_string(input + output)
           + R"(,"inputTokens":)" + std::to_string(input)
           + R"(,"cachedInputTokens":0,"outputTokens":)"
           + std::to_string(output) + R"(,"reasoningOutputTokens":0})";
  }
};

struct turn_state {
  std::string id;
  std::vector<std::string> texts;
  clock_type::time_point ends;
  /// The approval request's id while it waits for its answer.
  std::optional<int64_t> approval;
};

class fake_server {
 public:
  fake_server()
    : thread_id_(env_or("FAKE_CODEX_THREAD_ID", "thr_fake")),
      turn_ms_(std::atoi(env_or("FAKE_CODEX_TURN_MS", "0").c_str())),
      fail_(env_or("FAKE_CODEX_FAIL", "") == "1"),
      exit_(env_or("FAKE_CODEX_EXIT", "")),
      approval_(env_or("FAKE_CODEX_APPROVAL", "") == "1") {
    auto log = env_or("FAKE_CODEX_LOG", "");
    if (!log.empty())
      log_.open(log, std::ios::app);
  }

  /// Reads stdin until it closes and the running turn is over.
  int run() {
    std::string buf;
    bool open = true;
    while (open || turn_) {
      if (turn_ && !turn_->approval && clock_type::now() >= turn_->ends) {
        finish_turn("completed");
        continue;
      }
      int wait_ms = 200;
      if (turn_ && !turn_->approval)
        wait_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(
            turn_->ends - clock_type::now())
            .count());
      if (!open) {
        if (turn_ && turn_->approval)
          return 0; // nobody will ever answer
        ::poll(nullptr, 0, std::max(wait_ms, 0));
        continue;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, std::max(wait_ms, 0)) != 1)
        continue;
      char chunk[65536];
      auto n = ::read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n <= 0) {
        open = false;
        continue;
      }
      buf.append(chunk, static_cast<size_t>(n));
      for (auto eol = buf.find('\n'); eol != std::string::npos;
           eol = buf.find('\n')) {
        auto line = buf.substr(0, eol);
        buf.erase(0, eol + 1);
        if (!line.empty())
          on_line(line);
      }
    }
    return 0;
  }

 private:
  void on_line(const std::string& line) {
    if (log_.is_open())
      log_ << line << std::endl;
    rapidjson::Document doc;
    if (json::parse(line, doc) || !doc.IsObject())
      return;
    auto method = str(doc, "method");
    auto id_it = doc.FindMember("id");
    std::string id = id_it != doc.MemberEnd() ? json::to_string(id_it->value)
                                              : std::string{};
    static const rapidjson::Value empty{rapidjson::kObjectType};
    auto p = doc.FindMember("params");
    const rapidjson::Value& params = p != doc.MemberEnd() ? p->value : empty;
    if (method.empty()) {
      if (id_it != doc.MemberEnd() && id_it->value.IsInt64())
        on_answer(id_it->value.GetInt64(), doc);
      return;
    }
    if (method == "initialize") {
      emit(R"({"id":)" + id
           + R"(,"result":{"userAgent":)"
             R"("butlers-fake-codex/0.1.0","codexHome":"/nonexistent/.codex",)"
             R"("platformFamily":"unix","platformOs":"linux"}})");
      if (exit_ == "initialize")
        std::_Exit(3);
    } else if (method == "initialized") {
      // The handshake is complete.
    } else if (method == "thread/start") {
      emit(R"({"id":)" + id + R"(,"result":{"thread":)" + thread_json()
           + R"(,"model":"fake-codex-model","modelProvider":"fake",)"
             R"("cwd":"/nonexistent","approvalPolicy":"never",)"
             R"("sandbox":{"type":"readOnly"},"reasoningEffort":null}})");
      emit(R"({"method":"thread/started","params":{"thread":)" + thread_json()
           + "}}");
    } else if (method == "turn/start") {
      start_turn(id, input_texts(params));
    } else if (method == "turn/steer") {
      steer(id, params);
    } else if (method == "turn/interrupt") {
      if (!turn_ || str(params, "turnId") != turn_->id) {
        error(id, -32600, "no such active turn");
        return;
      }
      emit(R"({"id":)" + id + R"(,"result":{}})");
      finish_turn("interrupted");
    } else if (!id.empty()) {
      error(id, -32601, "method not found: " + method);
    }
  }

  std::string thread_json() const {
    return R"({"id":)" + json::quote(thread_id_)
           + R"(,"preview":"","ephemeral":false,"modelProvider":"fake",)"
             R"("createdAt":1730910000,"updatedAt":1730910000,)"
             R"("status":{"type":"idle"},"path":null,"cwd":"/nonexistent",)"
             R"("cliVersion":"0.1.0","source":"appServer","gitInfo":null,)"
             R"("turns":[]})";
  }

  std::string turn_json(const std::string& status,
                        const std::string& error = "null") const {
    return R"({"id":)" + json::quote(turn_->id) + R"(,"items":[],"status":)"
           + json::quote(status) + R"(,"error":)" + error + "}";
  }

  std::string ids() const {
    return R"("threadId":)" + json::quote(thread_id_) + R"(,"turnId":)"
           + json::quote(turn_->id);
  }

  void error(const std::string& id, int code, const std::string& message) {
    emit(R"({"id":)" + id + R"(,"error":{"code":)" + std::to_string(code)
         + R"(,"message":)" + json::quote(message) + "}}");
  }

  void start_turn(const std::string& id, std::vector<std::string> texts) {
    if (turn_) {
      error(id, -32600, "a turn is already running");
      return;
    }
    turn_state t;
    t.id = "turn_" + std::to_string(++turns_);
    t.texts = std::move(texts);
    t.ends = clock_type::now() + std::chrono::milliseconds{turn_ms_};
    turn_ = std::move(t);
    emit(R"({"id":)" + id + R"(,"result":{"turn":)" + turn_json("inProgress")
         + "}}");
    emit(R"({"method":"turn/started","params":{"threadId":)"
         + json::quote(thread_id_) + R"(,"turn":)" + turn_json("inProgress")
         + "}}");
    std::string content = "[";
    for (size_t i = 0; i < turn_->texts.size(); ++i)
      content += std::string{i > 0 ? "," : ""} + R"({"type":"text","text":)"
                 + json::quote(turn_->texts[i]) + "}";
    content += "]";
    auto user = R"({"type":"userMessage","id":)"
                + json::quote(turn_->id + "_user") + R"(,"content":)" + content
                + "}";
    emit(R"({"method":"item/started","params":{)" + ids() + R"(,"item":)" + user
         + "}}");
    emit(R"({"method":"item/completed","params":{)" + ids() + R"(,"item":)"
         + user + "}}");
    emit(R"({"method":"item/started","params":{)" + ids()
         + R"(,"item":{"type":"agentMessage","id":)"
         + json::quote(turn_->id + "_agent") + R"(,"text":""}}})");
    delta("echo: ");
    if (exit_ == "turn")
      std::_Exit(3);
    if (approval_) {
      turn_->approval = ++server_requests_;
      emit(
        R"({"method":"item/commandExecution/requestApproval","id":)"
        + std::to_string(*turn_->approval) + R"(,"params":{)" + ids()
        + R"(,"itemId":"call_1","startedAtMs":1730910001000,)"
          R"("reason":"fake","command":"rm -rf build","cwd":"/nonexistent"}})");
    }
  }

  void steer(const std::string& id, const rapidjson::Value& params) {
    auto expected = str(params, "expectedTurnId");
    if (!turn_ || expected != turn_->id) {
      error(id, -32600,
            "expected active turn id " + expected + " but found "
              + (turn_ ? turn_->id : std::string{"none"}));
      return;
    }
    for (auto& t : input_texts(params))
      turn_->texts.push_back(t);
    emit(R"({"id":)" + id + R"(,"result":{"turnId":)" + json::quote(turn_->id)
         + "}}");
  }

  void on_answer(int64_t id, const rapidjson::Document& doc) {
    if (!turn_ || turn_->approval != id)
      return;
    turn_->approval.reset();
    auto r = doc.FindMember("result");
    auto decision = r != doc.MemberEnd() ? str(r->value, "decision")
                                         : std::string{"error"};
    turn_->texts.push_back("approval: " + decision);
    emit(R"({"method":"serverRequest/resolved","params":{"threadId":)"
         + json::quote(thread_id_) + R"(,"requestId":)" + std::to_string(id)
         + "}}");
  }

  void delta(const std::string& text) {
    emit(R"({"method":"item/agentMessage/delta","params":{)" + ids()
         + R"(,"itemId":)" + json::quote(turn_->id + "_agent") + R"(,"delta":)"
         + json::quote(text) + "}}");
  }

  void finish_turn(const std::string& status) {
    if (status == "completed" && fail_) {
      std::string err = R"({"message":"fake failure","codexErrorInfo":)"
                        R"("other","additionalDetails":null})";
      emit(R"({"method":"error","params":{"error":)" + err
           + R"(,"willRetry":false,)" + ids() + "}}");
      emit(R"({"method":"turn/completed","params":{"threadId":)"
           + json::quote(thread_id_) + R"(,"turn":)" + turn_json("failed", err)
           + "}}");
      turn_.reset();
      return;
    }
    if (status == "completed") {
      std::string reply = "echo: ";
      for (size_t i = 0; i < turn_->texts.size(); ++i) {
        auto part = (i > 0 ? " | " : "") + turn_->texts[i];
        delta(part);
        reply += part;
      }
      emit(R"({"method":"item/completed","params":{)" + ids()
           + R"(,"item":{"type":"agentMessage","id":)"
           + json::quote(turn_->id + "_agent") + R"(,"text":)"
           + json::quote(reply) + "}}}");
      usage_counts last;
      for (auto& t : turn_->texts)
        last.input += t.size();
      last.output = reply.size();
      total_.input += last.input;
      total_.output += last.output;
      emit(R"({"method":"thread/tokenUsage/updated","params":{)" + ids()
           + R"(,"tokenUsage":{"total":)" + total_.json() + R"(,"last":)"
           + last.json() + R"(,"modelContextWindow":272000}}})");
    }
    emit(R"({"method":"turn/completed","params":{"threadId":)"
         + json::quote(thread_id_) + R"(,"turn":)" + turn_json(status) + "}}");
    turn_.reset();
  }

  std::string thread_id_;
  int turn_ms_;
  bool fail_;
  std::string exit_;
  bool approval_;
  std::ofstream log_;
  std::optional<turn_state> turn_;
  int turns_ = 0;
  int64_t server_requests_ = -1;
  usage_counts total_;
};

/// FAKE_CODEX_PIDFILE: a sleeping child in our process group, and both
/// pids in the file (written whole, via rename).
void start_tool_child() {
  auto path = env_or("FAKE_CODEX_PIDFILE", "");
  if (path.empty())
    return;
  pid_t child = ::fork();
  if (child == 0) {
    for (;;)
      ::pause();
  }
  {
    std::ofstream out{path + ".tmp"};
    out << ::getpid() << "\n" << child << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

} // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);
  if (env_or("FAKE_CODEX_IGNORE_TERM", "") == "1")
    ::signal(SIGTERM, SIG_IGN); // inherited by the child
  start_tool_child();
  fake_server server;
  return server.run();
}
