#pragma once

// The wire formats of the HTTP model APIs a session can call, without any
// I/O: the request of one streamed call, and the reading of its SSE
// response.
//   - OpenAI chat completions (`POST {base_url}/v1/chat/completions`,
//     `stream: true`, `stream_options.include_usage`), also spoken by
//     llama.cpp's llama-server, vLLM and Ollama;
//   - Anthropic Messages (`POST {base_url}/v1/messages`, `stream: true`).
// test/fixtures/openai and test/fixtures/anthropic hold documented
// example streams (see their README).
//
// Native tool calling: a request declares the session's tools (OpenAI
// `tools: [{type: "function", function: {name, description, parameters}}]`,
// Anthropic `tools: [{name, description, input_schema}]`); the stream's
// tool calls are collected (OpenAI `delta.tool_calls[]` by `index`,
// finish_reason "tool_calls"; Anthropic `tool_use` content blocks with
// `input_json_delta`s, stop_reason "tool_use"); the conversation carries
// the assistant's calls and their results back (OpenAI: `tool_calls` on
// the assistant message, then one `role: "tool"` message per call;
// Anthropic: `tool_use` blocks in the assistant turn, then a user turn of
// `tool_result` blocks).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/attachments.hpp"
#include "runtime/sse.hpp"

namespace butlers {

enum class model_api { openai, anthropic };

/// A tool the model may call.
struct model_tool {
  std::string name;
  std::string description;
  /// JSON Schema of the arguments (an object, as text).
  std::string input_schema;
};

/// A tool call the model made.
struct model_tool_call {
  /// The provider's id (`call_...`, `toolu_...`), echoed with the result.
  std::string id;
  std::string name;
  /// The arguments: the concatenated partial JSON, as the model wrote it
  /// (normally an object; "" when the model sent none).
  std::string arguments;
};

/// The outcome of one tool call, as the model is told it.
struct model_tool_result {
  /// The id of the call it answers.
  std::string call_id;
  std::string content;
  /// The tool refused or failed (Anthropic `is_error`; OpenAI has no such
  /// field, the content says it).
  bool is_error = false;
};

/// One message of the conversation: role "user" or "assistant", or
/// "tool" for the results of the previous assistant message's calls.
struct chat_message {
  chat_message() = default;
  chat_message(std::string r, std::string c)
    : role(std::move(r)), content(std::move(c)) {
    // nop
  }
  std::string role;
  std::string content;
  /// assistant: the tools it called (`content` may then be "").
  std::vector<model_tool_call> tool_calls;
  /// tool: one result per call of the previous message, in its order.
  std::vector<model_tool_result> tool_results;
  /// user: files sent with it, given to the model as content blocks after
  /// the text (OpenAI `image_url`/`file` parts, Anthropic image/document
  /// blocks); null or empty: the content is the text alone.
  std::shared_ptr<const std::vector<attachment_data>> attachments;
};

/// What every call of a run sends besides the messages.
struct model_call_settings {
  model_api api = model_api::openai;
  /// The server's root (a trailing '/' is dropped).
  std::string base_url;
  std::string model;
  /// "" sends no key.
  std::string api_key;
  /// 0: openai sends none; anthropic sends `default_anthropic_max_tokens`.
  uint32_t max_tokens = 0;
  /// Negative: not sent.
  double temperature = -1.0;
  /// "" sends none.
  std::string system_prompt;
  /// The tools the model may call (empty: no `tools` are sent).
  std::vector<model_tool> tools;
};

/// The Messages API requires max_tokens; this is sent when none is set.
constexpr uint32_t default_anthropic_max_tokens = 4096;

/// The `anthropic-version` header sent.
constexpr const char* anthropic_version = "2023-06-01";

/// One HTTP request: POST `url` with `headers` and the JSON `body`.
struct model_request {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// The request of one streamed call over `messages`.
model_request build_model_request(const model_call_settings& s,
                                  const std::vector<chat_message>& messages);

/// What a stream said so far.
struct model_stream_state {
  /// The answer's text (every delta, in order).
  std::string text;
  /// The tool calls of the answer, in the order they began (their
  /// arguments complete once the stream is).
  std::vector<model_tool_call> tool_calls;
  /// The model that answered, as the response names it.
  std::string model;
  /// Tokens the response reported (0 until it does). `input_tokens`
  /// excludes cache reads and writes (OpenAI's `prompt_tokens` includes
  /// `cached_tokens`; they are subtracted).
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  uint64_t cache_read_tokens = 0;
  uint64_t cache_write_tokens = 0;
  bool usage_seen = false;
  /// `finish_reason` / `stop_reason` ("" until one arrives).
  std::string stop_reason;
  /// The stream's own end arrived (`data: [DONE]`, `message_stop`).
  bool done = false;
  /// An error object arrived in the stream.
  bool error = false;
  std::string error_type;
  std::string error_message;
  /// Events that were not understood (bad JSON); they are skipped.
  uint64_t malformed = 0;
};

/// Reads one streamed response body, chunk by chunk.
class model_stream {
 public:
  /// Deltas of the answer's text, as they are parsed.
  using delta_fn = std::function<void(std::string_view)>;

  /// `max_text_bytes` bounds the answer (text and tool arguments
  /// together, and each SSE event).
  explicit model_stream(model_api api, size_t max_text_bytes = size_t{4} << 20);

  /// Parses `chunk`; false once the stream is over a bound (the caller
  /// aborts the transfer).
  bool feed(std::string_view chunk, const delta_fn& on_delta);

  const model_stream_state& state() const {
    return state_;
  }

  /// True when the stream reached its end: `[DONE]` or a finish_reason
  /// (openai), `message_stop` or a stop_reason (anthropic). A body that
  /// ends before that was cut.
  bool complete() const;

 private:
  void on_event(const sse_event& ev, const delta_fn& on_delta);
  void on_openai(const sse_event& ev, const delta_fn& on_delta);
  void on_anthropic(const sse_event& ev, const delta_fn& on_delta);

  model_api api_;
  size_t max_text_bytes_;
  sse_parser sse_;
  model_stream_state state_;
  bool too_big_ = false;
  /// Where each tool call of the stream went in `state_.tool_calls`: by
  /// its OpenAI `index` or its Anthropic content block `index`.
  std::vector<std::pair<uint64_t, size_t>> tool_slots_;
  /// Bytes of text and tool arguments so far.
  size_t answer_bytes_ = 0;

  /// The call at stream index `index` (a new one the first time).
  model_tool_call& tool_slot(uint64_t index);
  /// Adds `n` bytes to the answer; false (and too_big_) past the bound.
  bool grow(size_t n);
};

/// The `error.message` (and `error.type`) of a JSON error body as both
/// APIs send it; otherwise the body's start, made printable.
std::string model_error_text(std::string_view body);

/// The path appended to base_url.
const char* model_api_path(model_api api);

} // namespace butlers
