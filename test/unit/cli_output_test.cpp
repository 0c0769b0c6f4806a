#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cli_output.hpp"
#include "runtime/subprocess.hpp"

using namespace std::chrono_literals;
using butlers::cli_answer;
using butlers::cli_family;
using butlers::parse_cli_output;

namespace {

struct parse_case {
  const char* name;
  cli_family family;
  std::string out;
  bool ok;
  std::string text_or_error; ///< the answer if ok, the error otherwise
};

void PrintTo(const parse_case& c, std::ostream* os) {
  *os << c.name;
}

const std::string claude_ok
  = R"({"type":"result","subtype":"success","is_error":false,)"
    R"("duration_ms":2361,"num_turns":1,"result":"Hello \"you\"\n",)"
    R"("session_id":"abc","total_cost_usd":0.0123,"usage":{"input_tokens":4}})";

const std::string codex_ok = R"(Reading prompt from stdin...
{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Plan**"}}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls","aggregated_output":"","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"first"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"final answer"}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
)";

const std::string opencode_events = R"(
{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_1","part":{"id":"prt_1","type":"step-start"}}
{"type":"text","timestamp":1767036059400,"sessionID":"ses_1","part":{"id":"prt_2","type":"text","text":"Let me look."}}
{"type":"tool_use","timestamp":1767036059500,"sessionID":"ses_1","part":{"id":"prt_3","type":"tool","tool":"bash","state":{"status":"completed"}}}
{"type":"text","timestamp":1767036059600,"sessionID":"ses_1","part":{"id":"prt_4","type":"text","text":"  It is 42.\n"}}
{"type":"step_finish","timestamp":1767036059700,"sessionID":"ses_1","part":{"id":"prt_5","type":"step-finish","reason":"stop"}}
)";

std::vector<parse_case> cases() {
  auto C = cli_family::claude;
  auto X = cli_family::codex;
  auto O = cli_family::opencode;
  return {
    // -- claude
    {"claude_success", C, claude_ok, true, "Hello \"you\"\n"},
    {"claude_surrounded_by_blanks", C, "\n  " + claude_ok + "\n\n", true,
     "Hello \"you\"\n"},
    {"claude_is_error", C,
     R"({"type":"result","subtype":"success","is_error":true,)"
     R"("result":"Invalid API key · Please run /login"})",
     false, "Invalid API key · Please run /login"},
    {"claude_error_max_turns", C,
     R"({"type":"result","subtype":"error_max_turns","is_error":false,)"
     R"("num_turns":3,"session_id":"s"})",
     false, "error_max_turns"},
    {"claude_error_with_errors_array", C,
     R"({"type":"result","subtype":"error_during_execution",)"
     R"("is_error":false,"errors":["boom",7,"bang"]})",
     false, "error_during_execution: boom; bang"},
    {"claude_verbose_array", C,
     R"([{"type":"system","subtype":"init"},)"
     R"({"type":"assistant","message":{"content":[]}},)"
       + claude_ok + "]",
     true, "Hello \"you\"\n"},
    {"claude_stream_json_lines", C,
     R"({"type":"system","subtype":"init","session_id":"s"})"
     "\n"
       + claude_ok + "\n",
     true, "Hello \"you\"\n"},
    {"claude_warning_line_before_json", C,
     "warning: something odd\n" + claude_ok, true, "Hello \"you\"\n"},
    {"claude_no_result_text", C,
     R"({"type":"result","subtype":"success","is_error":false})", false,
     "result message without a \"result\" text"},
    {"claude_result_not_a_string", C,
     R"({"type":"result","subtype":"success","result":42})", false,
     "result message without a \"result\" text"},
    {"claude_empty_result", C,
     R"({"type":"result","subtype":"success","result":"  \n"})", false,
     "empty answer"},
    {"claude_wrong_type", C, R"({"type":"assistant"})", false,
     "expected a result message, got type \"assistant\""},
    {"claude_array_without_result", C, R"([{"type":"system"}, 1, null])", false,
     "no result message in the output array"},
    {"claude_scalar", C, "42", false, "expected a JSON object: 42"},
    {"claude_empty", C, "", false, "empty output"},
    {"claude_blank", C, " \n\t ", false, "empty output"},
    {"claude_plain_text_error", C, "Invalid API key · Please run /login\n",
     false,
     "output is not JSON (parse error at offset 0: Invalid value.): "
     "Invalid API key · Please run /login"},
    {"claude_truncated", C, claude_ok.substr(0, 60), false, ""},
    // -- codex
    {"codex_last_agent_message_wins", X, codex_ok, true, "final answer"},
    {"codex_item_type_spelling", X,
     R"({"type":"item.completed","item":{"id":"item_3",)"
     R"("item_type":"assistant_message","text":"alt"}})",
     true, "alt"},
    {"codex_legacy_msg_shape", X,
     R"({"id":"0","msg":{"type":"task_started"}})"
     "\n"
     R"({"id":"0","msg":{"type":"agent_message","message":"old style"}})"
     "\n",
     true, "old style"},
    {"codex_legacy_task_complete", X,
     R"({"id":"0","msg":{"type":"task_complete",)"
     R"("last_agent_message":"from task_complete"}})",
     true, "from task_complete"},
    {"codex_legacy_error", X,
     R"({"id":"0","msg":{"type":"agent_message","message":"partial"}})"
     "\n"
     R"({"id":"0","msg":{"type":"error","message":"quota exceeded"}})",
     false, "quota exceeded"},
    {"codex_error_event", X,
     R"({"type":"turn.started"})"
     "\n"
     R"({"type":"error","message":"stream disconnected"})",
     false, "stream disconnected"},
    {"codex_turn_failed", X,
     R"({"type":"item.completed","item":{"type":"agent_message","text":"x"}})"
     "\n"
     R"({"type":"turn.failed","error":{"message":"401 Unauthorized"}})",
     false, "401 Unauthorized"},
    {"codex_turn_failed_without_message", X, R"({"type":"turn.failed"})", false,
     "codex turn failed"},
    {"codex_error_then_completed_turn", X,
     R"({"type":"error","message":"Reconnecting... 1/5"})"
     "\n"
     R"({"type":"item.completed","item":{"type":"agent_message","text":"ok"}})"
     "\n"
     R"({"type":"turn.completed","usage":{}})",
     true, "ok"},
    {"codex_error_item_is_not_fatal", X,
     R"({"type":"item.completed","item":{"type":"error","message":"w"}})"
     "\n"
     R"({"type":"item.completed","item":{"type":"agent_message","text":"y"}})",
     true, "y"},
    {"codex_no_agent_message", X,
     R"({"type":"thread.started","thread_id":"t"})"
     "\n"
     R"({"type":"turn.completed","usage":{}})",
     false, "no agent message in the output"},
    {"codex_not_json", X, "Error: not logged in\n", false,
     "no JSON events in the output: Error: not logged in"},
    {"codex_empty", X, "", false, "empty output"},
    {"codex_truncated_last_line", X, codex_ok.substr(0, codex_ok.size() - 150),
     true, "first"},
    {"codex_crlf_lines", X,
     R"({"type":"item.completed","item":{"type":"agent_message","text":"w"}})"
     "\r\n",
     true, "w"},
    // -- opencode
    {"opencode_plain", O, "\n  The answer is 42.\n\n", true,
     "The answer is 42."},
    {"opencode_plain_json_looking_answer", O, "{\"a\": 1}\n", true,
     "{\"a\": 1}"},
    {"opencode_events_last_text", O, opencode_events, true, "It is 42."},
    {"opencode_error_event", O,
     R"({"type":"step_start","part":{}})"
     "\n"
     R"({"type":"error","error":{"name":"ProviderAuthError",)"
     R"("data":{"message":"no key"}}})",
     false, "no key"},
    {"opencode_error_name_only", O,
     R"({"type":"error","error":{"name":"MessageAbortedError"}})", false,
     "MessageAbortedError"},
    {"opencode_events_without_text", O,
     R"({"type":"step_start","part":{}})"
     "\n"
     R"({"type":"step_finish","part":{}})",
     false, "no text in the event output"},
    {"opencode_empty", O, "", false, "empty output"},
    {"opencode_blank", O, "  \n ", false, "empty output"},
  };
}

class cli_output_table : public ::testing::TestWithParam<parse_case> {};

} // namespace

TEST_P(cli_output_table, parses) {
  auto& c = GetParam();
  auto got = parse_cli_output(c.family, c.out);
  EXPECT_EQ(got.ok, c.ok) << got.error;
  if (c.ok) {
    EXPECT_EQ(got.text, c.text_or_error);
    EXPECT_TRUE(got.error.empty()) << got.error;
  } else {
    EXPECT_TRUE(got.text.empty());
    EXPECT_FALSE(got.error.empty());
    if (!c.text_or_error.empty()) {
      EXPECT_EQ(got.error, c.text_or_error);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(shapes, cli_output_table, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.name;
                         });

TEST(cli_output, every_prefix_of_valid_output_is_handled) {
  // Truncation anywhere (a CLI killed mid-write) must neither crash nor
  // produce an empty "answer".
  for (auto [family, out] : {std::pair{cli_family::claude, claude_ok},
                             std::pair{cli_family::codex, codex_ok},
                             std::pair{cli_family::opencode, opencode_events}})
    for (size_t n = 0; n <= out.size(); ++n) {
      auto got = parse_cli_output(family, std::string_view{out}.substr(0, n));
      EXPECT_TRUE(got.ok ? !got.text.empty() : !got.error.empty())
        << to_string(family) << " cut at " << n;
    }
}

TEST(cli_output, random_bytes_and_mutations_are_handled) {
  std::mt19937 rng{20240601};
  const std::string alphabet = "{}[]\":,\\ \n\rtypeulmsgx0123456789\xff\xc3";
  std::vector<std::string> seeds{claude_ok, codex_ok, opencode_events};
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    if (i % 2 == 0) {
      auto len = rng() % 200;
      for (size_t k = 0; k < len; ++k)
        s += alphabet[rng() % alphabet.size()];
    } else {
      s = seeds[rng() % seeds.size()];
      for (int k = 0; k < 5; ++k)
        s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
    }
    for (auto family :
         {cli_family::claude, cli_family::codex, cli_family::opencode}) {
      auto got = parse_cli_output(family, s);
      EXPECT_TRUE(got.ok ? !got.text.empty() : !got.error.empty());
    }
  }
}

TEST(cli_output, deep_nesting_is_rejected_not_recursed) {
  std::string deep = "{\"type\":\"result\",\"x\":" + std::string(100000, '[')
                     + std::string(100000, ']') + "}";
  EXPECT_FALSE(parse_cli_output(cli_family::claude, deep).ok);
  EXPECT_FALSE(parse_cli_output(cli_family::codex, deep).ok);
  // Not an event line, so it is a plain-text answer.
  EXPECT_TRUE(parse_cli_output(cli_family::opencode, deep).ok);
}

TEST(cli_output, family_names_round_trip) {
  for (auto family :
       {cli_family::claude, cli_family::codex, cli_family::opencode})
    EXPECT_EQ(butlers::parse_enum<cli_family>(to_string(family)), family);
  EXPECT_FALSE(butlers::parse_enum<cli_family>("Claude"));
  EXPECT_FALSE(butlers::parse_enum<cli_family>(""));
  EXPECT_FALSE(butlers::parse_enum<cli_family>("gemini"));
}

TEST(cli_output, default_commands) {
  using v = std::vector<std::string>;
  EXPECT_EQ(butlers::default_command(cli_family::claude),
            (v{"claude", "-p", "--output-format", "json"}));
  EXPECT_EQ(butlers::default_command(cli_family::codex),
            (v{"codex", "exec", "--json"}));
  EXPECT_EQ(butlers::default_command(cli_family::opencode),
            (v{"opencode", "run"}));
}

// -- end to end: the fakes through subprocess and parser ----------------------

namespace {

const std::string fakes_dir = BUTLERS_SOURCE_DIR "/test/fakes";

/// Runs the family's fake with its default arguments (plus `extra`).
cli_answer run_fake(cli_family family, const std::string& prompt_on_stdin,
                    std::vector<std::string> extra = {},
                    std::vector<std::pair<std::string, std::string>> env = {}) {
  butlers::subprocess_options opts;
  opts.argv = butlers::default_command(family);
  opts.argv[0] = fakes_dir + "/fake-" + opts.argv[0];
  opts.argv.insert(opts.argv.end(), extra.begin(), extra.end());
  opts.stdin_data = prompt_on_stdin;
  opts.env = std::move(env);
  opts.timeout = 20s;
  butlers::subprocess proc{opts};
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, butlers::subprocess_outcome::exited) << res.error;
  return parse_cli_output(family, res.out);
}

} // namespace

TEST(cli_end_to_end, prompt_on_stdin) {
  const std::string prompt = "say \"hi\"\n\tback \\ now";
  for (auto family :
       {cli_family::claude, cli_family::codex, cli_family::opencode}) {
    auto got = run_fake(family, prompt);
    EXPECT_TRUE(got.ok) << to_string(family) << ": " << got.error;
    EXPECT_EQ(got.text, "answer: " + prompt) << to_string(family);
  }
}

TEST(cli_end_to_end, prompt_as_argument) {
  for (auto family :
       {cli_family::claude, cli_family::codex, cli_family::opencode}) {
    auto got = run_fake(family, "", {"what is 2+2?"});
    EXPECT_TRUE(got.ok) << to_string(family) << ": " << got.error;
    EXPECT_EQ(got.text, "answer: what is 2+2?") << to_string(family);
  }
}

TEST(cli_end_to_end, other_shapes) {
  auto legacy = run_fake(cli_family::codex, "old", {},
                         {{"FAKE_CLI_SHAPE", "legacy"}});
  EXPECT_TRUE(legacy.ok) << legacy.error;
  EXPECT_EQ(legacy.text, "answer: old");
  auto events = run_fake(cli_family::opencode, "evt", {"--format", "json"});
  EXPECT_TRUE(events.ok) << events.error;
  EXPECT_EQ(events.text, "answer: evt");
}

TEST(cli_end_to_end, errors_and_garbage_are_not_answers) {
  for (auto family :
       {cli_family::claude, cli_family::codex, cli_family::opencode}) {
    auto err = run_fake(family, "q", {}, {{"FAKE_CLI_MODE", "error"}});
    EXPECT_FALSE(err.ok) << to_string(family);
    if (family != cli_family::opencode) { // plain opencode: stderr only
      EXPECT_EQ(err.error, "fake error: q") << to_string(family);
    }
    auto garbage = run_fake(family, "q", {}, {{"FAKE_CLI_MODE", "garbage"}});
    // For plain opencode, any text is an answer.
    EXPECT_EQ(garbage.ok, family == cli_family::opencode) << to_string(family);
  }
  auto json_err = run_fake(cli_family::opencode, "q", {"--format", "json"},
                           {{"FAKE_CLI_MODE", "error"}});
  EXPECT_FALSE(json_err.ok);
  EXPECT_EQ(json_err.error, "fake error: q");
}
