#pragma once

// Claude Code's stream-json protocol (`claude -p --input-format stream-json
// --output-format stream-json --verbose --include-partial-messages`): NDJSON
// user messages in, NDJSON events out. What we write and what we read, as
// the Agent SDKs do (anthropics/claude-agent-sdk-python client.py and
// _internal/message_parser.py; see test/fixtures/claude/README.md):
//
//   in:  {"type":"user","message":{"role":"user","content":[{"type":"text",
//         "text":"..."}]},"parent_tool_use_id":null,"session_id":"default"}
//   out: {"type":"system","subtype":"init","model":"...","session_id":"..."}
//        {"type":"stream_event","event":{"type":"content_block_delta",
//         "index":0,"delta":{"type":"text_delta","text":"..."}}}  (partial)
//        {"type":"assistant","message":{"content":[{"type":"text"|"tool_use"
//         ...}],...}}
//        {"type":"user",...}  (tool results; ignored)
//        {"type":"result","subtype":"success"|"error_...","is_error":bool,
//         "result":"...","num_turns":n,"total_cost_usd":x,"usage":{
//         "input_tokens","output_tokens","cache_creation_input_tokens",
//         "cache_read_input_tokens"}}
//
// One `result` follows each user message. Its `usage` covers that message's
// model calls; its `total_cost_usd` is the running total of the process
// (anthropics/claude-code#83239).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attachments.hpp"

namespace butlers {

/// The command a claude session runs when its butler names none:
/// `claude -p --input-format stream-json --output-format stream-json
/// --verbose --include-partial-messages` (the last for text deltas).
std::vector<std::string> claude_stream_command();

/// The line (ending in '\n') that passes `text` to the model as one user
/// message, with `attachments` as image and document content blocks
/// (base64 sources) after the text.
std::string claude_user_message(
  std::string_view text, const std::vector<attachment_data>& attachments = {});

/// What one stdout line of a stream-json CLI says.
enum class claude_event_kind : uint8_t {
  /// A line we do not act on (user echoes, tool results, other stream
  /// events, system events other than init, unknown types).
  ignored,
  /// Not a JSON object with a string `type`; `error` says why.
  invalid,
  /// `system`/`init`: `model`, `session_id`.
  init,
  /// `stream_event` with a `text_delta`: `text` is the new text.
  text_delta,
  /// `assistant`: `text` is its text blocks joined, `tools` its tool_use
  /// names.
  assistant,
  /// `result`: the end of the answer to one user message.
  result,
};

/// Token counts of one `result` (Claude Code's `usage`).
struct claude_tokens {
  uint64_t input = 0;
  uint64_t output = 0;
  uint64_t cache_read = 0;
  uint64_t cache_write = 0;
};

/// One parsed line.
struct claude_event {
  claude_event_kind kind = claude_event_kind::ignored;
  /// init: the model and the CLI's session id.
  std::string model;
  std::string session_id;
  /// text_delta, assistant: the text; result: `result` (the final answer).
  std::string text;
  /// assistant: the names of the tools it calls.
  std::vector<std::string> tools;
  /// result: failed (`is_error`, or an `error_*` subtype), the subtype, and
  /// a message for the failure (the CLI's own words where it gave some).
  bool is_error = false;
  std::string subtype;
  std::string error;
  /// result: tokens of this answer, the process's cost so far, and its
  /// model turns.
  claude_tokens tokens;
  double cost_usd = 0;
  bool cost_known = false;
  uint32_t num_turns = 0;
};

/// Parses one stdout line. Never throws, whatever the input.
claude_event parse_claude_line(std::string_view line);

} // namespace butlers
