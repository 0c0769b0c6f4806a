#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace butlers {

/// The LLM command-line tools a butler session can run.
enum class cli_family {
  /// Claude Code: `claude -p --output-format json`.
  claude,
  /// OpenAI Codex: `codex exec --json`.
  codex,
  /// Opencode: `opencode run` (plain text, or `--format json` events).
  opencode,
};

/// Parses "claude", "codex" or "opencode" (exactly, lower case).
std::optional<cli_family> parse_cli_family(std::string_view name);

/// The family's name, as `parse_cli_family` accepts it.
const char* to_string(cli_family family);

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
