// The `codex app-server` client (runtime/codex_app_server): its builders and
// parser against the documented exchanges in test/fixtures/codex/, each
// file replayed through `codex_conversation` line by line, and the fake
// server (butlers-fake-codex) checked against the same files.

#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/codex_app_server.hpp"
#include "runtime/json.hpp"
#include "runtime/subprocess.hpp"

namespace butlers {
namespace {

const std::string fixtures = BUTLERS_SOURCE_DIR "/test/fixtures/codex/";

struct fixture_line {
  /// '>' client to server, '<' server to client, '@' harness.
  char dir = 0;
  std::string body;
};

std::vector<fixture_line> load(const std::string& name) {
  std::ifstream in{fixtures + name};
  EXPECT_TRUE(in.good()) << name;
  std::vector<fixture_line> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    fixture_line f;
    f.dir = line[0];
    f.body = line.size() > 2 ? line.substr(2) : std::string{};
    if (f.dir == '@')
      f.body = line.substr(1);
    out.push_back(std::move(f));
  }
  return out;
}

/// The `n`th line of `name` going in direction `dir`.
std::string nth(const std::string& name, char dir, size_t n) {
  for (auto& l : load(name))
    if (l.dir == dir && n-- == 0)
      return l.body;
  ADD_FAILURE() << name << " has too few '" << dir << "' lines";
  return {};
}

::testing::AssertionResult same_json(const std::string& a,
                                     const std::string& b) {
  rapidjson::Document da;
  rapidjson::Document db;
  if (json::parse(a, da))
    return ::testing::AssertionFailure() << "not JSON: " << a;
  if (json::parse(b, db))
    return ::testing::AssertionFailure() << "not JSON: " << b;
  if (da != db)
    return ::testing::AssertionFailure() << a << "\n  differs from\n" << b;
  return ::testing::AssertionSuccess();
}

/// Everything a replay produced besides the writes (which it checks).
struct replayed {
  std::string deltas;
  std::vector<session_usage> usages;
  std::vector<steer_applied> applied;
  std::optional<adapter_result> done;
  size_t writes = 0;
};

/// Feeds the server's lines and the harness's events of `name` to a
/// conversation whose prompt is "Run tests"; every client line must be the
/// next line the conversation wrote.
replayed replay(const std::string& name) {
  codex_conversation conv{"Run tests", "0.1.0"};
  replayed r;
  std::deque<std::string> written;
  auto take = [&](codex_step& s) {
    for (auto& w : s.writes)
      written.push_back(w);
    r.deltas += s.delta;
    if (s.usage)
      r.usages.push_back(*s.usage);
    for (auto& a : s.applied)
      r.applied.push_back(a);
    if (s.done) {
      EXPECT_FALSE(r.done) << "done twice";
      r.done = s.done;
    }
  };
  codex_step first;
  conv.start(first);
  take(first);
  for (auto& l : load(name)) {
    codex_step s;
    if (l.dir == '>') {
      EXPECT_FALSE(written.empty())
        << "expected the client to write " << l.body;
      if (written.empty())
        continue;
      EXPECT_TRUE(same_json(written.front(), l.body));
      written.pop_front();
      ++r.writes;
      continue;
    }
    if (l.dir == '<') {
      conv.on_line(l.body, s);
    } else if (l.body.rfind("input ", 0) == 0) {
      rapidjson::Document doc;
      EXPECT_FALSE(json::parse(l.body.substr(6), doc)) << l.body;
      steer_input in;
      in.message_id = doc["message_id"].GetString();
      in.text = doc["text"].GetString();
      conv.on_input({in}, s);
    } else if (l.body == "interrupt") {
      conv.interrupt(s);
    } else {
      ADD_FAILURE() << "unknown harness line @" << l.body;
    }
    take(s);
  }
  EXPECT_TRUE(written.empty())
    << "wrote more than the file shows: " << written.front();
  EXPECT_EQ(conv.finished(), r.done.has_value());
  return r;
}

// -- builders -----------------------------------------------------------------

TEST(CodexAppServer, BuildersWriteTheDocumentedMessages) {
  EXPECT_TRUE(
    same_json(codex_initialize(1, "0.1.0"), nth("run.jsonl", '>', 0)));
  EXPECT_TRUE(same_json(codex_initialized(), nth("run.jsonl", '>', 1)));
  EXPECT_TRUE(same_json(codex_thread_start(2), nth("run.jsonl", '>', 2)));
  EXPECT_TRUE(same_json(codex_turn_start(3, "thr_123", {"Run tests"}),
                        nth("run.jsonl", '>', 3)));
  EXPECT_TRUE(same_json(codex_turn_steer(4, "thr_123", "turn_456",
                                         {"Actually focus on failing tests "
                                          "first."}),
                        nth("steer.jsonl", '>', 4)));
  EXPECT_TRUE(same_json(codex_turn_interrupt(4, "thr_123", "turn_456"),
                        nth("interrupt.jsonl", '>', 4)));
}

TEST(CodexAppServer, ServerRequestsAreDeclinedOrRefusedNeverLeftHanging) {
  EXPECT_TRUE(
    same_json(codex_decline("0", "item/commandExecution/requestApproval"),
              nth("approval.jsonl", '>', 4)));
  EXPECT_TRUE(same_json(codex_decline("1", "item/fileChange/requestApproval"),
                        nth("approval.jsonl", '>', 5)));
  EXPECT_TRUE(same_json(codex_decline("2", "mcpServer/elicitation/request"),
                        nth("approval.jsonl", '>', 6)));
  EXPECT_TRUE(same_json(codex_decline("3", "account/chatgptAuthTokens/refresh"),
                        nth("approval.jsonl", '>', 7)));
  EXPECT_TRUE(same_json(codex_decline(R"("req-7")", "execCommandApproval"),
                        R"({"id":"req-7","result":{"decision":"denied"}})"));
  EXPECT_TRUE(same_json(codex_decline("9", "item/tool/call"),
                        R"({"id":9,"result":{"contentItems":[],)"
                        R"("success":false}})"));
}

TEST(CodexAppServer, NoMessageCarriesAJsonrpcMember) {
  for (auto& line :
       {codex_initialize(1, "x"), codex_initialized(), codex_thread_start(2),
        codex_turn_start(3, "t", {"a"}), codex_turn_steer(4, "t", "u", {"b"}),
        codex_turn_interrupt(5, "t", "u"),
        codex_decline("6", "item/fileChange/requestApproval")})
    EXPECT_EQ(line.find("jsonrpc"), std::string::npos) << line;
}

TEST(CodexAppServer, TextIsEscapedIntoTheInputItems) {
  auto line = codex_turn_start(3, "thr", {"say \"hi\"\nthen {stop}"});
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one message, one line";
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(line, doc));
  EXPECT_STREQ(doc["params"]["input"][0]["text"].GetString(),
               "say \"hi\"\nthen {stop}");
}

// -- parser -------------------------------------------------------------------

TEST(CodexAppServer, ParserReadsResponsesAndNotifications) {
  auto thread = parse_codex_line(nth("run.jsonl", '<', 1));
  EXPECT_EQ(thread.kind, codex_message_kind::response);
  EXPECT_EQ(thread.number, 2);
  EXPECT_EQ(thread.thread_id, "thr_123");
  EXPECT_EQ(thread.model, "gpt-5.1-codex");
  auto turn = parse_codex_line(nth("run.jsonl", '<', 3));
  EXPECT_EQ(turn.turn_id, "turn_456");
  EXPECT_EQ(turn.status, "inProgress");
  auto delta = parse_codex_line(nth("run.jsonl", '<', 8));
  EXPECT_EQ(delta.kind, codex_message_kind::notification);
  EXPECT_EQ(delta.method, "item/agentMessage/delta");
  EXPECT_EQ(delta.item_id, "item_2");
  EXPECT_EQ(delta.text, "All tests ");
  auto item = parse_codex_line(nth("run.jsonl", '<', 10));
  EXPECT_EQ(item.item_type, "agentMessage");
  EXPECT_EQ(item.text, "All tests pass.");
  auto usage = parse_codex_line(nth("run.jsonl", '<', 11));
  ASSERT_TRUE(usage.usage);
  EXPECT_EQ(usage.usage->total, 1234u);
  EXPECT_EQ(usage.usage->input, 1200u);
  EXPECT_EQ(usage.usage->cached_input, 1000u);
  EXPECT_EQ(usage.usage->output, 34u);
  EXPECT_EQ(usage.usage->reasoning_output, 10u);
  auto done = parse_codex_line(nth("run.jsonl", '<', 12));
  EXPECT_EQ(done.method, "turn/completed");
  EXPECT_EQ(done.turn_id, "turn_456");
  EXPECT_EQ(done.status, "completed");
}

TEST(CodexAppServer, ParserReadsErrorsAndServerRequests) {
  auto refused = parse_codex_line(nth("steer.jsonl", '<', 8));
  EXPECT_EQ(refused.kind, codex_message_kind::error_response);
  EXPECT_EQ(refused.number, 5);
  EXPECT_EQ(refused.code, -32600);
  EXPECT_NE(refused.error.find("turn_456"), std::string::npos);
  auto approval = parse_codex_line(nth("approval.jsonl", '<', 4));
  EXPECT_EQ(approval.kind, codex_message_kind::request);
  EXPECT_EQ(approval.id, "0");
  EXPECT_EQ(approval.method, "item/commandExecution/requestApproval");
  auto retried = parse_codex_line(nth("failed.jsonl", '<', 3));
  EXPECT_EQ(retried.method, "error");
  EXPECT_TRUE(retried.will_retry);
  auto final_error = parse_codex_line(nth("failed.jsonl", '<', 4));
  EXPECT_FALSE(final_error.will_retry);
  EXPECT_EQ(final_error.error,
            "Quota exceeded. Check your plan and billing details.");
  auto failed = parse_codex_line(nth("failed.jsonl", '<', 5));
  EXPECT_EQ(failed.status, "failed");
  EXPECT_EQ(failed.error, final_error.error);
}

TEST(CodexAppServer, ParserSaysWhatIsWrongWithLinesItCannotRead) {
  for (const std::string& line :
       std::vector<std::string>{"", "Reading prompt from stdin...", "[1,2]",
                                R"({"params":{}})", R"({"id":1})",
                                "{\"id\":1,\"result\":"
                                  + std::string(300, '[')}) {
    auto m = parse_codex_line(line);
    EXPECT_EQ(m.kind, codex_message_kind::invalid) << line;
    EXPECT_FALSE(m.error.empty()) << line;
  }
}

// -- conversation -------------------------------------------------------------

TEST(CodexAppServer, ARunIsOneTurnWhenNoInputArrives) {
  auto r = replay("run.jsonl");
  EXPECT_EQ(r.writes, 4u);
  EXPECT_EQ(r.deltas, "All tests pass.");
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.done->ok) << r.done->message;
  EXPECT_EQ(r.done->text, "All tests pass.");
  EXPECT_TRUE(r.applied.empty());
  ASSERT_EQ(r.usages.size(), 1u);
  auto& u = r.done->usage;
  EXPECT_EQ(u.model, "gpt-5.1-codex");
  EXPECT_EQ(u.input_tokens, 200u) << "input tokens net of cache reads";
  EXPECT_EQ(u.cache_read_tokens, 1000u);
  EXPECT_EQ(u.output_tokens, 34u);
  EXPECT_EQ(u.calls, 1u);
}

TEST(CodexAppServer, SteersGoIntoTheRunningTurnAndRefusedOnesStartTheNext) {
  auto r = replay("steer.jsonl");
  ASSERT_EQ(r.applied.size(), 2u);
  EXPECT_EQ(r.applied[0].turn, 1u);
  ASSERT_EQ(r.applied[0].inputs.size(), 1u);
  EXPECT_EQ(r.applied[0].inputs[0].message_id, "m2");
  EXPECT_EQ(r.applied[1].turn, 2u) << "refused by the ended turn: next turn";
  ASSERT_EQ(r.applied[1].inputs.size(), 1u);
  EXPECT_EQ(r.applied[1].inputs[0].message_id, "m3");
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.done->ok);
  EXPECT_EQ(r.done->text, "Fixed both.");
  EXPECT_EQ(r.done->usage.calls, 2u);
  EXPECT_EQ(r.done->usage.input_tokens, 900u);
  EXPECT_EQ(r.done->usage.cache_read_tokens, 2000u);
  EXPECT_EQ(r.done->usage.output_tokens, 100u);
}

TEST(CodexAppServer, ApprovalsAreDeclinedAndTheTurnGoesOn) {
  auto r = replay("approval.jsonl");
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.done->ok);
  EXPECT_EQ(r.done->text, "I was not allowed to delete build/.");
}

TEST(CodexAppServer, AFailedTurnFailsTheRunWithTheServersMessage) {
  auto r = replay("failed.jsonl");
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.done->ok);
  EXPECT_EQ(r.done->error_class, "internal_error");
  EXPECT_NE(r.done->message.find("Quota exceeded"), std::string::npos)
    << r.done->message;
}

TEST(CodexAppServer, AnInterruptedTurnEndsTheRun) {
  auto r = replay("interrupt.jsonl");
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.done->ok);
  EXPECT_NE(r.done->message.find("interrupted"), std::string::npos);
}

TEST(CodexAppServer, InputBeforeTheFirstTurnJoinsIt) {
  codex_conversation conv{"the prompt", "1"};
  codex_step s;
  conv.start(s);
  steer_input in;
  in.message_id = "early";
  in.text = "and this";
  conv.on_input({in}, s);
  EXPECT_EQ(s.writes.size(), 1u) << "nothing to steer yet";
  conv.on_line(nth("run.jsonl", '<', 0), s);
  codex_step t;
  conv.on_line(nth("run.jsonl", '<', 1), t);
  ASSERT_EQ(t.writes.size(), 1u);
  EXPECT_TRUE(
    same_json(t.writes[0],
              codex_turn_start(3, "thr_123", {"the prompt", "and this"})));
  ASSERT_EQ(t.applied.size(), 1u);
  EXPECT_EQ(t.applied[0].turn, 1u);
  EXPECT_EQ(t.applied[0].inputs[0].message_id, "early");
}

TEST(CodexAppServer, InputWhileTheTurnStartsIsSteeredOnceItsIdIsKnown) {
  codex_conversation conv{"Run tests", "1"};
  codex_step s;
  conv.start(s);
  conv.on_line(nth("run.jsonl", '<', 0), s);
  conv.on_line(nth("run.jsonl", '<', 1), s);
  steer_input in;
  in.message_id = "m";
  in.text = "quick";
  codex_step t;
  conv.on_input({in}, t);
  EXPECT_TRUE(t.writes.empty());
  conv.on_line(nth("run.jsonl", '<', 3), t); // turn/start's answer
  ASSERT_EQ(t.writes.size(), 1u);
  EXPECT_TRUE(same_json(t.writes[0],
                        codex_turn_steer(4, "thr_123", "turn_456", {"quick"})));
}

TEST(CodexAppServer, TheServerEndingEarlyFailsTheRunOnce) {
  codex_conversation conv{"p", "1"};
  codex_step s;
  conv.start(s);
  conv.on_exit("exited with code 3", s);
  ASSERT_TRUE(s.done);
  EXPECT_FALSE(s.done->ok);
  EXPECT_NE(s.done->message.find("code 3"), std::string::npos);
  codex_step t;
  conv.on_exit("again", t);
  conv.on_line(nth("run.jsonl", '<', 0), t);
  EXPECT_FALSE(t.done);
  EXPECT_TRUE(t.writes.empty());
}

TEST(CodexAppServer, ARunWithoutAnAgentMessageFails) {
  codex_conversation conv{"Run tests", "1"};
  codex_step s;
  conv.start(s);
  for (size_t i : {0, 1, 3})
    conv.on_line(nth("run.jsonl", '<', i), s);
  conv.on_line(nth("run.jsonl", '<', 12), s);
  ASSERT_TRUE(s.done);
  EXPECT_FALSE(s.done->ok);
  EXPECT_NE(s.done->message.find("without an agent message"),
            std::string::npos);
}

TEST(CodexAppServer, OtherThreadsNotificationsAreIgnored) {
  codex_conversation conv{"Run tests", "1"};
  codex_step s;
  conv.start(s);
  for (size_t i : {0, 1, 3})
    conv.on_line(nth("run.jsonl", '<', i), s);
  codex_step t;
  conv.on_line(R"({"method":"item/agentMessage/delta","params":{"threadId":)"
               R"("thr_other","turnId":"x","itemId":"i","delta":"no"}})",
               t);
  conv.on_line(R"({"method":"turn/completed","params":{"threadId":)"
               R"("thr_other","turn":{"id":"turn_456","items":[],)"
               R"("status":"completed","error":null}}})",
               t);
  EXPECT_TRUE(t.delta.empty());
  EXPECT_FALSE(t.done);
  EXPECT_FALSE(conv.finished());
}

// -- the fake server ----------------------------------------------------------

/// Key paths of a JSON value ("params.turn.status"); arrays contribute
/// their first element's.
void key_paths(const rapidjson::Value& v, const std::string& prefix,
               std::set<std::string>& out) {
  if (v.IsObject()) {
    for (auto& m : v.GetObject()) {
      auto path = prefix + "." + m.name.GetString();
      out.insert(path);
      key_paths(m.value, path, out);
    }
  } else if (v.IsArray() && !v.Empty()) {
    key_paths(v[0], prefix + "[]", out);
  }
}

/// Which documented message a server line stands for: its method (with the
/// item type for item/*), or the request it answers.
std::string message_key(const rapidjson::Document& doc,
                        const std::map<int64_t, std::string>& requests) {
  if (doc.HasMember("method")) {
    std::string key = doc["method"].GetString();
    if (doc.HasMember("params") && doc["params"].HasMember("item"))
      key += "/" + std::string{doc["params"]["item"]["type"].GetString()};
    return key;
  }
  auto i = requests.find(doc["id"].GetInt64());
  return i == requests.end() ? "?" : "answer to " + i->second;
}

TEST(CodexAppServer, TheFakeServerWritesTheDocumentedShapes) {
  std::map<int64_t, std::string> requests;
  std::map<std::string, std::set<std::string>> documented;
  std::string input;
  for (auto& l : load("run.jsonl")) {
    rapidjson::Document doc;
    ASSERT_FALSE(json::parse(l.body, doc)) << l.body;
    if (l.dir == '>') {
      input += l.body + "\n";
      if (doc.HasMember("id"))
        requests[doc["id"].GetInt64()] = doc["method"].GetString();
    } else if (l.dir == '<') {
      key_paths(doc, "", documented[message_key(doc, requests)]);
    }
  }
  subprocess_options opts;
  opts.argv = {BUTLERS_FAKE_CODEX};
  opts.stdin_data = input;
  opts.env = {{"FAKE_CODEX_THREAD_ID", "thr_123"}};
  opts.timeout = std::chrono::seconds{20};
  subprocess proc{opts};
  auto r = proc.wait();
  ASSERT_EQ(r.outcome, subprocess_outcome::exited) << r.error << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> seen;
  size_t pos = 0;
  while (pos < r.out.size()) {
    auto nl = r.out.find('\n', pos);
    auto line = r.out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? r.out.size() : nl + 1;
    rapidjson::Document doc;
    ASSERT_FALSE(json::parse(line, doc)) << line;
    auto key = message_key(doc, requests);
    auto expected = documented.find(key);
    ASSERT_NE(expected, documented.end()) << "undocumented message " << line;
    std::set<std::string> paths;
    key_paths(doc, "", paths);
    EXPECT_EQ(paths, expected->second) << key << ": " << line;
    seen.insert(key);
  }
  for (auto& [key, paths] : documented)
    EXPECT_EQ(seen.count(key), 1u) << "the fake never wrote " << key;
}

} // namespace
} // namespace butlers
