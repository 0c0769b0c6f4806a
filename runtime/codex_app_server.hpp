#pragma once

// `codex app-server` over stdio: JSON-RPC 2.0 messages without the
// `"jsonrpc"` member, one per line (openai/codex
// codex-rs/app-server/README.md, "Protocol"; the types in
// codex-rs/app-server-protocol/src/protocol/{common.rs,v2/*.rs}; examples
// under test/fixtures/codex/).
//
// The builders write the client's messages, `parse_codex_line` reads the
// server's, and `codex_conversation` is the client side of one run as a
// plain state machine: initialize → initialized → thread/start →
// turn/start with the prompt; input that arrives while a turn runs goes in
// as `turn/steer` (expectedTurnId = the running turn), input that arrives
// between turns (or that the server refuses because the turn just ended)
// starts the next `turn/start`; the run ends when a turn completes with no
// input waiting. It does no I/O: every call fills a `codex_step` with the
// lines to write and what to tell the session.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/messages.hpp"
#include "runtime/threads.hpp"

namespace butlers {

// -- what the client writes ---------------------------------------------------

/// `initialize` with `clientInfo` {name "butlers", title, version}.
std::string codex_initialize(int64_t id, std::string_view version);

/// The `initialized` notification that completes the handshake.
std::string codex_initialized();

/// `thread/start`: a new thread on the server's configuration, with
/// `approvalPolicy` "never" (nobody is there to approve; as `codex exec`),
/// or "on-request" when the butler's approvals are handed to a person or a
/// policy (`ask_approvals`).
std::string codex_thread_start(int64_t id, bool ask_approvals = false);

/// Whether `method` is a server request for an approval (command execution
/// or file change; the v2 and the older names).
bool codex_is_approval(std::string_view method);

/// The tool name an approval request is for: "shell" (command execution)
/// or "apply_patch" (file change).
std::string codex_approval_tool(std::string_view method);

/// The answer to approval request `method` with id `id_json`: v2 methods
/// take `{"decision":"accept"|"decline"}`, the older ones
/// `"approved"|"denied"`.
std::string codex_approval_answer(std::string_view id_json,
                                  std::string_view method, bool approved);

/// `turn/start` on `thread_id` with one `text` input item per text.
std::string codex_turn_start(int64_t id, std::string_view thread_id,
                             const std::vector<std::string>& texts);

/// `turn/steer`: more input for the running turn `expected_turn_id`.
std::string codex_turn_steer(int64_t id, std::string_view thread_id,
                             std::string_view expected_turn_id,
                             const std::vector<std::string>& texts);

/// `turn/interrupt` of `turn_id`.
std::string codex_turn_interrupt(int64_t id, std::string_view thread_id,
                                 std::string_view turn_id);

/// The answer to a server-initiated request `method` with id `id_json` (the
/// id as JSON text): approvals are declined, user input and tool calls are
/// answered empty, anything else gets a JSON-RPC error -32601. Nobody can be
/// asked, and a request left unanswered would hang the turn.
std::string codex_decline(std::string_view id_json, std::string_view method);

// -- what the server writes ---------------------------------------------------

enum class codex_message_kind : uint8_t {
  /// Not a JSON object of any of the shapes below (e.g. a log line).
  invalid,
  /// `{"id", "result"}`.
  response,
  /// `{"id", "error": {"code", "message"}}`.
  error_response,
  /// `{"method", "params"}` without an id.
  notification,
  /// `{"id", "method", "params"}`: the server asks the client.
  request,
};

/// `TokenUsageBreakdown` of `thread/tokenUsage/updated` (`inputTokens`
/// includes `cachedInputTokens`; `outputTokens` includes
/// `reasoningOutputTokens`).
struct codex_token_usage {
  uint64_t total = 0;
  uint64_t input = 0;
  uint64_t cached_input = 0;
  uint64_t output = 0;
  uint64_t reasoning_output = 0;
};

/// One line from the server, with the fields this client uses.
struct codex_message {
  codex_message_kind kind = codex_message_kind::invalid;
  /// responses, errors, requests: the id as JSON text, and as an integer
  /// when it is one (else -1).
  std::string id;
  int64_t number = -1;
  /// notifications and requests.
  std::string method;
  /// `result.thread.id` (thread/start) or `params.threadId`.
  std::string thread_id;
  /// `result.turn.id` (turn/start), `result.turnId` (turn/steer),
  /// `params.turn.id` (turn/started, turn/completed) or `params.turnId`.
  std::string turn_id;
  /// item/*: `params.item.id`/`params.itemId` and `params.item.type`.
  std::string item_id;
  std::string item_type;
  /// `params.delta` (item/agentMessage/delta) or the agentMessage's `text`
  /// (item/completed).
  std::string text;
  /// `turn.status`: completed, interrupted, failed or inProgress.
  std::string status;
  /// The error's message: of an error response, `turn.error`, the `error`
  /// notification, or why the line is invalid.
  std::string error;
  /// error responses: `error.code`.
  int64_t code = 0;
  /// `error` notifications: the server retries by itself.
  bool will_retry = false;
  /// thread/start: `result.model`.
  std::string model;
  /// thread/tokenUsage/updated: `tokenUsage.total` (the thread so far).
  std::optional<codex_token_usage> usage;
  /// Approval requests: what is asked for (the command, or the files a
  /// patch changes, else the reason), as the model wrote it.
  std::string summary;
};

/// Reads one line. Never throws, whatever the input.
codex_message parse_codex_line(std::string_view line);

// -- one run ------------------------------------------------------------------

/// What to do after a `codex_conversation` call.
struct codex_step {
  /// Lines for the server's stdin, in order (each without its newline).
  std::vector<std::string> writes;
  /// Agent text streamed since the last step.
  std::string delta;
  /// Tokens so far, when the server reported them.
  std::optional<session_usage> usage;
  /// Input that reached the model (turn/start or an accepted turn/steer),
  /// with the 1-based turn it went into.
  std::vector<steer_applied> applied;
  /// The run ended: the last agent message, or why it failed.
  std::optional<adapter_result> done;
  /// Approval requests the server made, to be answered with
  /// `codex_conversation::answer_approval`.
  struct approval {
    /// The request's id (JSON text): what answer_approval takes.
    std::string key;
    std::string tool;
    std::string summary;
  };
  std::vector<approval> approvals;
};

class codex_conversation {
 public:
  /// `prompt` opens the first turn; `version` goes into clientInfo. With
  /// `ask_approvals`, the server's approval requests come out as
  /// `codex_step::approvals` instead of being declined at once.
  codex_conversation(std::string prompt, std::string version,
                     bool ask_approvals = false);

  /// Answers the approval request `key` (a `codex_step::approvals` entry);
  /// nothing when it is not waiting.
  void answer_approval(const std::string& key, bool approved, codex_step& out);

  /// Writes `initialize`. Input given before (`on_input`) joins the
  /// first turn.
  void start(codex_step& out);

  /// A line the server wrote.
  void on_line(std::string_view line, codex_step& out);

  /// Input for the run, in arrival order.
  void on_input(std::vector<steer_input> inputs, codex_step& out);

  /// The server's stdout ended (it exited) with `why`; fails the run unless
  /// it has ended.
  void on_exit(const std::string& why, codex_step& out);

  /// Writes `turn/interrupt` for the running turn, if there is one.
  void interrupt(codex_step& out);

  /// The run has ended (a `done` was produced).
  bool finished() const {
    return phase_ == phase::finished;
  }

  /// Turns started so far.
  uint32_t turns() const {
    return turns_;
  }

 private:
  enum class phase : uint8_t {
    idle,
    initializing,
    starting_thread,
    starting_turn,
    in_turn,
    /// The turn completed; turn/steer answers are still due.
    settling,
    finished,
  };

  void on_response(const codex_message& m, codex_step& out);
  void on_error_response(const codex_message& m, codex_step& out);
  void on_notification(const codex_message& m, codex_step& out);
  void on_turn_completed(const codex_message& m, codex_step& out);
  /// After a completed turn: the next turn for waiting input, or the end.
  void settle(codex_step& out);
  void start_turn(std::vector<std::string> texts,
                  std::vector<steer_input> inputs, codex_step& out);
  void steer(codex_step& out);
  void fail(std::string message, codex_step& out);
  session_usage usage() const;

  std::string prompt_;
  std::string version_;
  phase phase_ = phase::idle;
  int64_t next_id_ = 1;
  int64_t initialize_id_ = 0;
  int64_t thread_start_id_ = 0;
  int64_t turn_start_id_ = 0;
  std::string thread_id_;
  std::string turn_id_;
  std::string model_;
  uint32_t turns_ = 0;
  /// Input not yet given to the server, in arrival order.
  std::vector<steer_input> waiting_;
  /// turn/steer requests not yet answered: id → their input.
  std::map<int64_t, std::vector<steer_input>> steering_;
  /// The last agent message (item/completed), else the deltas of the
  /// message being written.
  std::string last_text_;
  std::string streaming_item_;
  std::string streaming_text_;
  /// The last `error` notification the server will not retry.
  std::string last_error_;
  std::optional<codex_token_usage> tokens_;
  bool ask_approvals_ = false;
  /// Approval requests waiting for their answer: id (JSON) → method.
  std::map<std::string, std::string> approvals_;
};

} // namespace butlers
