#pragma once

// The logic of the `scripted` runtime adapter (the embedded default and the
// benchmark workhorse): how many turns of what length, whether a session
// fails and with which class, and the reply. The session actor drives it
// with timers, so no thread blocks per session.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.hpp"

namespace butlers {

/// True for the classes a retry may help with (spec 001 §10.3): timeout,
/// target_unavailable and overload_rejected.
bool is_retryable_class(std::string_view cls);

/// Replaces `{butler}`, `{prompt}`, `{request_id}` and `{turns}` in
/// `templ`; other braces are left as they are. Placeholders in the
/// substituted values are not expanded again.
std::string render_reply(std::string_view templ, std::string_view butler,
                         std::string_view prompt, std::string_view request_id,
                         uint32_t turns);

/// A scripted tool call (`runtime.tool_calls`, JSON) with every
/// `{prompt}` replaced by the prompt, escaped for a JSON string: what the
/// session was asked reaches its tools as a person's words would.
std::string render_tool_call(std::string_view call, std::string_view prompt);

/// `reply` cut into `parts` pieces at spaces (as evenly as its words
/// allow; a piece may be empty when there are fewer words than parts), in
/// order: joined, they are `reply` again. Each piece after the first
/// starts with the space before its first word.
std::vector<std::string> split_reply(std::string_view reply, uint32_t parts);

/// One scripted session's script.
struct scripted_script {
  std::chrono::milliseconds turn{0};
  uint32_t turns = 1;
  /// Fails after the last turn with `fail_class` instead of replying.
  bool fail = false;
  std::string fail_class;
  std::string reply;
};

/// Draws the script of the session for `work_id`. With a non-zero
/// `cfg.seed` the failure draw is a pure function of (seed, work_id), so a
/// test or benchmark run is reproducible and a retried item draws again
/// only if its id changes. `attempt` (of the subrequest) fails outright
/// while it is at most `cfg.fail_attempts`. `attempt` (of the subrequest) fails
/// outright while it is at most `cfg.fail_attempts`.
scripted_script make_script(const runtime_config& cfg, std::string_view butler,
                            std::string_view work_id, std::string_view prompt,
                            std::string_view request_id, uint32_t attempt = 1);

} // namespace butlers
