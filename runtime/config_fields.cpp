#include "runtime/config_fields.hpp"

#include "runtime/json.hpp"
#include "runtime/mail.hpp"
#include "runtime/tools.hpp"

namespace butlers {
namespace config_detail {

namespace {

// -- checks of string values --------------------------------------------------

/// `^[a-z][a-z0-9_-]{0,63}$`: butler and connector names.
bool is_plain_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] < 'a' || s[0] > 'z')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
           || c == '-';
  });
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9');
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`: node names.
bool is_node_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || !is_alnum(s[0]))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alnum(c) || c == '.' || c == '_' || c == '-';
  });
}

/// Checks "host:port" (host may be a bracketed IPv6 address); returns what
/// is wrong, or "".
std::string check_peer(const std::string& peer) {
  auto colon = peer.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "expected \"host:port\", got '" + peer + "'";
  auto port = parse_port(std::string_view{peer}.substr(colon + 1));
  if (!port || *port == 0)
    return "port of '" + peer + "' must be in 1..65535";
  return {};
}

/// `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`: tool names such as
/// "route.execute".
bool is_tool_name(std::string_view s) {
  size_t i = 0;
  for (;;) {
    if (i >= s.size() || s[i] < 'a' || s[i] > 'z')
      return false;
    ++i;
    while (i < s.size()
           && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')
               || s[i] == '_'))
      ++i;
    if (i == s.size())
      return true;
    if (s[i] != '.')
      return false;
    ++i;
  }
}

/// Number of whitespace-separated fields of `s`.
size_t count_fields(std::string_view s) {
  size_t n = 0;
  bool in_field = false;
  for (char c : s) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (!space && !in_field)
      ++n;
    in_field = !space;
  }
  return n;
}

check_fn not_empty() {
  return [](const std::string& x) -> std::string {
    return x.empty() ? "must not be empty" : "";
  };
}

check_fn plain_name() {
  return [](const std::string& x) -> std::string {
    if (is_plain_name(x))
      return {};
    return "must match ^[a-z][a-z0-9_-]{0,63}$, got '" + x + "'";
  };
}

/// A butler's name or "*".
check_fn butler_selector() {
  return [](const std::string& x) -> std::string {
    if (x == "*" || is_plain_name(x))
      return {};
    return "must be * or match ^[a-z][a-z0-9_-]{0,63}$, got '" + x + "'";
  };
}

/// A plain name, or "" (unset).
check_fn plain_name_or_empty() {
  return [](const std::string& x) -> std::string {
    if (x.empty() || is_plain_name(x))
      return {};
    return "must match ^[a-z][a-z0-9_-]{0,63}$, got '" + x + "'";
  };
}

check_fn tool_name() {
  return [](const std::string& x) -> std::string {
    if (is_tool_name(x))
      return {};
    return "must match ^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$, got '" + x + "'";
  };
}

check_fn cron_fields() {
  return [](const std::string& x) -> std::string {
    auto n = count_fields(x);
    if (n == 5)
      return {};
    return "expected five fields (minute hour day-of-month month "
           "day-of-week), got "
           + std::to_string(n) + " in '" + x + "'";
  };
}

/// Source channels of `[[messenger.adapter]]` and `[[router.rule]]`; "*"
/// means all.
const std::vector<std::string>& channel_names() {
  static const std::vector<std::string> names{"*",     "telegram", "slack",
                                              "email", "api",      "mcp"};
  return names;
}

bool is_channel(const std::string& c) {
  for (auto& n : channel_names())
    if (n != "*" && n == c)
      return true;
  return false;
}

/// "channel:recipient" with a known channel and a recipient.
check_fn address() {
  return [](const std::string& x) -> std::string {
    auto colon = x.find(':');
    if (colon != std::string::npos && colon > 0 && colon + 1 < x.size()
        && is_channel(x.substr(0, colon)))
      return {};
    return "must be \"channel:recipient\" (e.g. \"telegram:123456789\"), got '"
           + x + "'";
  };
}

check_fn address_or_empty() {
  return [check = address()](const std::string& x) -> std::string {
    return x.empty() ? std::string{} : check(x);
  };
}

check_fn web_url_or_empty() {
  return [check = web_url()](const std::string& x) -> std::string {
    return x.empty() ? std::string{} : check(x);
  };
}

check_fn one_of(std::vector<std::string> words) {
  return [words](const std::string& x) -> std::string {
    std::string all;
    for (auto& w : words) {
      if (w == x)
        return {};
      all += (all.empty() ? "" : ", ") + w;
    }
    return "must be one of " + all + ", got '" + x + "'";
  };
}

/// A JSON object {"name": TOOL, "arguments": {...}} naming a known tool.
check_fn tool_call_json() {
  return [](const std::string& x) -> std::string {
    rapidjson::Document doc;
    if (auto err = json::parse(x, doc))
      return "not JSON: " + err->message;
    if (!doc.IsObject() || !doc.HasMember("name") || !doc["name"].IsString())
      return "must be an object with a \"name\" (and \"arguments\")";
    std::string name = doc["name"].GetString();
    if (!find_tool(name))
      return "no tool '" + name + "'";
    if (doc.HasMember("arguments") && !doc["arguments"].IsObject())
      return "\"arguments\" must be an object";
    for (auto& m : doc.GetObject()) {
      std::string k = m.name.GetString();
      if (k != "name" && k != "arguments")
        return "unknown member '" + k + "' (name, arguments)";
    }
    return {};
  };
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`: the node's name.
check_fn node_name() {
  return [](const std::string& x) -> std::string {
    if (is_node_name(x))
      return {};
    return "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, got '" + x + "'";
  };
}

/// Why `url` is not `smtp[s]://HOST[:PORT][/...]` ("" when it is one).
std::string smtp_url_error(std::string_view url) {
  auto scheme_end = url.find("://");
  auto scheme = url.substr(0, scheme_end == std::string_view::npos
                                ? 0
                                : scheme_end);
  auto rest = url.substr(scheme_end == std::string_view::npos ? url.size()
                                                              : scheme_end + 3);
  auto authority = rest.substr(0, rest.find('/'));
  auto colon = authority.rfind(':');
  auto host = authority.substr(0, colon);
  bool bad_chars = std::any_of(url.begin(), url.end(), [](char c) {
    return c == ' ' || c == '@' || static_cast<unsigned char>(c) < 0x21;
  });
  if ((scheme != "smtp" && scheme != "smtps") || host.empty() || bad_chars)
    return "expected smtp://HOST[:PORT] or smtps://HOST[:PORT] (credentials "
           "come from the environment), got '"
           + std::string{url} + "'";
  if (colon != std::string_view::npos) {
    auto port = parse_port(authority.substr(colon + 1));
    if (!port || *port == 0)
      return "port of '" + std::string{url} + "' must be in 1..65535";
  }
  return {};
}

/// "", a web URL (`web_url`) or an SMTP URL; which one a kind needs is
/// checked across keys (config_validate.cpp).
check_fn adapter_url() {
  return [web = web_url()](const std::string& x) -> std::string {
    if (x.rfind("smtp", 0) == 0)
      return smtp_url_error(x);
    return web(x);
  };
}

/// "" or a mail address, `addr@host` or `Name <addr@host>`.
check_fn mail_address_text() {
  return [](const std::string& x) -> std::string {
    if (x.empty() || parse_mail_address(x))
      return {};
    return "expected a mail address such as butlers@example.org or "
           "\"Butlers <butlers@example.org>\", got '"
           + x + "'";
  };
}

/// "" or the name of an environment variable, `[A-Za-z_][A-Za-z0-9_]*`.
check_fn env_name() {
  return [](const std::string& x) -> std::string {
    bool ok = x.empty()
              || (!(x[0] >= '0' && x[0] <= '9')
                  && std::all_of(x.begin(), x.end(), [](char c) {
                       return is_alnum(c) || c == '_';
                     }));
    if (ok)
      return {};
    return "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), "
           "got '"
           + x + "'";
  };
}

/// `http://` or `https://` followed by a host, no trailing slash.
check_fn api_base_url() {
  return [](const std::string& x) -> std::string {
    auto scheme_end = x.find("://");
    auto scheme = x.substr(0, scheme_end);
    if (scheme_end == std::string::npos
        || (scheme != "http" && scheme != "https")
        || x.size() == scheme_end + 3)
      return "expected http://HOST[:PORT][/PATH] or https://..., got '" + x
             + "'";
    if (x.back() == '/')
      return "must not end with '/', got '" + x + "'";
    return {};
  };
}

std::string redact_token(std::string_view token) {
  return token.empty() ? "" : "***";
}

constexpr int64_t u32_max = 4294967295;
constexpr int64_t i64_max = 9223372036854775807;
constexpr int64_t mib_64 = 64 * 1024 * 1024;

} // namespace

// -- the field lists ----------------------------------------------------------
//
// One line per option: key, member, bounds or check, and one line of doc. The
// order is the order to_toml prints and the reference lists them; keys a
// table reads after its fields (sub-tables, arrays of tables) are read by
// config.cpp.

const fields<node_config>& node_fields() {
  using c = node_config;
  static const fields<c> list{
    text("name", &c::name, "name of this node in logs and in the cluster",
         node_name()),
    integer("drain_deadline_s", &c::drain_deadline_s, 0, 3600,
            "how long a graceful shutdown waits for in-flight work"),
    choice("log_level", &c::log_level, "minimum log level"),
  };
  return list;
}

const fields<database_config>& database_fields() {
  using c = database_config;
  static const fields<c> list{
    secret_text("url", &c::url, redact_database_url,
                "the PostgreSQL of the inbox; \"\" means no database"),
    integer("pool_size", &c::pool_size, 1, 64, "reader connections"),
    integer("reader_queue", &c::reader_queue, 1, 100000,
            "reads waiting for an idle reader connection"),
    integer("statement_timeout_ms", &c::statement_timeout_ms, 0, 3600000,
            "how long a statement may run; 0 means no limit"),
    integer("lock_timeout_ms", &c::lock_timeout_ms, 0, 3600000,
            "how long a statement may wait for a lock; 0 means no limit"),
    integer("writer_connections", &c::writer_connections, 1, 16,
            "connections of the inbox writer"),
    integer("lanes", &c::lanes, 1, 16, "lanes of lifecycle and routing writes"),
    integer("max_batch", &c::max_batch, 1, 10000,
            "most writes per group commit"),
    integer("group_commit_delay_us", &c::group_commit_delay_us, 0, 100000,
            "how long a group commit of new requests waits for more"),
    integer("connect_timeout_s", &c::connect_timeout_s, 1, 300,
            "how long to wait for a connection"),
    integer("retention_months", &c::retention_months, 1, 120,
            "months of inbox partitions kept before dropping"),
    integer("partitions_ahead", &c::partitions_ahead, 0, 24,
            "monthly partitions created ahead of time"),
  };
  return list;
}

const fields<http_config>& http_fields() {
  using c = http_config;
  static const fields<c> list{
    flag("enabled", &c::enabled, "serve the ingest, thread and operator API"),
    text("bind", &c::bind,
         "listen address; non-loopback requires token or a credential",
         not_empty()),
    integer("port", &c::port, 0, 65535, "TCP port; 0 picks a free one"),
    secret_text("token", &c::token, redact_token,
                "bearer token every request must carry; \"\" means none"),
    integer("max_body_bytes", &c::max_body_bytes, 1024, mib_64,
            "largest request body; larger ones get 413"),
    integer("threads", &c::threads, 1, 64, "server threads"),
    integer("max_connections", &c::max_connections, 1, 65536,
            "most open connections"),
    integer("request_timeout_ms", &c::request_timeout_ms, 1, 600000,
            "deadline of one request"),
  };
  return list;
}

const fields<switchboard_config>& switchboard_fields() {
  using c = switchboard_config;
  static const fields<c> list{
    flag("enabled", &c::enabled, "take ingress on this node"),
    integer("max_in_flight", &c::max_in_flight, 1, 1000000,
            "ingest requests awaiting commit; above it 429"),
    integer("queue_capacity", &c::queue_capacity, 1, 1000000,
            "hot-path queue before the classification pool"),
    integer("workers", &c::workers, 1, 256, "classification workers"),
    integer("scanner_interval_s", &c::scanner_interval_s, 1, 3600,
            "time between cold-path scans"),
    integer("scanner_grace_s", &c::scanner_grace_s, 0, 3600,
            "age before the scanner re-enqueues an accepted row"),
    integer("scanner_batch_size", &c::scanner_batch_size, 1, 10000,
            "rows claimed per scan"),
    integer("lease_s", &c::lease_s, 1, 86400,
            "how long a claim lasts unless heartbeated"),
    integer("dedupe_window_s", &c::dedupe_window_s, 1, 86400,
            "time bucket of hashed dedupe keys"),
    integer("route_timeout_s", &c::route_timeout_s, 1, 86400,
            "from dispatching a segment to its final route_response"),
    integer("retry_base_ms", &c::retry_base_ms, 1, 600000,
            "full-jitter exponential backoff: the base"),
    integer("retry_cap_ms", &c::retry_cap_ms, 1, 600000,
            "full-jitter exponential backoff: the cap"),
    integer("circuit_failure_threshold", &c::circuit_failure_threshold, 1, 1000,
            "consecutive failures that open a target's circuit"),
    integer("circuit_open_s", &c::circuit_open_s, 1, 3600,
            "how long an open circuit waits before a half-open probe"),
    choice("fanout_mode", &c::fanout_mode, "fanout mode of plans"),
    integer("max_in_progress", &c::max_in_progress, 1, 1000000,
            "requests dispatched and awaiting their outcomes"),
    integer("max_waiting", &c::max_waiting, 1, 100000,
            "subrequests waiting for room at a full butler"),
    // -- fair admission --
    choice("fairness", &c::fairness, "sources the hot path serves in turn"),
    integer("source_queue_capacity", &c::source_queue_capacity, 0, 1000000,
            "hot-path requests of one source; 0: queue_capacity"),
  };
  return list;
}

const fields<router_config>& router_fields() {
  using c = router_config;
  static const fields<c> list{
    choice("kind", &c::kind, "registry keywords and triggers, or an LLM CLI"),
    number("confidence_threshold", &c::confidence_threshold, 0.0, 1.0,
           "plans under this confidence go to general whole"),
    choice("family", &c::family, "cli: output format of the program"),
    texts("command", &c::command,
          "cli: program and arguments; [] means the family's default"),
    integer("timeout_s", &c::timeout_s, 1, 3600,
            "cli: how long the router CLI may run"),
    integer("max_output_bytes", &c::max_output_bytes, 1024, mib_64,
            "cli: largest stdout accepted"),
  };
  return list;
}

const fields<routing_rule_config>& rule_fields() {
  using c = routing_rule_config;
  static const fields<c> list{
    texts_of("channels", &c::channels, channel_names(),
             "source channels the rule applies to; * means all"),
    texts("allow", &c::allow,
          "when not empty, only these butlers may be targeted", plain_name()),
    texts("deny", &c::deny, "butlers that may never be targeted", plain_name()),
  };
  return list;
}

const fields<policy_config>& policy_fields() {
  using c = policy_config;
  static const fields<c> list{
    text_of("tier", &c::tier, {"default", "interactive", "high_priority"},
            "the tier")
      .required(),
    integer("wall_clock_s", &c::wall_clock_s, 1, 604800,
            "budget of a request from receipt to its terminal state"),
    integer("max_invocations", &c::max_invocations, 1, 10000,
            "dispatches a request may make"),
    integer("retry_max_attempts", &c::retry_max_attempts, 1, 100,
            "attempts per segment, the first included"),
  };
  return list;
}

const fields<budget_config>& budget_fields() {
  using c = budget_config;
  static const fields<c> list{
    texts("butlers", &c::butlers, "butlers it applies to; * means all",
          butler_selector()),
    texts_of("channels", &c::channels, channel_names(),
             "source channels it applies to; * means all"),
    texts_of("tiers", &c::tiers,
             {"*", "default", "interactive", "high_priority"},
             "policy tiers it applies to; * means all"),
    integer("request_tokens", &c::request_tokens, 0, 1000000000000,
            "tokens the sessions of one request may use; 0 means no limit"),
    number("request_cost_usd", &c::request_cost_usd, 0.0, 1000000.0,
           "US dollars the sessions of one request may cost; 0 means no "
           "limit"),
    integer("daily_tokens", &c::daily_tokens, 0, 1000000000000,
            "tokens per (sender, butler) and UTC day; 0 means no limit"),
    number("daily_cost_usd", &c::daily_cost_usd, 0.0, 1000000.0,
           "US dollars per (sender, butler) and UTC day; 0 means no limit"),
  };
  return list;
}

const fields<butler_config>& butler_fields() {
  using c = butler_config;
  static const fields<c> list{
    text("name", &c::name, "the butler's name", plain_name()).required(),
    text("description", &c::description, "what it is for"),
    texts("triggers", &c::triggers, "when to route here, for routers",
          not_empty()),
    texts("keywords", &c::keywords, "words the rules router matches",
          not_empty()),
    texts("capabilities", &c::capabilities, "tools the butler accepts",
          tool_name()),
    integer("max_concurrent_sessions", &c::max_concurrent_sessions, 1, 256,
            "sessions running at once"),
    integer("max_pending", &c::max_pending, 0, 100000,
            "work items waiting for a session slot"),
    integer("session_timeout_s", &c::session_timeout_s, 1, 86400,
            "a session running longer is cancelled"),
    integer("lease_s", &c::lease_s, 2, 86400,
            "how long a work item's lease lasts"),
    text("node", &c::node, "hosting node; \"\" means local"),
    texts("recipients", &c::recipients,
          "whom sessions may notify besides the asker, \"channel:recipient\"",
          address()),
    integer("max_tool_calls", &c::max_tool_calls, 0, 10000,
            "tool calls one session may make; 0: no tools"),
    text("approvals", &c::approvals,
         "a tool that needs a yes: ask the run's starter, allow or deny",
         one_of({"ask", "allow", "deny"})),
    texts("approvals_allow", &c::approvals_allow,
          "tool names (* globs) approved without asking", not_empty()),
    texts("approvals_deny", &c::approvals_deny,
          "tool names (* globs) refused without asking", not_empty()),
    integer("approval_timeout_s", &c::approval_timeout_s, 1, 86400,
            "seconds a question waits before it is denied"),
  };
  return list;
}

const fields<runtime_config>& runtime_fields() {
  using c = runtime_config;
  static const fields<c> list{
    choice("kind", &c::kind, "the adapter",
           {runtime_kind::scripted, runtime_kind::cli, runtime_kind::openai,
            runtime_kind::anthropic, runtime_kind::external}),
    integer("turn_ms", &c::turn_ms, 0, 3600000,
            "scripted: milliseconds per turn"),
    integer("turns", &c::turns, 1, 1000, "scripted: turns per session"),
    number("fail_rate", &c::fail_rate, 0.0, 1.0,
           "scripted: fraction of sessions that fail"),
    integer("fail_attempts", &c::fail_attempts, 0, 1000,
            "scripted: the first N dispatch attempts fail"),
    choice("fail_class", &c::fail_class,
           "scripted: error class of the injected failures"),
    text("reply", &c::reply, "scripted: reply template"),
    integer("seed", &c::seed, 0, i64_max,
            "scripted: seed of the failure draw; 0 seeds from the clock"),
    integer("input_tokens", &c::input_tokens, 0, 1000000000,
            "scripted: synthetic input tokens of each turn's model call"),
    integer("tokens_per_turn", &c::tokens_per_turn, 0, 1000000000,
            "scripted: synthetic output tokens of each turn"),
    number("cost_per_turn_usd", &c::cost_per_turn_usd, 0.0, 1000.0,
           "scripted: synthetic cost of each turn in US dollars"),
    flag("stream_reply", &c::stream_reply,
         "scripted: stream the reply as deltas, one part per turn"),
    texts("tool_calls", &c::tool_calls,
          "scripted: tool calls made before the reply, each "
          "{\"name\", \"arguments\"} as JSON",
          tool_call_json()),
    text("model", &c::model,
         "the model; scripted: the one it reports; openai, anthropic: the "
         "name sent with every call (required)"),
    choice("family", &c::family, "cli: output format of the program"),
    texts("command", &c::command,
          "cli: program and arguments; [] means the family's default"),
    choice("prompt_via", &c::prompt_via,
           "cli: how the prompt reaches the program"),
    integer("max_output_bytes", &c::max_output_bytes, 1024, mib_64,
            "cli: largest stdout accepted"),
    integer("kill_grace_ms", &c::kill_grace_ms, 0, 60000,
            "cli: milliseconds between SIGTERM and SIGKILL"),
    text("base_url", &c::base_url,
         "openai, anthropic: the server's root; /v1/... is appended",
         web_url()),
    text("api_key_env", &c::api_key_env,
         "openai, anthropic: environment variable holding the API key; \"\" "
         "sends none",
         env_name()),
    integer("max_tokens", &c::max_tokens, 0, 1000000,
            "openai, anthropic: most output tokens per call; 0: openai sends "
            "none, anthropic 4096"),
    number("temperature", &c::temperature, 0.0, 2.0,
           "openai, anthropic: sampling temperature; unset sends none")
      .unset_by_default(),
    text("system_prompt", &c::system_prompt,
         "openai, anthropic: the system prompt, inline"),
    text("system_prompt_file", &c::system_prompt_file,
         "openai, anthropic: file the system prompt is read from at load"),
    integer("timeout_s", &c::timeout_s, 1, 86400,
            "openai, anthropic: seconds one model call may take"),
    integer("max_model_calls", &c::max_model_calls, 1, 1000,
            "openai, anthropic: most model calls per run (retries not "
            "counted)"),
    integer("retries", &c::retries, 0, 100,
            "openai, anthropic: retries of one call (429, 5xx, transport, "
            "cut stream)"),
    integer("retry_base_ms", &c::retry_base_ms, 1, 600000,
            "openai, anthropic: first backoff, doubled per retry"),
    integer("retry_max_ms", &c::retry_max_ms, 1, 3600000,
            "openai, anthropic: longest wait before a retry, retry-after "
            "included"),
    integer("max_deliveries", &c::max_deliveries, 1, 1000,
            "external: deliveries of an item before it is dead-lettered"),
    integer("visibility_ms", &c::visibility_ms, 250, 43200000,
            "external: visibility of a delivery unless recv asks otherwise"),
    integer("max_waiting_receivers", &c::max_waiting_receivers, 1, 10000,
            "external: recv calls waiting at once; more answer 429"),
  };
  return list;
}

const fields<schedule_config>& schedule_fields() {
  using c = schedule_config;
  static const fields<c> list{
    text("name", &c::name, "the schedule's name", plain_name()).required(),
    integer("every_s", &c::every_s, 1, 31536000, "seconds between runs")
      .unset_by_default(),
    text("cron", &c::cron, "minute hour day-of-month month day-of-week, UTC",
         cron_fields())
      .unset_by_default(),
    text("prompt", &c::prompt, "prompt of the scheduled session", not_empty())
      .required(),
    text("notify_to", &c::notify_to,
         "where the reply goes, \"channel:recipient\"; \"\": the api outbox",
         address_or_empty()),
    text("catch_up", &c::catch_up,
         "a fire missed while no node ran: skip, or once at start",
         one_of({"skip", "once"})),
  };
  return list;
}

const fields<messenger_config>& messenger_fields() {
  using c = messenger_config;
  static const fields<c> list{
    integer("max_concurrent_sessions", &c::max_concurrent_sessions, 1, 256,
            "deliveries at once"),
    integer("max_pending", &c::max_pending, 0, 100000, "deliveries waiting"),
  };
  return list;
}

const fields<delivery_adapter_config>& adapter_fields() {
  using c = delivery_adapter_config;
  static const fields<c> list{
    choice("kind", &c::kind, "the adapter").required(),
    texts_of("channels", &c::channels, channel_names(),
             "source channels it delivers for; * means all"),
    text("url", &c::url,
         "webhook: where the envelope is POSTed; smtp: the relay",
         adapter_url()),
    secret_text("token", &c::token, redact_token,
                "webhook: bearer token sent as Authorization"),
    integer("timeout_ms", &c::timeout_ms, 1, 600000,
            "webhook, telegram, slack, smtp: deadline of one attempt"),
    integer("retries", &c::retries, 0, 100,
            "webhook, telegram, slack, smtp: attempts after the first"),
    text("path", &c::path, "outbox: file the JSON lines are appended to"),
    text("connector", &c::connector,
         "telegram, slack: the [[connector]] of that type whose token and "
         "api_base it uses",
         plain_name_or_empty()),
    integer("typing_interval_ms", &c::typing_interval_ms, 500, 5000,
            "telegram: the typing chat action is repeated this often"),
    integer("typing_max_s", &c::typing_max_s, 0, 86400,
            "telegram: the longest a request shows typing; 0 shows none"),
    text("from", &c::from, "smtp: the sender of the mails",
         mail_address_text()),
    text("username_env", &c::username_env,
         "smtp: environment variable holding the relay user name", env_name()),
    text("password_env", &c::password_env,
         "smtp: environment variable holding the relay password", env_name()),
  };
  return list;
}

const fields<connector_config>& connector_fields() {
  using c = connector_config;
  static const fields<c> list{
    text("name", &c::name, "the connector's name", plain_name()).required(),
    choice("type", &c::type, "channel kind").required(),
    text("endpoint_identity", &c::endpoint_identity,
         "source.endpoint_identity of its envelopes"),
    text("path", &c::path, "file (jsonl) or directory (maildir) read"),
    integer("max_in_flight", &c::max_in_flight, 1, 10000,
            "envelopes submitted but not yet acknowledged"),
    flag("enabled", &c::enabled, "whether it runs"),
    choice("mode", &c::mode, "telegram: webhook or getUpdates polling"),
    secret_text("token", &c::token, redact_token,
                "telegram, slack: the bot token"),
    secret_text("secret_token", &c::secret_token, redact_token,
                "telegram webhook: the secret every webhook request carries"),
    secret_text("signing_secret", &c::signing_secret, redact_token,
                "slack: the signing secret of every Events API request"),
    text("api_base", &c::api_base,
         "telegram: base URL of the Bot API; slack: of the Web API",
         api_base_url()),
    integer("poll_timeout_s", &c::poll_timeout_s, 0, 50,
            "telegram poll: long-poll timeout of getUpdates"),
    integer("poll_ms", &c::poll_ms, 10, 3600000,
            "jsonl, maildir: how often new input is looked for"),
  };
  return list;
}

const fields<cluster_config>& cluster_fields() {
  using c = cluster_config;
  static const fields<c> list{
    text("bind", &c::bind, "cluster listen address", not_empty()),
    integer("port", &c::port, 0, 65535,
            "port this node publishes its cluster actor on; 0: none"),
    texts("peers", &c::peers, "nodes this node dials", check_peer),
    flag("switchboard", &c::switchboard,
         "runs the switchboard; false makes a butler-only node"),
    texts("butlers", &c::butlers, "the configured butlers this node hosts",
          not_empty()),
    integer("heartbeat_interval_ms", &c::heartbeat_interval_ms, 10, 600000,
            "middleman heartbeat interval"),
    integer("connection_timeout_ms", &c::connection_timeout_ms, 10, 600000,
            "silence after which a peer counts as lost"),
    integer("quarantine_after_ms", &c::quarantine_after_ms, 0, 86400000,
            "a lost node's butlers stay stale this long"),
    integer("reconnect_cap_ms", &c::reconnect_cap_ms, 100, 600000,
            "ceiling of the reconnect backoff"),
  };
  return list;
}

const fields<cluster_config>& cluster_tls_fields() {
  using c = cluster_config;
  static const fields<c> list{
    text("cert", &c::tls_certificate, "PEM certificate of this node"),
    text("key", &c::tls_key, "PEM private key"),
    text("ca", &c::tls_cafile,
         "PEM bundle peers' certificates are verified against"),
  };
  return list;
}

const fields<scheduler_config>& scheduler_fields() {
  using c = scheduler_config;
  static const fields<c> list{
    integer("threads", &c::threads, 0, 1024,
            "CAF worker threads; 0 means one per core"),
    choice("policy", &c::policy, "CAF scheduler policy"),
    integer("max_throughput", &c::max_throughput, 0, u32_max,
            "messages an actor handles before yielding; 0: unlimited"),
  };
  return list;
}

const fields<tool_settings>& tool_fields() {
  using c = tool_settings;
  static const fields<c> list{
    text("url", &c::url,
         "the MCP endpoint sessions get; \"\": http://127.0.0.1:PORT/mcp",
         web_url_or_empty()),
    texts("allowed_origins", &c::allowed_origins,
          "browser origins allowed to call /mcp", not_empty()),
    integer("notify_wait_ms", &c::notify_wait_ms, 0, 600000,
            "how long notify waits for its delivery before answering queued"),
    integer("reminder_poll_ms", &c::reminder_poll_ms, 100, 60000,
            "milliseconds between sweeps for due reminders"),
    integer("max_value_bytes", &c::max_value_bytes, 16, 1048576,
            "largest state value or reminder message"),
    integer("max_route_depth", &c::max_route_depth, 0, 16,
            "most route_to hops behind a session"),
    integer("max_in_flight", &c::max_in_flight, 1, 100000,
            "tool calls under way at once on the node"),
    flag("record_arguments", &c::record_arguments,
         "keep tool call arguments for inspection; off: only key names"),
  };
  return list;
}

const fields<threads_config>& threads_fields() {
  using c = threads_config;
  static const fields<c> list{
    integer("idle_timeout_s", &c::idle_timeout_s, 1, 86400,
            "seconds an idle thread stays in memory"),
    integer("max_queued_runs", &c::max_queued_runs, 1, 1000,
            "runs queued behind an active run, per thread"),
    integer("max_pending_turns", &c::max_pending_turns, 1, 10000,
            "turns waiting while a thread persists the previous one"),
    integer("max_subscribers", &c::max_subscribers, 1, 100000,
            "open event streams"),
    integer("subscriber_buffer", &c::subscriber_buffer, 1, 100000,
            "events buffered per stream while its socket is busy"),
    integer("heartbeat_ms", &c::heartbeat_ms, 100, 600000,
            "keep-alive comment interval on event streams"),
    integer("collect_ms", &c::collect_ms, 0, 60000,
            "turns this close together before a run starts become one run; "
            "0: off"),
    integer("collect_max_ms", &c::collect_max_ms, 1, 600000,
            "longest a collect window stays open from its first turn"),
    integer("collect_max_turns", &c::collect_max_turns, 1, 1000,
            "turns one collect window holds"),
  };
  return list;
}

// -- connector health and statistics -----------------------------------------

const fields<connectors_config>& connectors_fields() {
  using c = connectors_config;
  static const fields<c> list{
    integer("heartbeat_s", &c::heartbeat_s, 0, 3600,
            "seconds between heartbeats of each in-process connector; 0: off"),
    integer("heartbeat_queue", &c::heartbeat_queue, 1, 100000,
            "heartbeats queued for their write; beyond it 429"),
    flag("rollups", &c::rollups,
         "run the scheduled connector rollups and retention on this node"),
  };
  return list;
}

// -- the reference ------------------------------------------------------------

namespace {

template<class T>
section_reference reference_of(std::string header, const fields<T>& list,
                               const T& defaults = T{}) {
  section_reference out{std::move(header), {}};
  for (auto& f : list) {
    option_reference o;
    o.key = f.key;
    o.type = f.type;
    o.default_value = f.is_required           ? "required"
                      : f.is_unset_by_default ? "unset"
                                              : f.print(defaults);
    o.bounds = f.bounds;
    o.choices = f.choices;
    o.doc = f.doc;
    out.options.push_back(std::move(o));
  }
  return out;
}

} // namespace

} // namespace config_detail

std::vector<section_reference> config_reference() {
  using namespace config_detail;
  return {
    reference_of("[node]", node_fields()),
    reference_of("[database]", database_fields()),
    reference_of("[http]", http_fields()),
    reference_of("[[http.credential]]", credential_fields()),
    reference_of("[switchboard]", switchboard_fields()),
    reference_of("[router]", router_fields()),
    reference_of("[[router.rule]]", rule_fields()),
    reference_of("[[policy]]", policy_fields()),
    reference_of("[[budget]]", budget_fields()),
    reference_of("[[butler]]", butler_fields()),
    reference_of("[butler.runtime]", runtime_fields()),
    reference_of("[[butler.schedule]]", schedule_fields()),
    reference_of("[messenger]", messenger_fields()),
    reference_of("[[messenger.adapter]]", adapter_fields()),
    reference_of("[messenger.adapter.reactions]", reaction_fields()),
    reference_of("[messenger.adapter.reactions] (slack)",
                 slack_reaction_fields(), slack_reaction_defaults()),
    reference_of("[[connector]]", connector_fields()),
    reference_of("[cluster]", cluster_fields()),
    reference_of("[cluster.tls]", cluster_tls_fields()),
    reference_of("[scheduler]", scheduler_fields()),
    reference_of("[threads]", threads_fields()),
    reference_of("[tools]", tool_fields()),
    reference_of("[connectors]", connectors_fields()),

    reference_of("[telemetry]", telemetry_fields()),
    reference_of("[attachments]", attachment_fields()),
    reference_of("[rate_limits]", rate_limit_fields()),
    reference_of("[[rate_limits.tier]]", rate_limit_tier_fields()),
    reference_of("[retention]", retention_fields()),
  };
}

} // namespace butlers
