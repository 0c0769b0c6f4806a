#pragma once

// The session adapters that live in files of their own (the streaming
// runtimes); `make_session_adapter` (actors/session.cpp) picks one per
// session. Each runs its model on a thread of its own and talks to its
// session actor only by messages:
//   - `delta_atom, std::string`: text as it is written (coalesced there);
//   - `usage_atom, session_usage`: tokens and cost so far (cumulative),
//     whenever the runtime reports them (the session checks its budget);
//   - `steer_atom, steer_applied`: steer inputs it passed to the model at a
//     boundary (the session tells the thread);
//   - `done_atom, adapter_result`: the end, with the final text and usage.
// Steer input reaches it through `session_adapter::on_steer`, which moves
// the session's inbox into the adapter's `steer_box`; `stop()` must end the
// work (kill the process group, abort the HTTP stream) within a second.

#include <memory>

#include "actors/session.hpp"

namespace butlers {

/// `claude -p --input-format stream-json --output-format stream-json`: one
/// process per run, prompt and steer inputs as NDJSON user messages.
std::unique_ptr<session_adapter> make_claude_adapter();

/// `codex app-server` over stdio: thread/start, turn/start, turn/steer.
std::unique_ptr<session_adapter> make_codex_adapter();

/// An HTTP model API with SSE streaming: OpenAI chat completions
/// (`kind = "openai"`) or Anthropic messages (`kind = "anthropic"`).
std::unique_ptr<session_adapter> make_http_model_adapter();

} // namespace butlers
