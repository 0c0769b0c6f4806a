#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/claude_stream.hpp"
#include "runtime/json.hpp"
#include "runtime/subprocess.hpp"

using namespace std::chrono_literals;
using butlers::claude_event;
using butlers::claude_event_kind;
using butlers::parse_claude_line;

namespace {

const std::string fixtures = BUTLERS_SOURCE_DIR "/test/fixtures/claude/";

std::vector<std::string> lines_of(const std::string& name) {
  std::ifstream in{fixtures + name};
  EXPECT_TRUE(in.good()) << name;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

std::vector<claude_event> parse_all(const std::vector<std::string>& lines) {
  std::vector<claude_event> out;
  for (auto& l : lines)
    out.push_back(parse_claude_line(l));
  return out;
}

std::vector<claude_event> of_kind(const std::vector<claude_event>& evs,
                                  claude_event_kind kind) {
  std::vector<claude_event> out;
  for (auto& e : evs)
    if (e.kind == kind)
      out.push_back(e);
  return out;
}

} // namespace

TEST(claude_stream, a_recorded_run_with_partial_messages) {
  auto evs = parse_all(lines_of("partial_messages.jsonl"));
  ASSERT_EQ(evs.size(), 9u);
  EXPECT_EQ(evs[0].kind, claude_event_kind::init);
  EXPECT_EQ(evs[0].model, "claude-sonnet-4-20250514");
  EXPECT_EQ(evs[0].session_id, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  auto deltas = of_kind(evs, claude_event_kind::text_delta);
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].text, "I see");
  // message_start, content_block_start/stop, message_delta, message_stop.
  EXPECT_EQ(of_kind(evs, claude_event_kind::ignored).size(), 5u);
  auto assistant = of_kind(evs, claude_event_kind::assistant);
  ASSERT_EQ(assistant.size(), 1u);
  EXPECT_EQ(assistant[0].text.compare(0, 14, "I see that the"), 0);
  EXPECT_TRUE(assistant[0].tools.empty());
  auto& r = evs.back();
  ASSERT_EQ(r.kind, claude_event_kind::result);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.subtype, "success");
  EXPECT_EQ(r.text, assistant[0].text);
  EXPECT_EQ(r.tokens.input, 4u);
  EXPECT_EQ(r.tokens.output, 88u);
  EXPECT_EQ(r.tokens.cache_read, 17801u);
  EXPECT_EQ(r.tokens.cache_write, 0u);
  EXPECT_TRUE(r.cost_known);
  EXPECT_DOUBLE_EQ(r.cost_usd, 0.0068195);
  EXPECT_EQ(r.num_turns, 1u);
}

TEST(claude_stream, a_recorded_run_with_a_tool_call) {
  auto evs = parse_all(lines_of("tool_use.jsonl"));
  ASSERT_EQ(evs.size(), 6u);
  EXPECT_EQ(evs[0].model, "claude-opus-4");
  auto assistant = of_kind(evs, claude_event_kind::assistant);
  ASSERT_EQ(assistant.size(), 3u);
  EXPECT_EQ(assistant[0].text, "Reading the file first.");
  EXPECT_EQ(assistant[0].model, "claude-opus-4");
  EXPECT_EQ(assistant[1].text, "");
  EXPECT_EQ(assistant[1].tools, std::vector<std::string>{"Read"});
  EXPECT_EQ(assistant[2].text, "The entry point is empty.");
  // The tool result comes back as a user line, which we do not act on.
  EXPECT_EQ(evs[3].kind, claude_event_kind::ignored);
  auto& r = evs.back();
  ASSERT_EQ(r.kind, claude_event_kind::result);
  EXPECT_EQ(r.text, "The entry point is empty.");
  EXPECT_EQ(r.tokens.input, 9u);
  EXPECT_EQ(r.tokens.output, 77u);
  EXPECT_EQ(r.tokens.cache_read, 27700u);
  EXPECT_EQ(r.tokens.cache_write, 1200u);
  EXPECT_DOUBLE_EQ(r.cost_usd, 0.0412);
  EXPECT_EQ(r.num_turns, 3u);
}

TEST(claude_stream, error_results_carry_the_clis_words) {
  auto evs = parse_all(lines_of("errors.jsonl"));
  ASSERT_EQ(evs.size(), 3u);
  for (auto& e : evs) {
    EXPECT_EQ(e.kind, claude_event_kind::result);
    EXPECT_TRUE(e.is_error);
  }
  EXPECT_EQ(evs[0].error, "error_max_turns");
  EXPECT_EQ(evs[0].num_turns, 3u);
  EXPECT_DOUBLE_EQ(evs[0].cost_usd, 0.02);
  EXPECT_EQ(evs[1].error, "error_during_execution: Invalid API key provided");
  EXPECT_FALSE(evs[1].cost_known);
  EXPECT_EQ(evs[2].error, "You have hit your weekly limit");
  // An error subtype is a failure even when is_error says false.
  auto e = parse_claude_line(
    R"({"type":"result","subtype":"error_max_budget_usd","is_error":false,"errors":["over budget"]})");
  EXPECT_TRUE(e.is_error);
  EXPECT_EQ(e.error, "error_max_budget_usd: over budget");
}

TEST(claude_stream, the_user_message_has_the_sdks_shape) {
  auto line = butlers::claude_user_message("Hello, Claude!");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  rapidjson::Document ours;
  ASSERT_FALSE(butlers::json::parse(line.substr(0, line.size() - 1), ours));
  rapidjson::Document fixture;
  ASSERT_FALSE(
    butlers::json::parse(lines_of("user_message.jsonl").at(1), fixture));
  // Type and message as in the fixture, plus the SDK's envelope fields.
  EXPECT_EQ(ours["type"], fixture["type"]);
  EXPECT_EQ(ours["message"], fixture["message"]);
  EXPECT_TRUE(ours["parent_tool_use_id"].IsNull());
  EXPECT_STREQ(ours["session_id"].GetString(), "default");
}

TEST(claude_stream, the_user_message_is_one_line_whatever_the_text) {
  std::string text = "line 1\nline \"2\"\t\\ end\r\n{\"type\":\"result\"}";
  auto line = butlers::claude_user_message(text);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  rapidjson::Document doc;
  ASSERT_FALSE(butlers::json::parse(line.substr(0, line.size() - 1), doc));
  EXPECT_EQ(std::string{doc["message"]["content"][0]["text"].GetString()},
            text);
}

TEST(claude_stream, lines_that_are_not_events) {
  EXPECT_EQ(parse_claude_line("").kind, claude_event_kind::ignored);
  EXPECT_EQ(parse_claude_line("   ").kind, claude_event_kind::ignored);
  auto bad = parse_claude_line("Reading prompt from stdin...");
  EXPECT_EQ(bad.kind, claude_event_kind::invalid);
  EXPECT_FALSE(bad.error.empty());
  EXPECT_EQ(parse_claude_line("[1,2]").kind, claude_event_kind::invalid);
  EXPECT_EQ(parse_claude_line(R"({"no":"type"})").kind,
            claude_event_kind::invalid);
  EXPECT_EQ(parse_claude_line(R"({"type":"rate_limit_event"})").kind,
            claude_event_kind::ignored);
  EXPECT_EQ(parse_claude_line(R"({"type":"system","subtype":"api_retry"})")
              .kind,
            claude_event_kind::ignored);
  // Tool input streams as input_json_delta: not text.
  EXPECT_EQ(
    parse_claude_line(
      R"({"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}})")
      .kind,
    claude_event_kind::ignored);
  // Wrong types inside are tolerated.
  auto r = parse_claude_line(
    R"({"type":"result","subtype":"success","result":"ok","usage":{"input_tokens":"x","output_tokens":-3},"total_cost_usd":"free","num_turns":2.0})");
  EXPECT_EQ(r.kind, claude_event_kind::result);
  EXPECT_EQ(r.tokens.input, 0u);
  EXPECT_EQ(r.tokens.output, 0u);
  EXPECT_FALSE(r.cost_known);
  EXPECT_EQ(r.num_turns, 2u);
}

TEST(claude_stream, default_command_streams_both_ways_with_partial_text) {
  auto cmd = butlers::claude_stream_command();
  std::string joined;
  for (auto& a : cmd)
    joined += a + " ";
  EXPECT_EQ(joined,
            "claude -p --input-format stream-json --output-format stream-json "
            "--verbose --include-partial-messages ");
}

// The fake the integration tests run speaks what the parser reads: it
// echoes each message in deltas, an assistant line and a result whose cost
// is the running total.
TEST(claude_stream, the_fake_answers_each_message_in_the_protocol) {
  std::vector<claude_event> evs;
  butlers::subprocess_options opts;
  opts.argv = {BUTLERS_FAKE_CLAUDE};
  opts.timeout = 20s;
  opts.keep_stdin_open = true;
  opts.stdin_data = butlers::claude_user_message("first");
  butlers::subprocess* self = nullptr;
  opts.on_stdout_line = [&](std::string_view line) {
    evs.push_back(parse_claude_line(line));
    if (evs.back().kind != claude_event_kind::result)
      return;
    if (of_kind(evs, claude_event_kind::result).size() == 1)
      self->write_stdin(butlers::claude_user_message("second ünïcode"));
    else
      self->close_stdin();
  };
  butlers::subprocess proc{std::move(opts)};
  self = &proc;
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, butlers::subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(of_kind(evs, claude_event_kind::invalid).size(), 0u);
  auto inits = of_kind(evs, claude_event_kind::init);
  ASSERT_EQ(inits.size(), 1u);
  EXPECT_EQ(inits[0].model, "fake-claude-model");
  std::string streamed;
  for (auto& d : of_kind(evs, claude_event_kind::text_delta))
    streamed += d.text;
  EXPECT_EQ(streamed, "echo: firstecho: second ünïcode");
  auto results = of_kind(evs, claude_event_kind::result);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].text, "echo: first");
  EXPECT_EQ(results[1].text, "echo: second ünïcode");
  EXPECT_EQ(results[1].tokens.cache_write, 20u);
  EXPECT_DOUBLE_EQ(results[0].cost_usd, 0.0125);
  EXPECT_DOUBLE_EQ(results[1].cost_usd, 0.025);
}
