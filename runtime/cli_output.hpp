#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config_enums.hpp"

namespace butlers {

/// The command that runs one non-interactive turn with the prompt on stdin:
/// `claude -p --output-format json`, `codex exec --json`, `opencode run`.
std::vector<std::string> default_command(cli_family family);

/// What a CLI answered, read from its stdout.
struct cli_answer {
  /// Whether `text` holds an answer; an empty answer is not one.
  bool ok = false;
  /// The final answer.
  std::string text;
  /// Why there is no answer: the CLI's own error message, or what was wrong
  /// with its output.
  std::string error;
};

/// Extracts the final answer from a CLI's complete stdout. Looks only at
/// the text: the caller combines it with how the process ended (a crash
/// after a complete answer still yields `ok`). Never throws on malformed
/// input, whatever its size.
cli_answer parse_cli_output(cli_family family, std::string_view out);

} // namespace butlers
