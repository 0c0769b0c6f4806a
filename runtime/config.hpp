#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attachments.hpp"
#include "runtime/config_enums.hpp"
#include "runtime/rate_limit.hpp"
#include "runtime/retention.hpp"

namespace butlers {

// -- sections of node.toml ----------------------------------------------------

/// `[node]`: identity and life cycle of this process.
struct node_config {
  /// Name of this node in logs and in the cluster. Default "butlers-1";
  /// 1..64 characters of `[A-Za-z0-9._-]`, starting with a letter or digit.
  std::string name = "butlers-1";
  /// Seconds a graceful shutdown waits for in-flight work before leaving it
  /// `accepted` for the next start. Default 10, range 0..3600.
  uint32_t drain_deadline_s = 10;
  /// Minimum log level: trace, debug, info, warn or error. Default info.
  severity log_level = severity::info;
};

/// `[database]`: the PostgreSQL the inbox lives in.
struct database_config {
  /// libpq connection URI or key=value string; empty means no database (the
  /// ingest API then answers 503). Default "". Usually set through
  /// BUTLERS_DATABASE_URL.
  std::string url;
  /// Reader connections: reads go to an idle one, so a slow read holds up
  /// only its own connection. Default 4, range 1..64.
  uint32_t pool_size = 4;
  /// Reads waiting for an idle reader connection, beyond which a read is
  /// refused (`overload_rejected`). Default 1024, range 1..100000.
  uint32_t reader_queue = 1024;
  /// Milliseconds any statement of the node's sessions (writer, readers,
  /// scanner) may run before PostgreSQL cancels it; 0 means no limit.
  /// Default 30000, range 0..3600000.
  uint32_t statement_timeout_ms = 30000;
  /// Milliseconds a statement may wait for a lock before PostgreSQL cancels
  /// it; 0 means no limit. Default 5000, range 0..3600000.
  uint32_t lock_timeout_ms = 5000;
  /// Connections of the inbox writer. Default 4, range 1..16. With two or
  /// more, the first `lanes` carry lifecycle and routing writes and the
  /// others group-commit new requests and new work items, so neither waits
  /// behind the other; with one, it carries all.
  uint32_t writer_connections = 4;
  /// Lanes of lifecycle and routing writes: the writes of one request (work
  /// item, thread) always take the same lane and commit in submission
  /// order, one batch per lane at a time; lanes commit side by side.
  /// Default 3, range 1..16; at most writer_connections - 1 are used (one
  /// connection is kept for appends).
  uint32_t lanes = 3;
  /// Most writes per group commit. Default 256, range 1..10000.
  uint32_t max_batch = 256;
  /// Microseconds a group commit of new requests waits, after the previous
  /// one went out, for more to join it (a full batch never waits; 0: each
  /// goes out as soon as the writer's mailbox is empty). Default 1000, range
  /// 0..100000.
  uint32_t group_commit_delay_us = 1000;
  /// Seconds to wait for a connection. Default 5, range 1..300.
  uint32_t connect_timeout_s = 5;
  /// Months of inbox partitions kept before dropping. Default 1, range 1..120.
  uint32_t retention_months = 1;
  /// Monthly partitions created ahead of time. Default 2, range 0..24.
  uint32_t partitions_ahead = 2;
};

/// One `[[http.credential]]`: a bearer token for part of the API, stored
/// as its SHA-256 (actors/README.md "Roles").
struct http_credential_config {
  /// Names it in logs and refusals; unique. Required, a plain name.
  std::string name;
  /// "ingest", "worker", "operator", "read" or "thread". Required.
  std::string role;
  /// SHA-256 of the token, 64 hex digits (`butlers-node hash-token`).
  /// Required.
  std::string token_sha256;
  /// ingest: only the routes of this `[[connector]]`. Default "".
  std::string connector;
  /// ingest: only POST /v1/ingest envelopes of this
  /// source.endpoint_identity. Default "".
  std::string endpoint_identity;
  /// worker: the butler whose work items it takes. Required for worker.
  std::string butler;
  /// thread: only this thread. Default "".
  std::string thread_id;
  /// thread: only the threads this sender started. Default "".
  std::string sender;
};

/// `[http]`: the ingest, thread and operator API.
struct http_config {
  /// Whether to serve HTTP at all. Default true.
  bool enabled = true;
  /// Address to listen on; anything but loopback (127.0.0.0/8, ::1,
  /// localhost) requires `token` or a credential. Default "127.0.0.1".
  std::string bind = "127.0.0.1";
  /// TCP port; 0 picks a free port. Default 8470, range 0..65535.
  uint16_t port = 8470;
  /// Bearer token every request must carry; empty means none. Default "".
  /// Usually set through BUTLERS_HTTP_TOKEN.
  std::string token;
  /// Largest request body; larger ones get 413. Default 1048576 (1 MiB),
  /// range 1024..67108864 (1 KiB..64 MiB).
  uint64_t max_body_bytes = 1048576;
  /// Server threads. Default 2, range 1..64.
  uint32_t threads = 2;
  /// Most open connections. Default 1024, range 1..65536.
  uint32_t max_connections = 1024;
  /// Deadline of one request in milliseconds. Default 5000, range 1..600000.
  uint32_t request_timeout_ms = 5000;
  /// `[[http.credential]]`: scoped bearer tokens beside `token`.
  std::vector<http_credential_config> credentials;
};

/// `[switchboard]`: the ingest boundary, classification pool and cold path.
struct switchboard_config {
  /// Whether this node takes ingress. Default true.
  bool enabled = true;
  /// Admission limit: ingest requests awaiting commit; above it the API
  /// answers 429. Default 2048, range 1..1000000.
  uint32_t max_in_flight = 2048;
  /// Hot-path queue in front of the classification pool; when full, work is
  /// deferred to the cold path. Default 100, range 1..1000000.
  uint32_t queue_capacity = 100;
  /// Classification workers. Default 3, range 1..256.
  uint32_t workers = 3;
  /// Seconds between cold-path scans. Default 30, range 1..3600.
  uint32_t scanner_interval_s = 30;
  /// Age in seconds before an `accepted` row is re-enqueued by the scanner.
  /// Default 10, range 0..3600.
  uint32_t scanner_grace_s = 10;
  /// Rows claimed per scan. Default 50, range 1..10000.
  uint32_t scanner_batch_size = 50;
  /// Seconds a claim (lease) lasts unless heartbeated. Default 60,
  /// range 1..86400.
  uint32_t lease_s = 60;
  /// Time bucket in seconds for hashed dedupe keys. Default 300,
  /// range 1..86400.
  uint32_t dedupe_window_s = 300;
  /// Seconds from dispatching a segment to its final route_response before
  /// it counts as `timeout`. Default 1800, range 1..86400.
  uint32_t route_timeout_s = 1800;
  /// Full-jitter exponential backoff between attempts: base and cap in ms.
  /// Defaults 500 and 30000, ranges 1..600000.
  uint32_t retry_base_ms = 500;
  uint32_t retry_cap_ms = 30000;
  /// Consecutive failures that open a target's circuit. Default 5,
  /// range 1..1000.
  uint32_t circuit_failure_threshold = 5;
  /// Seconds an open circuit waits before a half-open probe. Default 30,
  /// range 1..3600.
  uint32_t circuit_open_s = 30;
  /// Fanout mode of plans: parallel, ordered or conditional. Default
  /// parallel.
  fanout_kind fanout_mode = fanout_kind::parallel;
  /// Requests dispatched and awaiting their outcomes; above it workers stop
  /// claiming new rows. Default 10000, range 1..1000000.
  uint32_t max_in_progress = 10000;
  /// Subrequests held back because their butler's queue was full
  /// (`overload_rejected` at its door): they wait for room instead of using
  /// up their retries. While this many wait, workers claim no new rows; the
  /// messages stay `accepted` in the inbox until there is room. Default 64,
  /// range 1..100000.
  uint32_t max_waiting = 64;
  // -- fair admission --
  /// Sources the hot path serves in turn: "sender" (channel, sender),
  /// "channel", or "off" (one FIFO). Default sender.
  fairness_mode fairness = fairness_mode::sender;
  /// Most hot-path requests of one source; 0 means `queue_capacity`.
  /// Default 0, range 0..1000000.
  uint32_t source_queue_capacity = 0;
};

/// One `[[router.rule]]`: a hard allow/deny policy applied before the
/// router's choice is final (spec 001 §15.2).
struct routing_rule_config {
  /// Source channels it applies to (telegram, slack, email, api, mcp) or "*".
  /// Default {"*"}.
  std::vector<std::string> channels{"*"};
  /// When non-empty, only these butlers may be targeted. Default empty.
  std::vector<std::string> allow;
  /// Butlers that may never be targeted. Default empty.
  std::vector<std::string> deny;
};

/// `[router]`: how a request becomes a plan.
struct router_config {
  /// rules (registry keywords and triggers) or cli (an LLM CLI). Default
  /// rules.
  router_kind kind = router_kind::rules;
  /// Plans under this confidence go to `general` whole (§15.1). Default 0.5,
  /// range 0.0..1.0.
  double confidence_threshold = 0.5;
  /// cli: claude, codex or opencode. Default claude.
  cli_family family = cli_family::claude;
  /// cli: program and arguments; empty = the family's default. Default empty.
  std::vector<std::string> command;
  /// cli: seconds the router CLI may run. Default 60, range 1..3600.
  uint32_t timeout_s = 60;
  /// cli: largest stdout accepted. Default 262144, range 1024..67108864.
  uint64_t max_output_bytes = 262144;
  /// `[[router.rule]]`, in file order.
  std::vector<routing_rule_config> rules;
};

/// One `[[policy]]`: per-request budgets of a policy tier (§15.7, §15.8).
struct policy_config {
  /// "default", "interactive" or "high_priority" (ingest.v1
  /// control.policy_tier), required, unique.
  std::string tier;
  /// Wall-clock budget of a request, from receipt to its terminal state.
  /// Default 3600, range 1..604800.
  uint32_t wall_clock_s = 3600;
  /// Dispatches (first attempts, retries, replays) a request may make.
  /// Default 16, range 1..10000.
  uint32_t max_invocations = 16;
  /// Attempts per segment including the first. Default 3, range 1..100.
  uint32_t retry_max_attempts = 3;
};

/// One `[[budget]]`: token and cost limits (spec 001 §15.7) for the requests
/// and sessions its selectors match. Every matching budget applies; the
/// smallest limit of each kind wins. 0 means no limit of that kind; at
/// least one limit is set.
struct budget_config {
  /// Butlers it applies to, or "*". Default {"*"}.
  std::vector<std::string> butlers{"*"};
  /// Source channels (telegram, slack, email, api, mcp) or "*". Default
  /// {"*"}.
  std::vector<std::string> channels{"*"};
  /// Policy tiers (default, interactive, high_priority) or "*". Default
  /// {"*"}.
  std::vector<std::string> tiers{"*"};
  /// Tokens (input, output and cache) the sessions of one request may use,
  /// over all its segments and attempts. Default 0 (none), range
  /// 0..1000000000000.
  uint64_t request_tokens = 0;
  /// US dollars the sessions of one request may cost. Default 0.0 (none),
  /// range 0.0..1000000.0.
  double request_cost_usd = 0.0;
  /// Tokens one sender's sessions of one butler may use per UTC day.
  /// Default 0 (none), range 0..1000000000000.
  uint64_t daily_tokens = 0;
  /// US dollars one sender's sessions of one butler may cost per UTC day.
  /// Default 0.0 (none), range 0.0..1000000.0.
  double daily_cost_usd = 0.0;
};

/// `[butler.runtime]`: the adapter a butler's sessions run on.
struct runtime_config {
  /// scripted, cli or external (delivery only for the messenger, set by
  /// the runtime). Default scripted.
  runtime_kind kind = runtime_kind::scripted;
  // -- scripted
  /// Milliseconds per turn. Default 200, range 0..3600000.
  uint32_t turn_ms = 200;
  /// Turns per session. Default 1, range 1..1000.
  uint32_t turns = 1;
  /// Fraction of sessions that fail. Default 0.0, range 0.0..1.0.
  double fail_rate = 0.0;
  /// The first N dispatch attempts of every subrequest fail (the attempt
  /// is read from the route.v1 segment id), whatever fail_rate says: for
  /// testing retries, dead letters and circuits. Default 0, range 0..1000.
  uint32_t fail_attempts = 0;
  /// Error class of injected failures: one of the taxonomy classes
  /// classification_error, validation_error, routing_error, target_unavailable,
  /// timeout, overload_rejected, internal_error. Default timeout.
  butlers_errc fail_class = butlers_errc::timeout;
  /// Reply template; {butler}, {prompt}, {request_id}, {turns} are replaced.
  /// Default "{butler}: {prompt}".
  std::string reply = "{butler}: {prompt}";
  /// Seed of the failure draw; 0 (default) seeds from the clock. TOML
  /// integers are signed, so the file can give 0..9223372036854775807.
  uint64_t seed = 0;
  /// Synthetic usage, reported after every turn as one model call (for
  /// testing usage records and budgets; nothing is reported while all are
  /// unset): input tokens of each call. Default 0, range 0..1000000000.
  uint64_t input_tokens = 0;
  /// Output tokens of each call. Default 0, range 0..1000000000.
  uint64_t tokens_per_turn = 0;
  /// US dollars of each call. Default 0.0, range 0.0..1000.0.
  double cost_per_turn_usd = 0.0;
  /// Streams the reply as deltas, one part per turn (split at spaces), to a
  /// thread's event stream. Default false.
  bool stream_reply = false;
  /// Tool calls the session makes, in order, after its turns and before
  /// its reply: each a JSON object `{"name": TOOL, "arguments": {...}}`
  /// (runtime/tools.md). Their results are in the session's
  /// result. Default empty.
  std::vector<std::string> tool_calls;
  // -- scripted and model runtimes
  /// The model the runtime uses (scripted: the one it reports; openai,
  /// anthropic: the name sent with every call, required for them;
  /// recorded with the session's usage). Default "".
  std::string model;
  // -- cli
  /// Output family: claude, codex or opencode. Default claude.
  cli_family family = cli_family::claude;
  /// Program and arguments; empty (default) means the family's default
  /// (claude -p --output-format json | codex exec --json | opencode run).
  std::vector<std::string> command;
  /// How the prompt reaches the program: "stdin" or "argument". Default
  /// "stdin".
  prompt_passing prompt_via = prompt_passing::on_stdin;
  /// Largest stdout accepted; more kills the session. Default 1048576,
  /// range 1024..67108864.
  uint64_t max_output_bytes = 1048576;
  /// Milliseconds between SIGTERM and SIGKILL of the process group. The
  /// default keeps a cancel (and a budget stop) under a second even for a
  /// CLI that ignores SIGTERM. Default 500, range 0..60000.
  uint32_t kill_grace_ms = 500;
  // -- openai, anthropic (HTTP model APIs; actors/session_http_model.cpp)
  /// The server's root, http:// or https:// (`/v1/chat/completions` or
  /// `/v1/messages` is appended). Required for these kinds.
  std::string base_url;
  /// Environment variable holding the API key; "" (default) sends none
  /// (local servers).
  std::string api_key_env;
  /// Most output tokens per call; 0 (default): openai sends none (the
  /// server's default), anthropic sends 4096. Range 0..1000000.
  uint32_t max_tokens = 0;
  /// Sampling temperature; unset (default, -1) sends none. Range 0.0..2.0.
  double temperature = -1.0;
  /// System prompt, inline; at most one of system_prompt and
  /// system_prompt_file. Default "" (none).
  std::string system_prompt;
  /// File the system prompt is read from when the configuration is loaded
  /// (relative to the configuration file). Default "".
  std::string system_prompt_file;
  /// Seconds one model call (one HTTP request) may take. Default 300,
  /// range 1..86400.
  uint32_t timeout_s = 300;
  /// Most model calls per run (the first, one per boundary with steer
  /// input, and the retries are not counted). Default 16, range 1..1000.
  uint32_t max_model_calls = 16;
  /// Retries of one call after a 429, a 5xx, a transport failure or a cut
  /// stream. Default 3, range 0..100.
  uint32_t retries = 3;
  /// First backoff before a retry, doubled each time. Default 500, range
  /// 1..600000.
  uint32_t retry_base_ms = 500;
  /// Longest wait before a retry, also for a longer `retry-after`.
  /// Default 30000, range 1..3600000.
  uint32_t retry_max_ms = 30000;
  /// Not a key: the text of system_prompt_file, read by `load_config`.
  std::string system_prompt_text;
  // -- external
  /// Deliveries of an item to workers; a failed last one dead-letters it.
  /// Default 5, range 1..1000.
  uint32_t max_deliveries = 5;
  /// Visibility of a delivery when a recv asks for none. Default 30000,
  /// range 250..43200000.
  uint32_t visibility_ms = 30000;
  /// recv calls that may wait (long poll) at once; more answer 429.
  /// Default 64, range 1..10000.
  uint32_t max_waiting_receivers = 64;
};

/// One `[[butler.schedule]]`: work a butler starts by itself.
struct schedule_config {
  /// Name, required, unique within the butler; `^[a-z][a-z0-9_-]{0,63}$`.
  std::string name;
  /// Seconds between runs; exactly one of every_s and cron. Default 0
  /// (unset), range 1..31536000 when set.
  uint32_t every_s = 0;
  /// Five-field cron expression (minute hour day-of-month month day-of-week,
  /// UTC). Default "" (unset). Only the five whitespace-separated fields are
  /// checked here; the scheduler parses it fully.
  std::string cron;
  /// Prompt of the scheduled session, required, non-empty.
  std::string prompt;
  /// Where the session's reply (and a `notify` without a recipient) goes:
  /// "channel:recipient", e.g. "telegram:123456789". Default "" (the
  /// reply goes to the `api` outbox).
  std::string notify_to;
  /// A fire missed while no node ran the butler: "skip" (default) lets it
  /// go; "once" runs the latest missed fire once at start.
  std::string catch_up = "skip";
};

/// One `[[butler]]`: a specialist and its session pool.
struct butler_config {
  /// Unique name, required; matches `^[a-z][a-z0-9_-]{0,63}$`. "messenger"
  /// is taken (`[messenger]`); "general" overrides the built-in fallback.
  std::string name;
  /// What the butler is for, shown in the registry. Default "".
  std::string description;
  /// Natural-language trigger conditions, for routers. Default empty.
  std::vector<std::string> triggers;
  /// Words the rules router matches; a butler without keywords only gets
  /// fallback traffic. Default empty.
  std::vector<std::string> keywords;
  /// Tools the butler accepts (route.v1 target.tool). Default
  /// {"route.execute"}. Each matches `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`.
  std::vector<std::string> capabilities{"route.execute"};
  /// Sessions running at once. Default 1, range 1..256.
  uint32_t max_concurrent_sessions = 1;
  /// Work items waiting for a session slot. Default 100, range 0..100000.
  uint32_t max_pending = 100;
  /// Seconds a session may run before it is cancelled. Default 600,
  /// range 1..86400.
  uint32_t session_timeout_s = 600;
  /// Seconds a work item's lease lasts; renewed while held. Default 30,
  /// range 2..86400.
  uint32_t lease_s = 30;
  /// Node hosting the butler; "" (default) or this node's name means local.
  std::string node;
  /// `[butler.runtime]`.
  runtime_config runtime;
  /// `[[butler.schedule]]`, in file order.
  std::vector<schedule_config> schedules;
  /// Whom the butler's sessions may `notify` besides the person who asked:
  /// "channel:recipient" each, e.g. "telegram:123456789" or
  /// "email:ops@example.org". Default empty.
  std::vector<std::string> recipients;
  /// Tool calls one session may make; 0 gives its sessions no tools.
  /// Default 64, range 0..10000.
  uint32_t max_tool_calls = 64;
  /// What happens when a session wants a tool that needs a person's yes
  /// (runtime/approvals.md): "ask" the run's starter, "allow" or "deny"
  /// without asking. Default "deny".
  std::string approvals = "deny";
  /// Tool names (`*` globs) approved without asking. Default empty.
  std::vector<std::string> approvals_allow;
  /// Tool names (`*` globs) refused without asking; they win over
  /// `approvals_allow`. Default empty.
  std::vector<std::string> approvals_deny;
  /// Seconds a question waits for its answer before it is denied
  /// (expired). Default 600, range 1..86400.
  uint32_t approval_timeout_s = 600;
};

/// `[messenger.adapter.reactions]` of a telegram adapter: the emoji of each
/// lifecycle state (spec 001 §8) set on the source message. Each must be one
/// of Telegram's reaction emoji (runtime/telegram_reactions.hpp).
struct reaction_config {
  /// PROGRESS: received, processing started. Default "👀".
  std::string progress = "\xf0\x9f\x91\x80";
  /// PARSED: every target succeeded. Default "👍".
  std::string parsed = "\xf0\x9f\x91\x8d";
  /// ERRORED: a target or the processing failed. Default "👾".
  std::string errored = "\xf0\x9f\x91\xbe";
  /// Waiting for a session slot. Default "😴".
  std::string queued = "\xf0\x9f\x98\xb4";
};

/// One `[[messenger.adapter]]`: an outbound channel adapter.
struct delivery_adapter_config {
  /// webhook, outbox, telegram or smtp; required in the file (outbox when
  /// built in code).
  adapter_kind kind = adapter_kind::outbox;
  /// Source channels it delivers for (telegram, slack, email, api, mcp) or
  /// "*" for all. Default {"*"}. A telegram adapter delivers for telegram
  /// only ("*" means that).
  std::vector<std::string> channels{"*"};
  /// webhook: http:// or https:// URL the notify.v1 envelope is POSTed to;
  /// smtp: the relay, smtp://HOST[:PORT] (STARTTLS when offered) or
  /// smtps://HOST[:PORT]. Required for both.
  std::string url;
  /// webhook: bearer token sent as Authorization; default "".
  std::string token;
  /// webhook, telegram, smtp: per-attempt timeout in ms. Default 5000,
  /// range 1..600000.
  uint32_t timeout_ms = 5000;
  /// webhook, telegram, smtp: retries after the first attempt. Default 3,
  /// range
  /// 0..100.
  uint32_t retries = 3;
  /// outbox: file JSON lines are appended to; required for outbox.
  std::string path;
  /// telegram, slack: the `[[connector]]` of that type whose token and
  /// api_base it uses; required for both.
  std::string connector;
  /// telegram, slack: `[messenger.adapter.reactions]` (a slack adapter's
  /// are Slack emoji names, defaults `slack_reaction_defaults()`).
  reaction_config reactions;
  /// telegram: how often the "typing" chat action is repeated while a
  /// request is worked on (Telegram shows one for about 5 s). Default
  /// 4000, range 500..5000.
  uint32_t typing_interval_ms = 4000;
  /// telegram: the longest one request shows "typing", in seconds; 0 shows
  /// none. Default 600, range 0..86400.
  uint32_t typing_max_s = 600;
  /// smtp: the sender, `addr@host` or `Name <addr@host>`; required for
  /// smtp.
  std::string from;
  /// smtp: environment variable holding the relay's user name; unset or
  /// empty means no authentication. Default "BUTLERS_SMTP_USERNAME".
  std::string username_env = "BUTLERS_SMTP_USERNAME";
  /// smtp: environment variable holding the password (never in the file,
  /// never logged). Default "BUTLERS_SMTP_PASSWORD".
  std::string password_env = "BUTLERS_SMTP_PASSWORD";
};

/// `[messenger]`: the only outbound delivery path.
struct messenger_config {
  /// Deliveries at once. Default 64, range 1..256. (An outbox syncs once
  /// for every line that arrives while it syncs: more at once, fewer syncs.
  /// A delivery waiting for its outbox sync holds no thread; webhook
  /// deliveries share at most 8 threads.)
  uint32_t max_concurrent_sessions = 64;
  /// Deliveries waiting. Default 1000, range 0..100000.
  uint32_t max_pending = 1000;
  /// `[[messenger.adapter]]`, in file order. Empty (default) means one outbox
  /// adapter writing "outbox.jsonl" in the working directory; the runtime
  /// applies that default, the settings keep the vector empty.
  std::vector<delivery_adapter_config> adapters;
};

/// One `[[connector]]`: a source of `ingest.v1` envelopes.
struct connector_config {
  /// Unique name, required; matches `^[a-z][a-z0-9_-]{0,63}$`.
  std::string name;
  /// Channel kind, required in the file: http, jsonl, maildir or telegram
  /// (http when built in code).
  connector_type type = connector_type::http;
  /// `source.endpoint_identity` of its envelopes (bot, mailbox, client).
  /// Default "".
  std::string endpoint_identity;
  /// File (jsonl) or directory (maildir) read; required for those two.
  /// Default "".
  std::string path;
  /// Envelopes submitted but not yet acknowledged. Default 8,
  /// range 1..10000.
  uint32_t max_in_flight = 8;
  /// Whether the connector runs. Default true.
  bool enabled = true;
  /// telegram: webhook (Telegram POSTs to the node) or poll (getUpdates).
  /// Default webhook.
  connector_mode mode = connector_mode::webhook;
  /// telegram: the bot token (also `BUTLERS_CONNECTOR_<NAME>_TOKEN`);
  /// required for poll. Never logged. Default "".
  std::string token;
  /// telegram webhook: the `X-Telegram-Bot-Api-Secret-Token` every webhook
  /// request must carry (also `BUTLERS_CONNECTOR_<NAME>_SECRET_TOKEN`);
  /// required for webhook, 1..256 of `A-Za-z0-9_-`. Default "".
  std::string secret_token;
  /// slack: the app's signing secret, which every Events API request is
  /// signed with (also `BUTLERS_CONNECTOR_<NAME>_SIGNING_SECRET`); required
  /// for slack. Never logged. Default "".
  std::string signing_secret;
  /// telegram: base URL of the Bot API; slack: of the Web API, where the
  /// default means "https://slack.com/api" (`slack_api_base`). Tests point
  /// it at a local fake. Default "https://api.telegram.org".
  std::string api_base = "https://api.telegram.org";
  /// telegram poll: the long-poll `timeout` of getUpdates in seconds.
  /// Default 30, range 0..50.
  uint32_t poll_timeout_s = 30;
  /// jsonl, maildir: how often the source is looked at for new input, in
  /// milliseconds. Default 1000, range 10..3600000.
  uint32_t poll_ms = 1000;
};

/// The Web API base of a slack connector: its `api_base`, or
/// "https://slack.com/api" when that is the shared default.
std::string slack_api_base(const connector_config& cn);

/// The lifecycle reactions of a slack adapter when its file names none:
/// Slack emoji names (eyes, white_check_mark, space_invader,
/// hourglass_flowing_sand).
reaction_config slack_reaction_defaults();

/// `BUTLERS_CONNECTOR_<NAME>_<SUFFIX>`: the connector's name upper-cased,
/// `-` as `_` (e.g. "tg-main", "TOKEN" → BUTLERS_CONNECTOR_TG_MAIN_TOKEN).
std::string connector_env_name(const std::string& connector,
                               const std::string& suffix);

/// `[cluster]`: other nodes, reached through CAF's middleman (spec 001
/// §10.7; DESIGN.md "Cluster").
struct cluster_config {
  /// Address the cluster port listens on; anything but loopback requires
  /// `[cluster.tls]`. Default "127.0.0.1".
  std::string bind = "127.0.0.1";
  /// Cluster port this node publishes its registry on; 0 means it does not
  /// listen (with no peers either, clustering is off). Default 0,
  /// range 0..65535.
  uint16_t port = 0;
  /// Peers as "host:port", dialled with exponential backoff. Default empty.
  std::vector<std::string> peers;
  /// Whether this node runs the switchboard, the cold path, the messenger
  /// and the connectors; false makes a butler-only node. Default true.
  bool switchboard = true;
  /// The configured butlers this node hosts; "*" means all of them.
  /// Default ["*"].
  std::vector<std::string> butlers = {"*"};
  /// Middleman heartbeat interval in milliseconds. Default 1000,
  /// range 10..600000.
  uint32_t heartbeat_interval_ms = 1000;
  /// Milliseconds without traffic before a peer counts as lost.
  /// Default 5000, range 10..600000.
  uint32_t connection_timeout_ms = 5000;
  /// Milliseconds a lost node's butlers stay `stale` before they become
  /// `quarantined` (the registry TTL). Default 30000, range 0..86400000.
  uint32_t quarantine_after_ms = 30000;
  /// Ceiling of the reconnect backoff (100 ms doubling) in milliseconds.
  /// Default 5000, range 100..600000.
  uint32_t reconnect_cap_ms = 5000;
  /// `[cluster.tls]` `cert`: PEM certificate of this node; empty means no
  /// TLS. Default "".
  std::string tls_certificate;
  /// `[cluster.tls]` `key`: PEM private key for the certificate. Default "".
  std::string tls_key;
  /// `[cluster.tls]` `ca`: PEM bundle peers' certificates are verified
  /// against. Default "".
  std::string tls_cafile;

  /// Clustering is on: the node listens or dials.
  bool active() const {
    return port != 0 || !peers.empty();
  }
  /// TLS is configured.
  bool tls() const {
    return !tls_certificate.empty();
  }
  /// Whether the configured butler `name` is hosted here.
  bool hosts(const std::string& name) const;
};

// -- connector health and statistics ---------------------

/// `[connectors]`: connector heartbeats and statistics (actors/README.md
/// "Connector health and statistics"; spec 001 §17.5–§17.6).
struct connectors_config {
  /// Seconds between the heartbeats of each in-process `[[connector]]`;
  /// 0 turns them off. Default 30, range 0..3600.
  uint32_t heartbeat_s = 30;
  /// Heartbeats (POSTed or in-process) queued for their write at most;
  /// beyond it POST /v1/connectors/heartbeat answers 429 and the heartbeat
  /// is counted dropped. Default 256, range 1..100000.
  uint32_t heartbeat_queue = 256;
  /// Whether this node runs the scheduled rollups (hourly at minute 5,
  /// daily, fanout and retention at 00:15 UTC). Default true.
  bool rollups = true;
};

/// `[tools]`: the tool server of butler sessions (runtime/tools.md,
/// actors/tool_server.hpp).
struct tool_settings {
  /// The MCP endpoint sessions are given; "" (default) means
  /// http://127.0.0.1:<http.port>/mcp.
  std::string url;
  /// Browser origins allowed to call /mcp; a request with another Origin
  /// header is refused (403). Default empty (sessions send none).
  std::vector<std::string> allowed_origins;
  /// Milliseconds a `notify` call waits for its delivery before it answers
  /// `queued` (it is durable either way). Default 10000, range 0..600000.
  uint32_t notify_wait_ms = 10000;
  /// Milliseconds between sweeps for due reminders. Default 1000, range
  /// 100..60000.
  uint32_t reminder_poll_ms = 1000;
  /// Largest state value (its JSON text) or reminder message. Default
  /// 65536, range 16..1048576.
  uint32_t max_value_bytes = 65536;
  /// Most route_to hops behind a session. Default 3, range 0..16.
  uint32_t max_route_depth = 3;
  /// Tool calls under way at once on the node; more are refused with a
  /// tool error. Default 1024, range 1..100000.
  uint32_t max_in_flight = 1024;
  /// Keep each tool call's arguments in `tool_calls` (request inspection)
  /// and in its thread event; off (default), only their key names are kept:
  /// arguments may hold what people wrote.
  bool record_arguments = false;
};

/// `[threads]`: conversation threads (spec 003).
struct threads_config {
  /// Seconds a thread without an active run, queued run or pending write
  /// stays in memory before its actor is retired (its state is in the
  /// database). Default 300, range 1..86400.
  uint32_t idle_timeout_s = 300;
  /// Runs queued behind an active run (mode "queue") per thread; beyond it
  /// a turn answers 429. Default 16, range 1..1000.
  uint32_t max_queued_runs = 16;
  /// Turns waiting while the thread persists the previous one; beyond it a
  /// turn answers 429. Default 64, range 1..10000.
  uint32_t max_pending_turns = 64;
  /// Open event streams (thread and summary together); beyond it a new
  /// stream answers 429. Default 1024, range 1..100000.
  uint32_t max_subscribers = 1024;
  /// Events buffered per stream while its socket is busy; further events
  /// are dropped and counted (the client backfills from the transcript).
  /// Default 256, range 1..100000.
  uint32_t subscriber_buffer = 256;
  /// Milliseconds between keep-alive comments on idle event streams; at
  /// most half of http.request_timeout_ms is used (a longer silence closes
  /// them). Default 2000, range 100..600000.
  uint32_t heartbeat_ms = 2000;
  /// Collect mode: turns for a butler of a thread that arrive within this
  /// many milliseconds of each other, while no run of that butler is
  /// active, become one run whose input is all of them in arrival order.
  /// 0 (the default) is off. Range 0..60000.
  uint32_t collect_ms = 0;
  /// The longest a collect window stays open from its first turn; at least
  /// collect_ms. Default 2000, range 1..600000.
  uint32_t collect_max_ms = 2000;
  /// Turns one collect window holds; it closes at once when full. Default
  /// 32, range 1..1000.
  uint32_t collect_max_turns = 32;
};

/// `[scheduler]`: CAF's scheduler.
struct scheduler_config {
  /// Worker threads; 0 means one per core. Default 0, range 0..1024.
  uint32_t threads = 0;
  /// stealing or sharing. Default stealing.
  scheduler_policy policy = scheduler_policy::stealing;
  /// Messages an actor handles before yielding; 0 means unlimited.
  /// Default 0.
  uint32_t max_throughput = 0;
};

/// `[telemetry]`: distributed tracing (OTLP/HTTP export of spans).
struct telemetry_config {
  /// Base URL of an OTLP/HTTP receiver (e.g. "http://127.0.0.1:4318");
  /// spans go to `{otlp_endpoint}/v1/traces`. "" (the default) = off.
  std::string otlp_endpoint;
  /// json or protobuf. Default json.
  otlp_encoding encoding = otlp_encoding::json;
  /// Fraction of new traces sampled (an incoming traceparent's sampled
  /// flag decides for its own). Default 1.0, range 0..1.
  double sample_ratio = 1.0;
  /// Spans waiting for export; more are dropped and counted. Default
  /// 8192, range 1..1000000.
  uint32_t queue_capacity = 8192;
  /// Spans per export request at most. Default 512, range 1..10000.
  uint32_t batch_max_spans = 512;
  /// Longest a span waits before its batch is sent. Default 1000, range
  /// 10..60000.
  uint32_t batch_interval_ms = 1000;
  /// Bound on one export request. Default 5000, range 100..60000.
  uint32_t export_timeout_ms = 5000;
  /// Name of an environment variable holding extra request headers
  /// (`Name=value` or `Name: value`, comma or newline separated), e.g. an
  /// API key. "" (the default) = none.
  std::string headers_env;
};

/// Where a value was written in the file: 1-based line and column.
struct source_position {
  /// Line, 1-based; 0 when unknown.
  int64_t line = 0;
  /// Column, 1-based; 0 when unknown.
  int64_t column = 0;
};

/// A node's whole configuration, as read from `node.toml`.
struct node_settings {
  /// `[node]`.
  node_config node;
  /// `[database]`.
  database_config database;
  /// `[http]`.
  http_config http;
  /// `[switchboard]`.
  switchboard_config switchboard;
  /// `[router]` with its `[[router.rule]]` tables.
  router_config router;
  /// `[[policy]]`, in file order. Default empty.
  std::vector<policy_config> policies;
  /// `[[budget]]`, in file order. Default empty.
  std::vector<budget_config> budgets;
  /// `[[butler]]`, in file order. Default empty.
  std::vector<butler_config> butlers;
  /// `[messenger]`.
  messenger_config messenger;
  /// `[[connector]]`, in file order. Default empty.
  std::vector<connector_config> connectors;
  /// `[cluster]`.
  cluster_config cluster;
  /// `[scheduler]`.
  scheduler_config scheduler;
  /// `[threads]`.
  threads_config threads;
  /// `[connectors]`.
  connectors_config connector_stats;

  /// `[telemetry]`.
  telemetry_config telemetry;
  /// `[tools]`.
  tool_settings tools;
  /// `[attachments]`: the caps and retention of attachments
  /// (runtime/attachments.md).
  attachment_limits attachments;
  /// `[rate_limits]`: token buckets per sender and per connector at ingest
  /// (runtime/rate_limit.md).
  rate_limits_config rate_limits;
  /// `[retention]`: how long people's data is kept (runtime/retention.md).
  /// `attachment_days` and `attachments.retention_days` are one setting.
  retention_config retention;
  /// File the settings were read from; "" when not from a file.
  std::string path;
  /// Where each key and table was written, by dotted key ("http.bind",
  /// "butler[1].name", "butler[1]", "butler[1].runtime.kind",
  /// "butler[1].schedule[0]", "messenger.adapter[0].url",
  /// "router.rule[0].deny", "policy[1].tier"), so later checks
  /// can point at the line.
  std::map<std::string, source_position> positions;
};

// -- equality: the effective configuration ----------------------------------

bool operator==(const node_config& x, const node_config& y);
bool operator==(const database_config& x, const database_config& y);
bool operator==(const http_credential_config& x,
                const http_credential_config& y);
bool operator==(const http_config& x, const http_config& y);
bool operator==(const switchboard_config& x, const switchboard_config& y);
bool operator==(const routing_rule_config& x, const routing_rule_config& y);
bool operator==(const router_config& x, const router_config& y);
bool operator==(const policy_config& x, const policy_config& y);
bool operator==(const budget_config& x, const budget_config& y);
bool operator==(const runtime_config& x, const runtime_config& y);
bool operator==(const schedule_config& x, const schedule_config& y);
bool operator==(const butler_config& x, const butler_config& y);
bool operator==(const reaction_config& x, const reaction_config& y);
bool operator==(const delivery_adapter_config& x,
                const delivery_adapter_config& y);
bool operator==(const messenger_config& x, const messenger_config& y);
bool operator==(const connector_config& x, const connector_config& y);
bool operator==(const cluster_config& x, const cluster_config& y);
bool operator==(const scheduler_config& x, const scheduler_config& y);
bool operator==(const threads_config& x, const threads_config& y);
bool operator==(const tool_settings& x, const tool_settings& y);
bool operator==(const connectors_config& x, const connectors_config& y);

bool operator==(const telemetry_config& x, const telemetry_config& y);
bool operator==(const attachment_limits& x, const attachment_limits& y);
bool operator==(const rate_limit_tier& x, const rate_limit_tier& y);
bool operator==(const rate_limits_config& x, const rate_limits_config& y);
bool operator==(const retention_config& x, const retention_config& y);

/// Compares every section; `path` and `positions` (where the settings came
/// from, not what they are) are ignored.
bool operator==(const node_settings& x, const node_settings& y);

inline bool operator!=(const node_config& x, const node_config& y) {
  return !(x == y);
}
inline bool operator!=(const database_config& x, const database_config& y) {
  return !(x == y);
}
inline bool operator!=(const http_config& x, const http_config& y) {
  return !(x == y);
}
inline bool operator!=(const switchboard_config& x,
                       const switchboard_config& y) {
  return !(x == y);
}
inline bool operator!=(const routing_rule_config& x,
                       const routing_rule_config& y) {
  return !(x == y);
}
inline bool operator!=(const router_config& x, const router_config& y) {
  return !(x == y);
}
inline bool operator!=(const policy_config& x, const policy_config& y) {
  return !(x == y);
}
inline bool operator!=(const budget_config& x, const budget_config& y) {
  return !(x == y);
}
inline bool operator!=(const runtime_config& x, const runtime_config& y) {
  return !(x == y);
}
inline bool operator!=(const schedule_config& x, const schedule_config& y) {
  return !(x == y);
}
inline bool operator!=(const butler_config& x, const butler_config& y) {
  return !(x == y);
}
inline bool operator!=(const delivery_adapter_config& x,
                       const delivery_adapter_config& y) {
  return !(x == y);
}
inline bool operator!=(const messenger_config& x, const messenger_config& y) {
  return !(x == y);
}
inline bool operator!=(const connector_config& x, const connector_config& y) {
  return !(x == y);
}
inline bool operator!=(const cluster_config& x, const cluster_config& y) {
  return !(x == y);
}
inline bool operator!=(const scheduler_config& x, const scheduler_config& y) {
  return !(x == y);
}
inline bool operator!=(const node_settings& x, const node_settings& y) {
  return !(x == y);
}

// -- reading and checking -----------------------------------------------------

/// One problem found in a configuration file.
struct config_error {
  /// File the problem is in ("<environment>" for environment variables).
  std::string file;
  /// Line, 1-based; 0 when the problem has no single place.
  int64_t line = 0;
  /// Column, 1-based; 0 when unknown.
  int64_t column = 0;
  /// Dotted key, e.g. "http.port" or "butler[1].name"; "" for syntax errors
  /// and unreadable files.
  std::string key;
  /// What is wrong, e.g. "expected integer, got string".
  std::string message;

  /// Renders "FILE:LINE:COL: KEY: MESSAGE", leaving out the parts that are
  /// unknown (line 0, column 0, empty key).
  std::string to_string() const;
};

/// Result: settings, or every error found (not only the first).
struct config_result {
  /// The settings; set exactly when `errors` is empty.
  std::optional<node_settings> settings;
  /// Every problem found, sorted by position.
  std::vector<config_error> errors;
};

/// Parses TOML text (`file` is used in messages and as `settings.path`).
/// Checks types, ranges and single values; cross-field checks are
/// `validate_settings`, to run after `apply_env_overrides`.
config_result parse_config(std::string_view text, std::string file);

/// Reads and parses a file (a missing/unreadable file is one error naming
/// it), then reads each `[butler.runtime]` `system_prompt_file` (relative
/// to the file's directory) into `system_prompt_text`; one that cannot be
/// read is an error with its key.
config_result load_config(const std::string& path);

/// `load_config`, then `apply_env_overrides` and `validate_settings`:
/// the settings a node runs on, or every error (then `settings` is unset).
config_result load_settings(const std::string& path);

/// A whole small file, or why not.
struct small_file {
  std::string data;
  /// "" when read; else strerror's text or "larger than N bytes".
  std::string error;
};

/// Reads `path` whole, refusing files over `max_bytes`.
small_file read_small_file(const std::string& path, size_t max_bytes);

/// Applies BUTLERS_DATABASE_URL (database.url), BUTLERS_HTTP_TOKEN
/// (http.token), BUTLERS_HTTP_PORT (http.port; a bad value is an error
/// with key "env:BUTLERS_HTTP_PORT" and leaves the port alone), and per
/// connector BUTLERS_CONNECTOR_<NAME>_TOKEN, _SECRET_TOKEN and
/// _SIGNING_SECRET (see
/// `connector_env_name`). Unset or
/// empty variables change nothing. Takes a getenv-like function for
/// testability.
std::vector<config_error> apply_env_overrides(
  node_settings& s,
  const std::function<const char*(const char*)>& getenv_fn = ::getenv);

/// Cross-field checks, run after overrides: a non-loopback http.bind needs
/// http.token; butler and connector names are unique and no butler is
/// called "messenger"; a schedule has exactly one of every_s and cron, and
/// its name is unique within its butler; a webhook adapter needs a url, an
/// outbox adapter a path; TLS key and certificate come together; a
/// non-loopback cluster bind needs TLS; remote butlers need the cluster;
/// switchboard.retry_base_ms is at most retry_cap_ms; a command's program is
/// not empty; a `[[router.rule]]` neither allows and denies the same
/// butler nor applies to no channel; policy tiers are unique; and so on.
/// Loopback is 127.0.0.0/8, ::1 and localhost.
std::vector<config_error> validate_settings(const node_settings& s);

/// Settings that are valid but likely a mistake, one sentence each naming
/// the key: `[cluster]` on while `node.name` is still the shipped default
/// (every node copied from the same file would share it, and peers with
/// this node's name are refused). check-config prints them; `run` logs them.
std::vector<std::string> config_warnings(const node_settings& s);

/// True for 127.0.0.0/8, ::1 (optionally in brackets) and localhost.
bool is_loopback(std::string_view host);

/// Replaces the password in a libpq URI (user:password@, ?password=) or
/// key=value string (password=...) with "***".
std::string redact_database_url(std::string_view url);

/// One option as config/README.md documents it, taken from the field list
/// that reads, checks and prints it.
struct option_reference {
  /// The key within its table, e.g. "port".
  std::string key;
  /// "boolean", "integer", "float", "string" or "array of strings".
  std::string type;
  /// The default as TOML ("8470", "\"127.0.0.1\"", "[\"*\"]"), or
  /// "required" or "unset".
  std::string default_value;
  /// "MIN..MAX" of numbers; "" for other types.
  std::string bounds;
  /// The values an enumeration (or each element of a list) may take.
  std::vector<std::string> choices;
  /// One line saying what the option does.
  std::string doc;
};

/// The options of one table, e.g. "[http]", "[[butler]]",
/// "[butler.runtime]".
struct section_reference {
  /// The table's header as written in the file.
  std::string header;
  /// Its options, in the order `to_toml` prints them.
  std::vector<option_reference> options;
};

/// Every table and option the parser knows, in file order.
std::vector<section_reference> config_reference();

/// The effective configuration as TOML, secrets (tokens, password in database
/// url) redacted as "***". Parsing the result gives equal settings, except
/// for the redacted values.
std::string to_toml(const node_settings& s);

} // namespace butlers
