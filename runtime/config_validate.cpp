#include <algorithm>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>

#include "runtime/config.hpp"

// The checks across keys (validate_settings), run after the environment
// overrides, and the address and secret helpers they and to_toml share.

namespace butlers {

namespace {

/// Collects the errors of `validate_settings`.
struct checker {
  const node_settings& s;
  std::vector<config_error> errors;

  void error(source_position pos, std::string key, std::string msg) {
    errors.push_back(config_error{s.path, pos.line, pos.column, std::move(key),
                                  std::move(msg)});
  }

  /// Position of the first of `keys` that was written in the file.
  source_position where(std::initializer_list<std::string> keys) const {
    for (auto& k : keys)
      if (auto i = s.positions.find(k); i != s.positions.end())
        return i->second;
    return {};
  }

  /// Names of [[butler]], [[connector]] and [[butler.schedule]] entries and
  /// tiers of [[policy]] entries are unique: entry `i` of `items`, keyed
  /// `base[i]`, is reported against the first entry with the same `field`
  /// (member pointer, written in the file as `field_key`).
  template<class Items, class Field>
  void unique(const Items& items, size_t i, const std::string& base,
              Field field, const std::string& field_key,
              const std::string& what) {
    auto& value = items[i].*field;
    if (value.empty())
      return;
    for (size_t j = 0; j < i; ++j) {
      if (items[j].*field != value)
        continue;
      auto prefix = base + "[" + std::to_string(i) + "]";
      auto first = base + "[" + std::to_string(j) + "]";
      auto first_pos = where({first + "." + field_key, first});
      auto at = first_pos.line > 0
                  ? first + ", line " + std::to_string(first_pos.line)
                  : first;
      error(where({prefix + "." + field_key, prefix}), prefix + "." + field_key,
            "duplicate " + what + " '" + value + "' (first in " + at + ")");
      return;
    }
  }

  template<class Items>
  void unique_name(const Items& items, size_t i, const std::string& base,
                   const std::string& kind) {
    using item = typename Items::value_type;
    unique(items, i, base, &item::name, "name", kind + " name");
  }

  /// A command whose program (first element) is "".
  void program(const std::vector<std::string>& command,
               std::initializer_list<std::string> keys) {
    if (!command.empty() && command[0].empty())
      error(where(keys), *keys.begin(),
            "the program (the first element) must not be empty");
  }
};

/// A scope key set on a credential of a role it does not apply to.
void scope_key(checker& c, const std::string& prefix, const std::string& value,
               const char* key, const char* role) {
  if (!value.empty())
    c.error(c.where({prefix + "." + key, prefix}), prefix + "." + key,
            std::string{"only a credential of role "} + role + " takes " + key);
}

/// Each `[[http.credential]]`: a unique name, and the scope keys of its role
/// only (a worker names its butler; a thread at most one of thread_id and
/// sender).
void check_credentials(checker& c) {
  auto& xs = c.s.http.credentials;
  for (size_t i = 0; i < xs.size(); ++i) {
    c.unique_name(xs, i, "http.credential", "credential");
    auto& x = xs[i];
    auto prefix = "http.credential[" + std::to_string(i) + "]";
    bool ingest = x.role == "ingest";
    bool worker = x.role == "worker";
    bool thread = x.role == "thread";
    scope_key(c, prefix, ingest ? "" : x.connector, "connector", "ingest");
    scope_key(c, prefix, ingest ? "" : x.endpoint_identity, "endpoint_identity",
              "ingest");
    scope_key(c, prefix, worker ? "" : x.butler, "butler", "worker");
    scope_key(c, prefix, thread ? "" : x.thread_id, "thread_id", "thread");
    scope_key(c, prefix, thread ? "" : x.sender, "sender", "thread");
    if (worker && x.butler.empty())
      c.error(c.where({prefix}), prefix + ".butler",
              "a worker credential names its butler");
    if (thread && !x.thread_id.empty() && !x.sender.empty())
      c.error(c.where({prefix + ".sender", prefix}), prefix + ".sender",
              "a thread credential takes thread_id or sender, not both");
  }
}

void check_http_and_switchboard(checker& c) {
  auto& s = c.s;
  if (s.http.enabled && !is_loopback(s.http.bind) && s.http.token.empty()
      && s.http.credentials.empty())
    c.error(c.where({"http.bind", "http"}), "http.bind",
            "binding a non-loopback address requires http.token or an "
            "[[http.credential]]");
  check_credentials(c);
  auto& sb = s.switchboard;
  if (sb.retry_base_ms > sb.retry_cap_ms)
    c.error(c.where({"switchboard.retry_base_ms", "switchboard.retry_cap_ms",
                     "switchboard"}),
            "switchboard.retry_base_ms",
            "must not exceed switchboard.retry_cap_ms ("
              + std::to_string(sb.retry_base_ms) + " > "
              + std::to_string(sb.retry_cap_ms) + ")");
  auto& th = s.threads;
  if (th.collect_max_ms < th.collect_ms)
    c.error(c.where(
              {"threads.collect_max_ms", "threads.collect_ms", "threads"}),
            "threads.collect_max_ms",
            "must be at least threads.collect_ms ("
              + std::to_string(th.collect_max_ms) + " < "
              + std::to_string(th.collect_ms) + ")");
}

void check_router_and_policies(checker& c) {
  auto& s = c.s;
  auto& ro = s.router;
  c.program(ro.command, {"router.command", "router"});
  for (size_t i = 0; i < ro.rules.size(); ++i) {
    auto& r = ro.rules[i];
    auto prefix = "router.rule[" + std::to_string(i) + "]";
    if (r.channels.empty())
      c.error(c.where({prefix + ".channels", prefix}), prefix + ".channels",
              "applies to no channel; [\"*\"] means every channel");
    for (auto k = r.deny.begin(); k != r.deny.end(); ++k)
      if (std::find(r.deny.begin(), k, *k) == k // once per name
          && std::find(r.allow.begin(), r.allow.end(), *k) != r.allow.end())
        c.error(c.where({prefix + ".deny", prefix}), prefix + ".deny",
                "'" + *k + "' is both allowed and denied by this rule");
  }
  for (size_t i = 0; i < s.policies.size(); ++i)
    c.unique(s.policies, i, "policy", &policy_config::tier, "tier",
             "policy tier");
}

void check_budgets(checker& c) {
  auto& s = c.s;
  for (size_t i = 0; i < s.budgets.size(); ++i) {
    auto& b = s.budgets[i];
    auto prefix = "budget[" + std::to_string(i) + "]";
    if (b.request_tokens == 0 && b.request_cost_usd == 0 && b.daily_tokens == 0
        && b.daily_cost_usd == 0)
      c.error(c.where({prefix}), prefix,
              "sets no limit; give at least one of request_tokens, "
              "request_cost_usd, daily_tokens and daily_cost_usd");
    for (auto [key, xs] :
         {std::pair{"butlers", &b.butlers}, std::pair{"channels", &b.channels},
          std::pair{"tiers", &b.tiers}})
      if (xs->empty())
        c.error(c.where({prefix + "." + key, prefix}), prefix + "." + key,
                std::string{"selects nothing; [\"*\"] means every one"});
  }
}

void check_schedules(checker& c, const butler_config& b,
                     const std::string& prefix) {
  for (size_t j = 0; j < b.schedules.size(); ++j) {
    auto& sc = b.schedules[j];
    auto base = prefix + ".schedule";
    auto sub = base + "[" + std::to_string(j) + "]";
    if (sc.every_s != 0 && !sc.cron.empty())
      c.error(c.where({sub + ".cron", sub}), sub + ".cron",
              "set together with every_s; a schedule has exactly one of "
              "every_s and cron");
    if (sc.every_s == 0 && sc.cron.empty())
      c.error(c.where({sub}), sub,
              "has neither every_s nor cron; a schedule has exactly one");
    c.unique_name(b.schedules, j, base, "schedule");
  }
}

/// `openai` and `anthropic` runtimes: a server and a model, one system
/// prompt at most.
void check_http_model(checker& c, const runtime_config& rt,
                      const std::string& prefix) {
  if (rt.kind != runtime_kind::openai && rt.kind != runtime_kind::anthropic)
    return;
  auto kind = std::string{"'"} + to_string(rt.kind) + "'";
  auto base = prefix + ".runtime";
  auto at = c.where({base + ".kind", base, prefix});
  if (rt.base_url.empty())
    c.error(at, base + ".base_url",
            "an " + kind
              + " runtime requires base_url (the server's root, e.g. "
                "https://api.openai.com or http://127.0.0.1:8080)");
  auto url = std::string_view{rt.base_url};
  while (!url.empty() && url.back() == '/')
    url.remove_suffix(1);
  if (url.size() >= 3 && url.substr(url.size() - 3) == "/v1")
    c.error(c.where({base + ".base_url", base}), base + ".base_url",
            "is the server's root; /v1/... is appended, so leave out the "
            "trailing /v1 (got '"
              + rt.base_url + "')");
  if (rt.model.empty())
    c.error(at, base + ".model", "an " + kind + " runtime requires a model");
  if (!rt.system_prompt.empty() && !rt.system_prompt_file.empty())
    c.error(c.where({base + ".system_prompt_file", base}),
            base + ".system_prompt_file",
            "set together with system_prompt; give the system prompt inline "
            "or in a file, not both");
  if (rt.retry_base_ms > rt.retry_max_ms)
    c.error(c.where({base + ".retry_base_ms", base}), base + ".retry_base_ms",
            "must not exceed retry_max_ms (" + std::to_string(rt.retry_base_ms)
              + " > " + std::to_string(rt.retry_max_ms) + ")");
}

void check_butlers(checker& c) {
  auto& s = c.s;
  for (size_t i = 0; i < s.butlers.size(); ++i) {
    auto& b = s.butlers[i];
    auto prefix = "butler[" + std::to_string(i) + "]";
    if (b.name == "messenger")
      c.error(c.where({prefix + ".name", prefix}), prefix + ".name",
              "messenger is configured under [messenger], not as a "
              "[[butler]]");
    c.program(b.runtime.command,
              {prefix + ".runtime.command", prefix + ".runtime", prefix});
    if (b.runtime.kind == runtime_kind::external
        && b.runtime.visibility_ms >= uint64_t{b.session_timeout_s} * 1000)
      c.error(c.where({prefix + ".runtime.visibility_ms", prefix + ".runtime",
                       prefix}),
              prefix + ".runtime.visibility_ms",
              "must be below session_timeout_s ("
                + std::to_string(b.session_timeout_s)
                + " s): an item that waits and runs on workers longer ends "
                  "with a timeout");
    if (!b.node.empty() && b.node != s.node.name && !s.cluster.active())
      c.error(c.where({prefix + ".node", prefix}), prefix + ".node",
              "runs on node '" + b.node
                + "', which requires the cluster (cluster.port or "
                  "cluster.peers)");
    c.unique_name(s.butlers, i, "butler", "butler");
    check_schedules(c, b, prefix);
    check_http_model(c, b.runtime, prefix);
  }
}

/// A telegram (slack) adapter names a telegram (slack) connector that has a
/// token, and delivers for the telegram (slack) channel only.
void check_chat_adapter(checker& c, const delivery_adapter_config& a,
                        const std::string& prefix, connector_type type) {
  auto& s = c.s;
  std::string kind = to_string(type);
  auto at = c.where({prefix + ".connector", prefix + ".kind", prefix});
  for (auto& ch : a.channels)
    if (ch != "*" && ch != kind)
      c.error(c.where({prefix + ".channels", prefix}), prefix + ".channels",
              "a '" + kind + "' adapter delivers for channel " + kind
                + " only, got '" + ch + "'");
  if (a.connector.empty()) {
    c.error(at, prefix + ".connector",
            "a '" + kind + "' adapter requires a connector (the [[connector]] "
              + "of type " + kind + " whose token and api_base it uses)");
    return;
  }
  auto cn = std::find_if(s.connectors.begin(), s.connectors.end(),
                         [&](const connector_config& x) {
                           return x.name == a.connector;
                         });
  if (cn == s.connectors.end()) {
    c.error(at, prefix + ".connector",
            "no [[connector]] is named '" + a.connector + "'");
    return;
  }
  if (cn->type != type) {
    c.error(at, prefix + ".connector",
            "connector '" + a.connector + "' is of type '" + to_string(cn->type)
              + "', not '" + kind + "'");
    return;
  }
  if (cn->token.empty())
    c.error(at, prefix + ".connector",
            "connector '" + a.connector + "' has no token (set its token or "
              + connector_env_name(cn->name, "TOKEN") + ")");
}

/// A slack connector needs its signing secret (the route takes no bearer
/// token: the signature is what keeps strangers from posting events) and
/// the HTTP server.
void check_slack_connector(checker& c, const connector_config& cn,
                           const std::string& prefix) {
  auto at = c.where({prefix + ".type", prefix});
  if (cn.signing_secret.empty())
    c.error(at, prefix + ".signing_secret",
            "a slack connector requires a signing_secret (or "
              + connector_env_name(cn.name, "SIGNING_SECRET")
              + "): the app's Signing Secret");
  if (!c.s.http.enabled)
    c.error(at, prefix + ".type",
            "a slack connector requires http.enabled = true");
}

/// Telegram's rule for a webhook's secret token: 1..256 of A-Za-z0-9_-.
bool is_telegram_secret(const std::string& x) {
  if (x.empty() || x.size() > 256)
    return false;
  return std::all_of(x.begin(), x.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
  });
}

/// A webhook needs its secret (the route takes no bearer token: the
/// secret is what keeps strangers from posting updates) and the HTTP
/// server; polling needs the bot token.
void check_telegram_connector(checker& c, const connector_config& cn,
                              const std::string& prefix) {
  auto at = c.where({prefix + ".mode", prefix + ".type", prefix});
  if (cn.mode == connector_mode::webhook) {
    if (cn.secret_token.empty())
      c.error(at, prefix + ".secret_token",
              "a telegram webhook connector requires a secret_token (or "
                + connector_env_name(cn.name, "SECRET_TOKEN")
                + "); pass the same value to setWebhook");
    else if (!is_telegram_secret(cn.secret_token))
      c.error(c.where({prefix + ".secret_token", prefix}),
              prefix + ".secret_token",
              "must be 1..256 characters of A-Z, a-z, 0-9, _ and - (what "
              "Telegram accepts)");
    if (!c.s.http.enabled)
      c.error(at, prefix + ".mode",
              "a telegram webhook connector requires http.enabled = true");
  } else if (cn.token.empty()) {
    c.error(at, prefix + ".token",
            "a telegram poll connector requires a token (or "
              + connector_env_name(cn.name, "TOKEN") + ")");
  }
}

void check_messenger_and_connectors(checker& c) {
  auto& s = c.s;
  for (size_t i = 0; i < s.messenger.adapters.size(); ++i) {
    auto& a = s.messenger.adapters[i];
    auto prefix = "messenger.adapter[" + std::to_string(i) + "]";
    if (a.kind == adapter_kind::telegram)
      check_chat_adapter(c, a, prefix, connector_type::telegram);
    if (a.kind == adapter_kind::slack)
      check_chat_adapter(c, a, prefix, connector_type::slack);
    bool smtp_url = a.url.rfind("smtp", 0) == 0;
    if (a.kind == adapter_kind::webhook && a.url.empty())
      c.error(c.where({prefix + ".kind", prefix}), prefix + ".url",
              "a 'webhook' adapter requires a url");
    if (a.kind == adapter_kind::webhook && smtp_url)
      c.error(c.where({prefix + ".url", prefix}), prefix + ".url",
              "a 'webhook' adapter needs an http:// or https:// url");
    if (a.kind == adapter_kind::smtp && a.url.empty())
      c.error(c.where({prefix + ".kind", prefix}), prefix + ".url",
              "an 'smtp' adapter requires a url");
    if (a.kind == adapter_kind::smtp && !a.url.empty() && !smtp_url)
      c.error(c.where({prefix + ".url", prefix}), prefix + ".url",
              "an 'smtp' adapter needs an smtp:// or smtps:// url");
    if (a.kind == adapter_kind::smtp && a.from.empty())
      c.error(c.where({prefix + ".kind", prefix}), prefix + ".from",
              "an 'smtp' adapter requires from");
    if (a.kind == adapter_kind::outbox && a.path.empty())
      c.error(c.where({prefix + ".kind", prefix}), prefix + ".path",
              "an 'outbox' adapter requires a path");
    if (a.channels.empty())
      c.error(c.where({prefix + ".channels", prefix}), prefix + ".channels",
              "delivers for no channel; [\"*\"] means every channel");
  }
  for (size_t i = 0; i < s.connectors.size(); ++i) {
    auto& cn = s.connectors[i];
    auto prefix = "connector[" + std::to_string(i) + "]";
    if ((cn.type == connector_type::jsonl || cn.type == connector_type::maildir)
        && cn.path.empty())
      c.error(c.where({prefix + ".type", prefix}), prefix + ".path",
              std::string{"a '"} + to_string(cn.type)
                + "' connector requires a path");
    if (cn.type == connector_type::http && cn.enabled && !s.http.enabled)
      c.error(c.where({prefix + ".type", prefix}), prefix + ".type",
              "an 'http' connector requires http.enabled = true");
    if ((cn.type == connector_type::http || cn.type == connector_type::telegram
         || cn.type == connector_type::maildir
         || cn.type == connector_type::slack)
        && cn.endpoint_identity.empty())
      c.error(c.where({prefix + ".type", prefix}),
              prefix + ".endpoint_identity",
              std::string{"a '"} + to_string(cn.type)
                + "' connector requires an endpoint_identity");
    if (cn.type == connector_type::telegram && cn.enabled)
      check_telegram_connector(c, cn, prefix);
    if (cn.type == connector_type::slack && cn.enabled)
      check_slack_connector(c, cn, prefix);
    c.unique_name(s.connectors, i, "connector", "connector");
  }
}

/// Each [[rate_limits.tier]] names a channel or senders (`channel:identity`,
/// each in one tier only), and a channel has at most one tier.
void check_rate_limit_tiers(checker& c) {
  auto& tiers = c.s.rate_limits.tiers;
  static const std::vector<std::string> channels{"telegram", "slack", "email",
                                                 "api", "mcp"};
  for (size_t i = 0; i < tiers.size(); ++i) {
    auto& t = tiers[i];
    auto prefix = "rate_limits.tier[" + std::to_string(i) + "]";
    c.unique_name(tiers, i, "rate_limits.tier", "tier");
    c.unique(tiers, i, "rate_limits.tier", &rate_limit_tier::channel, "channel",
             "channel tier");
    if (t.channel.empty() == t.senders.empty())
      c.error(c.where({prefix + ".channel", prefix + ".senders", prefix}),
              prefix,
              "set exactly one of channel (every sender of a channel) and "
              "senders (the senders listed)");
    for (size_t k = 0; k < t.senders.size(); ++k) {
      auto key = prefix + ".senders[" + std::to_string(k) + "]";
      auto& x = t.senders[k];
      auto colon = x.find(':');
      auto ch = x.substr(0, colon);
      if (colon == std::string::npos || colon + 1 == x.size()
          || std::find(channels.begin(), channels.end(), ch) == channels.end())
        c.error(c.where({prefix + ".senders", prefix}), key,
                "'" + x
                  + "' is not channel:identity with a channel of "
                    "telegram, slack, email, api, mcp");
      for (size_t j = 0; j < i; ++j)
        if (std::find(tiers[j].senders.begin(), tiers[j].senders.end(), x)
            != tiers[j].senders.end())
          c.error(c.where({prefix + ".senders", prefix}), key,
                  "sender '" + x + "' is in tier '" + tiers[j].name
                    + "' already");
    }
  }
}

void check_cluster(checker& c) {
  auto& s = c.s;
  auto& cl = s.cluster;
  bool any_tls = !cl.tls_certificate.empty() || !cl.tls_key.empty()
                 || !cl.tls_cafile.empty();
  if (any_tls) {
    // Mutual authentication needs all three: without a CA, CAF would accept
    // any certificate; without a certificate, it falls back to anonymous TLS.
    for (auto [key, value] :
         {std::pair{"cert", &cl.tls_certificate}, std::pair{"key", &cl.tls_key},
          std::pair{"ca", &cl.tls_cafile}})
      if (value->empty())
        c.error(c.where({"cluster.tls", "cluster"}),
                std::string{"cluster.tls."} + key,
                "missing: [cluster.tls] needs cert, key and ca (mutual "
                "authentication)");
  }
  if (cl.active() && !is_loopback(cl.bind) && !any_tls)
    c.error(c.where({"cluster.bind", "cluster"}), "cluster.bind",
            "binding a non-loopback address ('" + cl.bind
              + "') requires [cluster.tls] with cert, key and ca");
  if (!cl.switchboard && !cl.active())
    c.error(c.where({"cluster.switchboard", "cluster"}), "cluster.switchboard",
            "false makes a butler-only node, which requires the cluster "
            "(cluster.port or cluster.peers)");
  for (size_t i = 0; i < cl.butlers.size(); ++i) {
    auto& name = cl.butlers[i];
    if (name == "*" || name == "general")
      continue;
    bool known = std::any_of(s.butlers.begin(), s.butlers.end(),
                             [&](const butler_config& b) {
                               return b.name == name;
                             });
    if (!known)
      c.error(c.where({"cluster.butlers", "cluster"}),
              "cluster.butlers[" + std::to_string(i) + "]",
              "no [[butler]] named '" + name + "'");
  }
  if (s.http.enabled && cl.port != 0 && cl.port == s.http.port
      && cl.bind == s.http.bind)
    c.error(c.where({"cluster.port", "cluster"}), "cluster.port",
            "same address as http.port");
}

} // namespace

bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]")
    return true;
  // IPv4 dotted quad whose first octet is 127.
  int octets = 0;
  size_t i = 0;
  int first = -1;
  while (i <= host.size()) {
    size_t j = i;
    int value = 0;
    while (j < host.size() && host[j] >= '0' && host[j] <= '9' && j - i < 3) {
      value = value * 10 + (host[j] - '0');
      ++j;
    }
    if (j == i || value > 255)
      return false;
    if (first < 0)
      first = value;
    ++octets;
    if (j == host.size())
      break;
    if (host[j] != '.')
      return false;
    i = j + 1;
  }
  return octets == 4 && first == 127;
}

std::vector<config_error> validate_settings(const node_settings& s) {
  checker c{s, {}};
  check_http_and_switchboard(c);
  check_router_and_policies(c);
  check_budgets(c);
  check_butlers(c);
  check_messenger_and_connectors(c);
  check_cluster(c);
  check_rate_limit_tiers(c);
  std::stable_sort(c.errors.begin(), c.errors.end(),
                   [](const config_error& x, const config_error& y) {
                     return std::tie(x.line, x.column)
                            < std::tie(y.line, y.column);
                   });
  return std::move(c.errors);
}

config_result load_settings(const std::string& path) {
  auto result = load_config(path);
  if (result.settings) {
    auto env_errors = apply_env_overrides(*result.settings);
    result.errors.insert(result.errors.end(), env_errors.begin(),
                         env_errors.end());
    auto cross = validate_settings(*result.settings);
    result.errors.insert(result.errors.end(), cross.begin(), cross.end());
  }
  if (!result.errors.empty())
    result.settings.reset();
  return result;
}

std::string redact_database_url(std::string_view url) {
  std::string out{url};
  auto starts_with = [&](std::string_view prefix) {
    return url.substr(0, prefix.size()) == prefix;
  };
  if (starts_with("postgresql://") || starts_with("postgres://")) {
    auto auth_begin = url.find("://") + 3;
    auto auth_end = url.find_first_of("/?#", auth_begin);
    if (auth_end == std::string_view::npos)
      auth_end = url.size();
    // Query parameters first: replacing them does not move the authority.
    auto query = url.find('?', auth_begin);
    if (query != std::string_view::npos) {
      std::string rebuilt{url.substr(0, query + 1)};
      auto rest = url.substr(query + 1);
      auto fragment = rest.find('#');
      auto tail = fragment == std::string_view::npos ? std::string_view{}
                                                     : rest.substr(fragment);
      rest = rest.substr(0, fragment);
      size_t i = 0;
      bool first = true;
      while (i <= rest.size()) {
        auto amp = rest.find('&', i);
        if (amp == std::string_view::npos)
          amp = rest.size();
        auto param = rest.substr(i, amp - i);
        if (!first)
          rebuilt += '&';
        first = false;
        if (param.substr(0, 9) == "password=")
          rebuilt += "password=***";
        else
          rebuilt += param;
        i = amp + 1;
      }
      rebuilt += tail;
      out = std::move(rebuilt);
    }
    auto authority = url.substr(auth_begin, auth_end - auth_begin);
    auto at = authority.rfind('@');
    if (at != std::string_view::npos) {
      auto colon = authority.find(':');
      if (colon != std::string_view::npos && colon < at)
        out.replace(auth_begin + colon + 1, at - colon - 1, "***");
    }
    return out;
  }
  // key=value form: password = value, value plain or single-quoted.
  std::string result;
  size_t i = 0;
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  while (i < url.size()) {
    if (is_space(url[i])) {
      result += url[i++];
      continue;
    }
    auto key_begin = i;
    while (i < url.size() && url[i] != '=' && !is_space(url[i]))
      ++i;
    auto key = url.substr(key_begin, i - key_begin);
    while (i < url.size() && is_space(url[i]))
      ++i;
    if (i >= url.size() || url[i] != '=') {
      // Not key=value: keep the rest untouched.
      result += url.substr(key_begin);
      return result;
    }
    ++i;
    while (i < url.size() && is_space(url[i]))
      ++i;
    auto value_begin = i;
    if (i < url.size() && url[i] == '\'') {
      ++i;
      while (i < url.size() && url[i] != '\'') {
        if (url[i] == '\\' && i + 1 < url.size())
          ++i;
        ++i;
      }
      if (i < url.size())
        ++i;
    } else {
      while (i < url.size() && !is_space(url[i]))
        ++i;
    }
    result += key;
    result += '=';
    if (key == "password")
      result += "***";
    else
      result += url.substr(value_begin, i - value_begin);
  }
  return result;
}

std::vector<std::string> config_warnings(const node_settings& s) {
  std::vector<std::string> out;
  if (s.cluster.active() && s.node.name == node_config{}.name)
    out.push_back("node.name is still the default \"" + s.node.name
                  + "\" while [cluster] is on: give every node of the cluster "
                    "a name of its own (a peer with this node's name is "
                    "refused)");
  return out;
}

} // namespace butlers
