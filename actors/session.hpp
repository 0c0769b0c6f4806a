#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/approvals.hpp"
#include "runtime/attachments.hpp"
#include "runtime/blocking_pool.hpp"
#include "runtime/budget.hpp"
#include "runtime/config.hpp"
#include "runtime/delivery.hpp"
#include "runtime/route.hpp"
#include "runtime/session_pool.hpp"
#include "runtime/tools.hpp"
#include "runtime/tracing.hpp"
#include "runtime/usage.hpp"

namespace butlers {

/// The runtimes a session can have. `runtime.kind` is read into this once
/// (`runtime_of`); `delivery` is the messenger's.
enum class session_runtime : uint8_t {
  /// Timed turns and a templated reply (runtime/scripted.hpp).
  scripted,
  /// A coding-agent CLI in a subprocess.
  cli,
  /// The messenger: a notify.v1 through its channel adapters.
  delivery,
  /// An HTTP model API (`openai`, `anthropic`): a loop of streamed calls.
  http_model,
};

/// The runtime `rt.kind` names ("scripted", "cli", "delivery"; "openai"
/// and "anthropic" are http_model; the config was validated, so anything
/// else is scripted).
session_runtime runtime_of(const runtime_config& rt);

/// What a session needs to know about its butler.
struct session_params {
  std::string butler;
  /// The runtime's settings.
  runtime_config runtime;
  /// Which runtime (from `runtime.kind`).
  session_runtime kind = session_runtime::scripted;
  std::chrono::milliseconds timeout{600000};
  /// delivery: the messenger's channel adapters.
  std::vector<delivery_adapter_ptr> adapters;
  /// delivery: the messenger's threads for the blocking sends (null: a
  /// thread of its own per delivery).
  std::shared_ptr<blocking_pool> pool;
  /// delivery: source messages and the outbound ledger for the adapters.
  std::shared_ptr<delivery_services> services;
  /// The `[[budget]]` tables that may apply to the butler's sessions
  /// (`budgets_for`); empty: sessions start without a budget check.
  std::vector<budget_config> budgets;
  /// Reads what the budgets were spent on before a session starts (needed
  /// when `budgets` is not empty).
  db_reader_actor reader;
  /// Counts budget refusals and stops (null counters: none).
  budget_meters meters;
  /// The node's tracer: model runtimes record a span per model call
  /// (runtime/butler_trace.hpp). Null: none.
  tracer_ptr traces;
  /// The node's capability tokens: a session gets one for its tools when
  /// it starts, revoked when it ends. Null (or `tool_base.max_calls` 0):
  /// the session has no tools.
  tool_tokens_ptr tools;
  /// The tool server (the scripted runtime calls it directly).
  tool_server_actor tool_server;
  /// The MCP endpoint the CLIs are given.
  std::string mcp_url;
  /// What every session of the butler may reach (`recipients`,
  /// `max_calls`, the node); the rest of the scope comes from its work.
  tool_scope tool_base;
  /// The butler's approvals (runtime/approvals.md).
  approval_policy approvals;
};

/// The tool scope of a session of `params` for `item` and `env`.
tool_scope session_scope(const session_params& params, const work_item& item,
                         const route_envelope& env);

/// The names Claude Code gives the tools of the MCP server "butlers"
/// (`mcp__butlers__<tool>`), comma-separated, for `--allowedTools`.
std::string claude_allowed_tools();

struct session_state;

using session_ptr = session_actor::stateful_pointer<session_state>;

/// A session's result (route_response.result) and the reply the user
/// should see ("" for none).
struct session_answer {
  std::string result;
  std::string reply;
};

/// What does a session's work: one implementation per runtime, made once
/// per session by `make_session_adapter`. The session actor owns the
/// protocol (steer inbox, cancel, timeout, reporting to the butler); the
/// adapter runs the work and hears about the session's messages.
class session_adapter {
 public:
  virtual ~session_adapter();

  /// Begins the work. It ends with `done_atom, adapter_result` to the
  /// session (an adapter that blocks sends it from its own thread), or,
  /// for an adapter that runs turns on the session's clock, by finishing
  /// the session from `on_turn`.
  virtual void start(session_ptr self) = 0;

  /// A turn the adapter timed has ended (`turn_atom`). Adapters that time
  /// no turns never get one.
  virtual void on_turn(session_ptr self);

  /// The session is cancelled or timed out: stop the work under way (kill
  /// a process group, end retries). Nothing to stop by default.
  virtual void stop();

  /// Steer input was added to `self->state.steer_inbox`. Adapters that run
  /// on a thread of their own move it into their `steer_box` here; the
  /// default leaves it in the inbox for the adapter's next turn (scripted).
  virtual void on_steer(session_ptr self);

  /// What the session answers for the adapter's final text.
  virtual session_answer answer(std::string text) const;

  /// The answer to the adapter's approval request `key` (see
  /// `approve_atom`). Adapters that never ask ignore it.
  virtual void on_approval(const std::string& key, bool approved);
};

/// The adapter for sessions of `params.kind`.
std::unique_ptr<session_adapter> make_session_adapter(
  const session_params& params);

struct session_state {
  static inline const char* name = "session";
  session_params params;
  work_item item;
  route_envelope env;
  butler_actor butler;
  /// The attachments the request names, read before the runtime starts
  /// (those no longer stored are left out), and for runtimes that take
  /// files, where each was written (same order; removed at the end).
  std::vector<attachment_data> attachments;
  std::vector<std::string> attachment_paths;
  std::chrono::steady_clock::time_point started;
  /// Runs the work (see `session_adapter`).
  std::unique_ptr<session_adapter> adapter;
  /// Steer inputs not yet applied (drained at the next boundary), and who
  /// hears about applied ones.
  std::vector<steer_input> steer_inbox;
  caf::actor observer;
  /// The turns begun so far (the adapter's turns).
  uint32_t turn = 0;
  /// Tokens and cost so far (the adapter's latest `usage_atom`, then its
  /// result's).
  session_usage usage;
  /// Streamed text not yet passed to the observer, and whether a flush is
  /// scheduled (deltas are coalesced for `delta_flush`).
  std::string deltas;
  bool flush_due = false;
  /// Deltas dropped because `deltas` was full (the transcript still gets
  /// the final text).
  uint64_t deltas_dropped = 0;
  /// The outcome went to the butler; later events are ignored.
  bool finished = false;
  /// The adapter started (after the budget check, if any).
  bool running = false;
  /// The room the budgets leave this session (unbounded without budgets);
  /// every `usage_atom` is checked against it.
  run_budget budget;
  /// The session's capability token for its tools ("" without tools);
  /// revoked when the session ends, however it ends.
  std::string token;
};

/// How long a session coalesces streamed text before passing it on, and
/// the most it holds meanwhile (more is dropped and counted).
constexpr std::chrono::milliseconds delta_flush{50};
constexpr size_t max_pending_delta_bytes = 64 * 1024;

/// A running session (see `session_actor`).
session_actor::behavior_type session(
  session_actor::stateful_pointer<session_state> self, session_params params,
  work_item item, route_envelope env, butler_actor butler, session_steer steer);

/// A delivery's `session_outcome`, as its session would report it, from
/// what its adapters did.
session_outcome delivery_outcome(const work_item& item,
                                 const route_envelope& env,
                                 std::chrono::steady_clock::time_point started,
                                 adapter_result r);

/// Runs `item` without a session actor where its runtime allows: the
/// messenger's deliveries when only nonblocking adapters (outboxes) serve
/// the channel, or when the delivery is refused outright. Nothing blocks,
/// nothing can be steered and nothing needs a timer of its own (each
/// session actor's start and end cost as much CPU as the delivery). The
/// lines go to their files' writer threads and `butler` gets the
/// `session_outcome` (done_atom) as from a session. Returns false, doing
/// nothing, when the item needs a session (any other runtime, or a
/// delivery through an adapter that blocks, such as a webhook).
bool run_without_session(const session_params& params, const work_item& item,
                         const route_envelope& env, butler_actor butler);

/// Gives a CLI session's process its tools: BUTLERS_MCP_URL and
/// BUTLERS_MCP_TOKEN in its environment, and for the claude family
/// `--mcp-config FILE --allowedTools ...` (the file, 0600, names the
/// server "butlers" over HTTP with the token as its Authorization header,
/// and is removed when the session ends), for codex `-c
/// mcp_servers.butlers.url=...` with `bearer_token_env_var`. Nothing
/// without a token.
void add_session_tools(session_ptr self, cli_family family,
                       std::vector<std::string>& argv,
                       std::vector<std::pair<std::string, std::string>>& env);

/// Decides the adapter's approval request `key` for `tool`: by the
/// butler's policy, or by the run's starter through the tool server (needs
/// the session's token; without one it is denied). The answer goes to
/// `adapter->on_approval`.
void ask_approval(session_ptr self, std::string key, std::string tool,
                  std::string summary);

/// The prompt a CLI runtime gets: the butler's role, the request context as
/// data, and the user's text fenced as untrusted data (spec 001 §6.1).
std::string cli_prompt(const std::string& butler, const route_envelope& env);

/// How a session step reports a failure: error class, message, retryable.
using session_fail_fn = std::function<void(std::string, std::string, bool)>;

/// Reads the request's attachments into the session's state and, for the
/// runtimes that take files, writes them to a directory of the session's
/// own (actors/session_attachments.cpp); then `then`, or `failed`.
void load_session_attachments(session_ptr self, std::function<void()> then,
                              session_fail_fn failed);

} // namespace butlers
