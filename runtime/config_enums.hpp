#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "runtime/error.hpp"

// The kinds, modes and states of node.toml as enums. Each enum has one name
// table (config_enums.cpp) that gives both `to_string` and `parse_enum`, and
// that parse_config reads and check-config prints through.

namespace butlers {

/// `[node]` `log_level`: the minimum level of log lines.
enum class severity { trace, debug, info, warn, error };

/// `[router]` `kind`: how a request becomes a plan.
enum class router_kind {
  /// Registry keywords and triggers.
  rules,
  /// An LLM CLI whose plan must validate.
  cli,
};

/// The LLM command-line tools a butler session or the router can run.
enum class cli_family {
  /// Claude Code: `claude -p --output-format json`.
  claude,
  /// OpenAI Codex: `codex exec --json`.
  codex,
  /// Opencode: `opencode run` (plain text, or `--format json` events).
  opencode,
};

/// `[butler.runtime]` `kind`: the adapter a butler's sessions run on.
enum class runtime_kind {
  /// Canned replies after a delay, with injected failures.
  scripted,
  /// An LLM CLI in a subprocess.
  cli,
  /// An OpenAI-compatible chat completions API over HTTP (SSE streaming).
  openai,
  /// The Anthropic Messages API over HTTP (SSE streaming).
  anthropic,
  /// The messenger's channel adapters; set by the runtime for the
  /// messenger, never accepted from a file.
  delivery,
  /// No session: workers outside the node take the items over HTTP
  /// (actors/external_runner.hpp).
  external,
};

/// `[butler.runtime]` `prompt_via`: how the prompt reaches a CLI.
enum class prompt_passing {
  /// Written to the program's standard input ("stdin").
  on_stdin,
  /// Appended as the last argument ("argument").
  as_argument,
};

/// `[switchboard]` `fanout_mode`: how the segments of a plan are dispatched.
enum class fanout_kind { parallel, ordered, conditional };

/// `[switchboard]` `fairness`: the sources the hot path serves in turn
/// (see runtime/fair_queue.hpp).
enum class fairness_mode { sender, channel, off };

/// `[[messenger.adapter]]` `kind`: an outbound channel adapter.
enum class adapter_kind {
  /// POSTs the notify.v1 envelope to an http:// URL.
  webhook,
  /// Appends JSON lines to a file.
  outbox,
  /// Telegram Bot API: sendMessage to the source chat, lifecycle reactions.
  telegram,
  /// Mails the reply through an SMTP relay (smtp:// or smtps://).
  smtp,
  /// Slack Web API: chat.postMessage in the source thread, lifecycle
  /// reactions.
  slack,
};

/// `[[connector]]` `type`: the channel a connector reads.
enum class connector_type { http, jsonl, maildir, telegram, slack };

/// `[[connector]]` `mode`: how a telegram connector receives updates.
enum class connector_mode {
  /// Telegram POSTs each Update to `/v1/connectors/{name}/webhook`.
  webhook,
  /// The connector long-polls `getUpdates`.
  poll,
};

/// `[scheduler]` `policy`: CAF's scheduling policy.
enum class scheduler_policy { stealing, sharing };

/// `[telemetry]` `encoding`: how spans are encoded for OTLP/HTTP.
enum class otlp_encoding {
  /// `application/json` (the OTLP JSON Protobuf Encoding).
  json,
  /// `application/x-protobuf`.
  protobuf,
};

/// One enumerator and its name in node.toml.
template<class E>
struct enum_name {
  /// The enumerator.
  E value;
  /// Its name, as the file spells it.
  const char* name;
};

/// The name table of `E`, in the order error messages list the names.
template<class E>
const std::vector<enum_name<E>>& enum_names();

template<>
const std::vector<enum_name<severity>>& enum_names<severity>();
template<>
const std::vector<enum_name<router_kind>>& enum_names<router_kind>();
template<>
const std::vector<enum_name<cli_family>>& enum_names<cli_family>();
template<>
const std::vector<enum_name<runtime_kind>>& enum_names<runtime_kind>();
template<>
const std::vector<enum_name<prompt_passing>>& enum_names<prompt_passing>();
template<>
const std::vector<enum_name<fanout_kind>>& enum_names<fanout_kind>();
template<>
const std::vector<enum_name<fairness_mode>>& enum_names<fairness_mode>();
template<>
const std::vector<enum_name<adapter_kind>>& enum_names<adapter_kind>();
template<>
const std::vector<enum_name<connector_type>>& enum_names<connector_type>();
template<>
const std::vector<enum_name<connector_mode>>& enum_names<connector_mode>();
template<>
const std::vector<enum_name<scheduler_policy>>& enum_names<scheduler_policy>();
template<>
const std::vector<enum_name<otlp_encoding>>& enum_names<otlp_encoding>();
/// `[butler.runtime]` `fail_class`: only the error classes of the taxonomy
/// (spec 001 §10.6), not the internal codes.
template<>
const std::vector<enum_name<butlers_errc>>& enum_names<butlers_errc>();

/// The name of `x` in its table; "" for a value the table lacks.
template<class E>
const char* name_of(E x) {
  for (auto& entry : enum_names<E>())
    if (entry.value == x)
      return entry.name;
  return "";
}

/// The enumerator called `name` (exactly, lower case), or nothing.
template<class E>
std::optional<E> parse_enum(std::string_view name) {
  for (auto& entry : enum_names<E>())
    if (name == entry.name)
      return entry.value;
  return std::nullopt;
}

inline const char* to_string(severity x) {
  return name_of(x);
}
inline const char* to_string(router_kind x) {
  return name_of(x);
}
inline const char* to_string(cli_family x) {
  return name_of(x);
}
inline const char* to_string(runtime_kind x) {
  return name_of(x);
}
inline const char* to_string(prompt_passing x) {
  return name_of(x);
}
inline const char* to_string(fanout_kind x) {
  return name_of(x);
}
inline const char* to_string(fairness_mode x) {
  return name_of(x);
}
inline const char* to_string(adapter_kind x) {
  return name_of(x);
}
inline const char* to_string(connector_type x) {
  return name_of(x);
}
inline const char* to_string(connector_mode x) {
  return name_of(x);
}
inline const char* to_string(scheduler_policy x) {
  return name_of(x);
}
inline const char* to_string(otlp_encoding x) {
  return name_of(x);
}

} // namespace butlers
