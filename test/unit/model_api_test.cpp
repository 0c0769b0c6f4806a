// The HTTP model APIs without a node: the request of one streamed call
// (OpenAI chat completions, Anthropic Messages), the reading of the
// recorded streams in test/fixtures (whole, split at every byte, cut), and
// one real call through the shared libcurl client against the fake model
// server (deltas, the recorded request, a cancel that closes the stream).

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/http_client.hpp"
#include "runtime/json.hpp"
#include "runtime/model_api.hpp"
#include "test/support/fake_model_server.hpp"
#include "test/support/poll.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using test::fake_model_reply;
using test::fake_model_server;

std::string joined(const std::vector<std::string>& events) {
  std::string out;
  for (auto& e : events)
    out += e;
  return out;
}

struct parsed {
  model_stream_state state;
  std::string deltas;
  bool complete = false;
};

parsed parse_split(model_api api, const std::string& text, size_t at) {
  model_stream s{api};
  parsed p;
  auto add = [&](std::string_view d) {
    p.deltas += d;
  };
  EXPECT_TRUE(s.feed(std::string_view{text}.substr(0, at), add));
  EXPECT_TRUE(s.feed(std::string_view{text}.substr(at), add));
  p.state = s.state();
  p.complete = s.complete();
  return p;
}

parsed parse(model_api api, const std::string& text) {
  return parse_split(api, text, text.size());
}

rapidjson::Document body_of(const model_request& r) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(r.body, doc)) << r.body;
  return doc;
}

std::string header(const model_request& r, const std::string& name) {
  for (auto& [k, v] : r.headers)
    if (k == name)
      return v;
  return "<absent>";
}

const std::vector<chat_message> conversation{
  {"user", "plan my week"},
  {"assistant", "Monday: gym."},
  {"user", "and book the dentist"},
};

TEST(model_request, openai_chat_completions_with_usage_in_the_stream) {
  model_call_settings s;
  s.api = model_api::openai;
  s.base_url = "https://api.openai.com/";
  s.model = "gpt-4o-mini";
  s.api_key = "sk-test";
  s.system_prompt = "You are terse.";
  auto r = build_model_request(s, conversation);
  EXPECT_EQ(r.url, "https://api.openai.com/v1/chat/completions");
  EXPECT_EQ(header(r, "Authorization"), "Bearer sk-test");
  EXPECT_EQ(header(r, "Accept"), "text/event-stream");
  auto doc = body_of(r);
  EXPECT_STREQ(doc["model"].GetString(), "gpt-4o-mini");
  EXPECT_TRUE(doc["stream"].GetBool());
  EXPECT_TRUE(doc["stream_options"]["include_usage"].GetBool());
  EXPECT_FALSE(doc.HasMember("max_tokens")) << "0 leaves it to the server";
  EXPECT_FALSE(doc.HasMember("temperature")) << "unset is not sent";
  auto& m = doc["messages"];
  ASSERT_EQ(m.Size(), 4u);
  EXPECT_STREQ(m[0]["role"].GetString(), "system");
  EXPECT_STREQ(m[0]["content"].GetString(), "You are terse.");
  EXPECT_STREQ(m[1]["role"].GetString(), "user");
  EXPECT_STREQ(m[2]["role"].GetString(), "assistant");
  EXPECT_STREQ(m[3]["content"].GetString(), "and book the dentist");
  s.max_tokens = 256;
  s.temperature = 0.7;
  s.api_key.clear();
  s.system_prompt.clear();
  auto local = build_model_request(s, conversation);
  EXPECT_EQ(header(local, "Authorization"), "<absent>")
    << "no key, no header (local servers)";
  auto d2 = body_of(local);
  EXPECT_EQ(d2["max_tokens"].GetUint(), 256u);
  EXPECT_DOUBLE_EQ(d2["temperature"].GetDouble(), 0.7);
  EXPECT_STREQ(d2["messages"][0]["role"].GetString(), "user");
}

TEST(model_request, anthropic_messages_with_a_top_level_system_prompt) {
  model_call_settings s;
  s.api = model_api::anthropic;
  s.base_url = "https://api.anthropic.com";
  s.model = "claude-sonnet-4-5";
  s.api_key = "sk-ant-test";
  s.system_prompt = "You are terse.";
  auto r = build_model_request(s, conversation);
  EXPECT_EQ(r.url, "https://api.anthropic.com/v1/messages");
  EXPECT_EQ(header(r, "x-api-key"), "sk-ant-test");
  EXPECT_EQ(header(r, "anthropic-version"), "2023-06-01");
  EXPECT_EQ(header(r, "Authorization"), "<absent>");
  auto doc = body_of(r);
  EXPECT_EQ(doc["max_tokens"].GetUint(), default_anthropic_max_tokens)
    << "the Messages API requires max_tokens";
  EXPECT_STREQ(doc["system"].GetString(), "You are terse.");
  EXPECT_TRUE(doc["stream"].GetBool());
  EXPECT_FALSE(doc.HasMember("stream_options"));
  auto& m = doc["messages"];
  ASSERT_EQ(m.Size(), 3u) << "no system role among the messages";
  EXPECT_STREQ(m[0]["role"].GetString(), "user");
  EXPECT_STREQ(m[1]["role"].GetString(), "assistant");
}

/// A conversation where the assistant called two tools: one answered, one
/// refused.
std::vector<chat_message> tool_conversation() {
  std::vector<chat_message> out{{"user", "remember my meds"}};
  chat_message turn{"assistant", ""};
  turn.tool_calls = {{"call_1", "state_put", R"({"key":"meds","value":[1]})"},
                     {"call_2", "notify", ""}};
  out.push_back(turn);
  chat_message results{"tool", ""};
  results.tool_results = {{"call_1", R"({"version":1})", false},
                          {"call_2", "message is required", true}};
  out.push_back(results);
  return out;
}

const std::vector<model_tool> some_tools{
  {"state_get", "Reads a key.",
   R"({"type":"object","properties":{"key":{"type":"string"}}})"},
};

TEST(model_request, openai_declares_tools_and_carries_calls_and_results) {
  model_call_settings s;
  s.api = model_api::openai;
  s.base_url = "http://127.0.0.1:1";
  s.model = "m";
  s.tools = some_tools;
  auto doc = body_of(build_model_request(s, tool_conversation()));
  auto& t = doc["tools"];
  ASSERT_EQ(t.Size(), 1u);
  EXPECT_STREQ(t[0]["type"].GetString(), "function");
  EXPECT_STREQ(t[0]["function"]["name"].GetString(), "state_get");
  EXPECT_STREQ(t[0]["function"]["description"].GetString(), "Reads a key.");
  EXPECT_STREQ(t[0]["function"]["parameters"]["type"].GetString(), "object");
  auto& m = doc["messages"];
  ASSERT_EQ(m.Size(), 4u) << "user, assistant, one tool message per call";
  EXPECT_STREQ(m[1]["role"].GetString(), "assistant");
  EXPECT_TRUE(m[1]["content"].IsNull()) << "no text: content null";
  auto& calls = m[1]["tool_calls"];
  ASSERT_EQ(calls.Size(), 2u);
  EXPECT_STREQ(calls[0]["id"].GetString(), "call_1");
  EXPECT_STREQ(calls[0]["type"].GetString(), "function");
  EXPECT_STREQ(calls[0]["function"]["name"].GetString(), "state_put");
  EXPECT_STREQ(calls[0]["function"]["arguments"].GetString(),
               R"({"key":"meds","value":[1]})")
    << "arguments stay a JSON string";
  EXPECT_STREQ(calls[1]["function"]["arguments"].GetString(), "{}");
  EXPECT_STREQ(m[2]["role"].GetString(), "tool");
  EXPECT_STREQ(m[2]["tool_call_id"].GetString(), "call_1");
  EXPECT_STREQ(m[2]["content"].GetString(), R"({"version":1})");
  EXPECT_STREQ(m[3]["tool_call_id"].GetString(), "call_2");
  EXPECT_STREQ(m[3]["content"].GetString(), "Error: message is required");
  s.tools.clear();
  EXPECT_FALSE(body_of(build_model_request(s, conversation)).HasMember("tools"))
    << "no tools, no declaration";
}

TEST(model_request, anthropic_declares_tools_and_carries_calls_and_results) {
  model_call_settings s;
  s.api = model_api::anthropic;
  s.base_url = "http://127.0.0.1:1";
  s.model = "m";
  s.tools = some_tools;
  auto conv = tool_conversation();
  conv[1].content = "Noting it.";
  auto doc = body_of(build_model_request(s, conv));
  auto& t = doc["tools"];
  ASSERT_EQ(t.Size(), 1u);
  EXPECT_STREQ(t[0]["name"].GetString(), "state_get");
  EXPECT_STREQ(t[0]["description"].GetString(), "Reads a key.");
  EXPECT_STREQ(t[0]["input_schema"]["type"].GetString(), "object");
  auto& m = doc["messages"];
  ASSERT_EQ(m.Size(), 3u);
  auto& blocks = m[1]["content"];
  ASSERT_EQ(blocks.Size(), 3u) << "the text, then a tool_use per call";
  EXPECT_STREQ(blocks[0]["type"].GetString(), "text");
  EXPECT_STREQ(blocks[0]["text"].GetString(), "Noting it.");
  EXPECT_STREQ(blocks[1]["type"].GetString(), "tool_use");
  EXPECT_STREQ(blocks[1]["id"].GetString(), "call_1");
  EXPECT_STREQ(blocks[1]["name"].GetString(), "state_put");
  EXPECT_STREQ(blocks[1]["input"]["key"].GetString(), "meds")
    << "input is an object";
  EXPECT_TRUE(blocks[2]["input"].IsObject());
  EXPECT_STREQ(m[2]["role"].GetString(), "user");
  auto& results = m[2]["content"];
  ASSERT_EQ(results.Size(), 2u);
  EXPECT_STREQ(results[0]["type"].GetString(), "tool_result");
  EXPECT_STREQ(results[0]["tool_use_id"].GetString(), "call_1");
  EXPECT_STREQ(results[0]["content"].GetString(), R"({"version":1})");
  EXPECT_FALSE(results[0]["is_error"].GetBool());
  EXPECT_STREQ(results[1]["content"].GetString(), "message is required");
  EXPECT_TRUE(results[1]["is_error"].GetBool());
}

TEST(model_stream, openai_tool_calls_are_assembled_by_index) {
  auto p = parse(model_api::openai,
                 joined(test::model_fixture_events("openai",
                                                   "tool_calls_stream.sse")));
  EXPECT_EQ(p.state.text, "");
  EXPECT_EQ(p.deltas, "") << "tool arguments are not deltas of the answer";
  EXPECT_EQ(p.state.stop_reason, "tool_calls");
  EXPECT_TRUE(p.complete);
  ASSERT_EQ(p.state.tool_calls.size(), 2u);
  EXPECT_EQ(p.state.tool_calls[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
  EXPECT_EQ(p.state.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.state.tool_calls[0].arguments, R"({"location":"Paris, France"})");
  EXPECT_EQ(p.state.tool_calls[1].id, "call_ABCDEFGHIJKLMNOPQRSTUVWX");
  EXPECT_EQ(p.state.tool_calls[1].arguments,
            "{\"location\":\"Bogot\xc3\xa1, Colombia\"}");
  EXPECT_EQ(p.state.output_tokens, 51u);
}

TEST(model_stream, anthropic_tool_use_blocks_collect_their_input) {
  auto p = parse(model_api::anthropic,
                 joined(test::model_fixture_events("anthropic",
                                                   "tool_use_stream.sse")));
  EXPECT_EQ(p.state.text,
            "Okay, let's check the weather for San Francisco, CA:");
  EXPECT_EQ(p.deltas, p.state.text);
  EXPECT_EQ(p.state.stop_reason, "tool_use");
  EXPECT_TRUE(p.complete);
  ASSERT_EQ(p.state.tool_calls.size(), 1u);
  EXPECT_EQ(p.state.tool_calls[0].id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
  EXPECT_EQ(p.state.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.state.tool_calls[0].arguments,
            R"({"location": "San Francisco, CA", "unit": "fahrenheit"})");
  auto b = parse(model_api::anthropic,
                 joined(test::model_fixture_events("anthropic",
                                                   "tool_use_butler.sse")));
  ASSERT_EQ(b.state.tool_calls.size(), 2u);
  EXPECT_EQ(b.state.tool_calls[0].name, "state_put");
  EXPECT_EQ(b.state.tool_calls[0].arguments,
            R"({"key": "meds","value": ["aspirin"]})");
  EXPECT_EQ(b.state.tool_calls[1].name, "notify");
  EXPECT_EQ(b.state.tool_calls[1].arguments, R"({"message": "noted"})");
}

TEST(model_stream, openai_fixture_gives_text_usage_and_the_end) {
  auto p = parse(model_api::openai,
                 joined(
                   test::model_fixture_events("openai", "chat_stream.sse")));
  EXPECT_EQ(p.state.text, "Hello! How can I assist you today?");
  EXPECT_EQ(p.deltas, p.state.text);
  EXPECT_EQ(p.state.model, "gpt-4o-mini");
  EXPECT_TRUE(p.state.usage_seen);
  EXPECT_EQ(p.state.input_tokens, 1117u - 1024u)
    << "prompt_tokens includes cached_tokens; they are counted apart";
  EXPECT_EQ(p.state.cache_read_tokens, 1024u);
  EXPECT_EQ(p.state.output_tokens, 9u);
  EXPECT_EQ(p.state.stop_reason, "stop");
  EXPECT_TRUE(p.state.done);
  EXPECT_TRUE(p.complete);
  EXPECT_FALSE(p.state.error);
  EXPECT_EQ(p.state.malformed, 0u);
}

TEST(model_stream, llama_server_fixture_with_null_content_and_timings) {
  auto p = parse(model_api::openai,
                 joined(
                   test::model_fixture_events("openai", "llama_server.sse")));
  EXPECT_EQ(p.state.text, "Hi there!");
  EXPECT_EQ(p.state.model, "qwen2.5-1.5b-instruct-q4_k_m.gguf");
  EXPECT_EQ(p.state.input_tokens, 1u);
  EXPECT_EQ(p.state.cache_read_tokens, 20u);
  EXPECT_EQ(p.state.output_tokens, 4u);
  EXPECT_TRUE(p.complete);
}

TEST(model_stream, errors_in_the_stream_are_reported) {
  auto o = parse(model_api::openai,
                 joined(
                   test::model_fixture_events("openai", "stream_error.sse")));
  EXPECT_TRUE(o.state.error);
  EXPECT_EQ(o.state.error_type, "server_error");
  EXPECT_NE(o.state.error_message.find("server had an error"),
            std::string::npos);
  EXPECT_EQ(o.state.text, "Par");
  auto a = parse(model_api::anthropic,
                 joined(test::model_fixture_events("anthropic",
                                                   "stream_error.sse")));
  EXPECT_TRUE(a.state.error);
  EXPECT_EQ(a.state.error_type, "overloaded_error");
  EXPECT_EQ(a.state.error_message, "Overloaded");
  EXPECT_FALSE(a.complete);
}

TEST(model_stream, anthropic_fixture_gives_text_usage_and_the_end) {
  auto p = parse(model_api::anthropic,
                 joined(test::model_fixture_events("anthropic",
                                                   "messages_stream.sse")));
  EXPECT_EQ(p.state.text, "Hello! I'm doing well, thank you for asking. How "
                          "are you doing today? Is there anything I can help "
                          "you with?");
  EXPECT_EQ(p.deltas, p.state.text);
  EXPECT_EQ(p.state.model, "claude-sonnet-4-5-20250929");
  EXPECT_EQ(p.state.input_tokens, 25u);
  EXPECT_EQ(p.state.output_tokens, 30u) << "message_delta's count is the total";
  EXPECT_EQ(p.state.stop_reason, "end_turn");
  EXPECT_TRUE(p.state.done);
  EXPECT_TRUE(p.complete);
}

TEST(model_stream, anthropic_cache_tokens_and_thinking_left_out_of_the_text) {
  auto p = parse(model_api::anthropic,
                 joined(
                   test::model_fixture_events("anthropic", "cache_usage.sse")));
  EXPECT_EQ(p.state.text, "Hi again.");
  EXPECT_EQ(p.state.input_tokens, 12u);
  EXPECT_EQ(p.state.cache_read_tokens, 4096u);
  EXPECT_EQ(p.state.cache_write_tokens, 2048u);
  EXPECT_EQ(p.state.output_tokens, 30u);
}

TEST(model_stream, every_fixture_reads_the_same_split_at_every_byte) {
  for (auto api : {model_api::openai, model_api::anthropic}) {
    auto dir = api == model_api::openai ? "openai" : "anthropic";
    auto files = api == model_api::openai
                   ? std::vector<std::string>{"chat_stream.sse",
                                              "llama_server.sse",
                                              "stream_error.sse",
                                              "tool_calls_stream.sse",
                                              "tool_calls_butler.sse"}
                   : std::vector<std::string>{"messages_stream.sse",
                                              "cache_usage.sse",
                                              "stream_error.sse",
                                              "tool_use_stream.sse",
                                              "tool_use_butler.sse"};
    for (auto& f : files) {
      auto text = joined(test::model_fixture_events(dir, f));
      auto whole = parse(api, text);
      for (size_t at = 0; at <= text.size(); ++at) {
        auto p = parse_split(api, text, at);
        ASSERT_EQ(p.deltas, whole.deltas) << f << " at " << at;
        ASSERT_EQ(p.state.text, whole.state.text) << f << " at " << at;
        ASSERT_EQ(p.state.output_tokens, whole.state.output_tokens);
        ASSERT_EQ(p.state.input_tokens, whole.state.input_tokens);
        ASSERT_EQ(p.complete, whole.complete) << f << " at " << at;
        ASSERT_EQ(p.state.error, whole.state.error);
        ASSERT_EQ(p.state.tool_calls.size(), whole.state.tool_calls.size());
        for (size_t i = 0; i < p.state.tool_calls.size(); ++i) {
          ASSERT_EQ(p.state.tool_calls[i].id, whole.state.tool_calls[i].id);
          ASSERT_EQ(p.state.tool_calls[i].name, whole.state.tool_calls[i].name);
          ASSERT_EQ(p.state.tool_calls[i].arguments,
                    whole.state.tool_calls[i].arguments)
            << f << " at " << at;
        }
      }
    }
  }
}

TEST(model_stream, a_stream_cut_before_its_end_is_not_complete) {
  for (auto [api, dir, file] :
       {std::tuple{model_api::openai, "openai", "chat_stream.sse"},
        std::tuple{model_api::anthropic, "anthropic", "messages_stream.sse"}}) {
    auto events = test::model_fixture_events(dir, file);
    std::string text;
    for (size_t i = 0; i + 3 < events.size(); ++i)
      text += events[i];
    // Half an event more: a connection that broke mid-line.
    text += events[events.size() - 3].substr(0, 20);
    auto p = parse(api, text);
    EXPECT_FALSE(p.complete) << dir;
    EXPECT_FALSE(p.state.text.empty()) << dir;
  }
}

TEST(model_stream, bad_json_is_skipped_and_a_huge_answer_stops_the_stream) {
  model_stream s{model_api::openai, 64};
  std::string deltas;
  auto add = [&](std::string_view d) {
    deltas += d;
  };
  EXPECT_TRUE(s.feed("data: {not json\n\n", add));
  EXPECT_EQ(s.state().malformed, 1u);
  std::string big = R"(data: {"choices":[{"index":0,"delta":{"content":")"
                    + std::string(40, 'x') + "\"}}]}\n\n";
  EXPECT_FALSE(s.feed(big, add)) << "an event over the bound";
}

TEST(model_error_text, json_error_bodies_and_anything_else) {
  EXPECT_EQ(model_error_text(R"({"error":{"message":"Invalid API key",)"
                             R"("type":"invalid_request_error"}})"),
            "invalid_request_error: Invalid API key");
  EXPECT_EQ(model_error_text(R"({"type":"error","error":{"type":)"
                             R"("rate_limit_error","message":"slow down"}})"),
            "rate_limit_error: slow down");
  EXPECT_EQ(model_error_text("<html>\nBad Gateway</html>"),
            "<html> Bad Gateway</html>");
}

// -- one real call against the fake server ---------------------------------

TEST(model_call, streams_through_the_shared_client_and_the_fake_records_it) {
  fake_model_server fake;
  for (auto api : {model_api::openai, model_api::anthropic}) {
    model_call_settings s;
    s.api = api;
    s.base_url = fake.base_url();
    s.model = "m";
    auto r = build_model_request(s, conversation);
    http_request h;
    h.method = "POST";
    h.url = r.url;
    h.headers = r.headers;
    h.body = r.body;
    model_stream stream{api};
    std::vector<std::string> deltas;
    h.on_data = [&](std::string_view chunk) {
      return stream.feed(chunk, [&](std::string_view d) {
        deltas.emplace_back(d);
      });
    };
    auto res = shared_http_client().perform(h);
    EXPECT_EQ(res.failure, http_failure::none) << res.error;
    EXPECT_EQ(res.status, 200);
    EXPECT_TRUE(stream.complete());
    EXPECT_GE(deltas.size(), 3u);
    auto calls = fake.calls();
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back().body, r.body) << "the fake saw the request";
    EXPECT_EQ(calls.back().api,
              api == model_api::openai ? "openai" : "anthropic");
  }
}

TEST(model_call, a_cancel_closes_the_stream_within_a_second) {
  fake_model_server fake;
  fake_model_reply slow;
  slow.event_interval = 400ms;
  fake.push(slow);
  model_call_settings s;
  s.base_url = fake.base_url();
  s.model = "m";
  auto r = build_model_request(s, conversation);
  http_request h;
  h.method = "POST";
  h.url = r.url;
  h.headers = r.headers;
  h.body = r.body;
  std::atomic<size_t> deltas{0};
  model_stream stream{model_api::openai};
  h.on_data = [&](std::string_view chunk) {
    return stream.feed(chunk, [&](std::string_view) {
      ++deltas;
    });
  };
  std::atomic<bool> cancel{false};
  http_response res;
  std::thread t{[&] {
    res = shared_http_client().perform(h, &cancel);
  }};
  ASSERT_TRUE(test::eventually(
    [&] {
      return deltas.load() >= 1;
    },
    5s));
  auto cancelled_at = std::chrono::steady_clock::now();
  cancel = true;
  ASSERT_TRUE(test::eventually(
    [&] {
      auto calls = fake.calls();
      return !calls.empty() && calls[0].ended;
    },
    1s))
    << "the fake saw the connection close";
  t.join();
  EXPECT_EQ(res.failure, http_failure::cancelled);
  auto calls = fake.calls();
  EXPECT_TRUE(calls[0].client_closed);
  EXPECT_LT(calls[0].ended_at - cancelled_at, 1s);
  EXPECT_FALSE(stream.complete());
}

} // namespace
} // namespace butlers
