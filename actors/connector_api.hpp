#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include "actors/http_api.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/connector_ingest.hpp"
#include "runtime/connector_metrics.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {

class attachment_store;
class blocking_pool;

/// The HTTP routes that feed connectors (actors/README.md "Connectors"),
/// checked and mapped on the HTTP thread, then handed to the connector actor
/// (its in-flight limit, its metrics, the switchboard's ingest path), whose
/// answer after the commit completes the response:
///
/// - `POST /v1/connectors/{name}/webhook`, a `telegram` connector in
///   `webhook` mode: no bearer token (Telegram cannot send one), but the
///   connector's `secret_token` in `X-Telegram-Bot-Api-Secret-Token`
///   (401 otherwise, nothing stored). The Update is mapped to ingest.v1
///   (runtime/telegram_update.hpp); its files are fetched with getFile
///   and stored on a pool thread first (actors/connector_files.cpp; over
///   a cap: refused with a message to the person, then 200; Telegram or
///   the database away: 503); 200 once stored or deduplicated, 200
///   for what can never be stored (ignored kinds, malformed Updates: counted
///   and logged, so Telegram, which retries every non-2xx, does not send
///   garbage forever), 429 at `max_in_flight`, 503 while the database or
///   the switchboard is away or the node drains, 504 past
///   `http.request_timeout_ms` (Telegram retries; dedupe absorbs a late
///   commit).
/// - `POST /v1/connectors/{name}/events`, a `slack` connector (Slack's
///   Events API, actors/SLACK.md): no bearer token, but Slack's request
///   signature with the connector's `signing_secret`, within five minutes
///   of now (401 otherwise, counted by reason, nothing stored). A
///   `url_verification` is answered with its challenge; an event is mapped
///   to ingest.v1 (runtime/slack_event.hpp) and answered as a Telegram
///   webhook is: 200 once stored or deduplicated (Slack's retries, same
///   message, are duplicates), 200 for ignored (counted per reason: bot,
///   edit, deletion, other) and invalid bodies, 429, 503, 504 as above
///   (Slack retries those).
/// - `POST /v1/connectors/{name}/ingest`, an `http` connector: POST
///   /v1/ingest (bearer token, the same body, answers and statuses) with the
///   connector's own `max_in_flight` (429) and metrics, and every
///   envelope's `source.endpoint_identity` held to the connector's (400
///   otherwise).
class connector_api {
 public:
  /// `settings` and `ctx` outlive this.
  connector_api(caf::actor_system& sys, const node_settings& settings,
                node_context_ptr ctx);

  connector_api(const connector_api&) = delete;
  connector_api& operator=(const connector_api&) = delete;

  /// POST /v1/connectors/{name}/webhook.
  void telegram_webhook(const http_call& call, http_responder& out,
                        const path_params& p);

  /// POST /v1/connectors/{name}/events.
  void slack_events(const http_call& call, http_responder& out,
                    const path_params& p);

  /// POST /v1/connectors/{name}/ingest.
  void ingest(const http_call& call, http_responder& out, const path_params& p);

  /// Anything else under /v1/connectors/.
  void other(const http_call& call, http_responder& out, const path_params& p);

 private:
  /// An enabled connector this node runs.
  struct entry {
    connector_config cfg;
    connector_metrics metrics;
    connector_ingest_rules rules;
    /// slack: events ignored, by `slack_ignore_reason`, and requests
    /// refused with 401, by `slack_signature_status`.
    std::array<counter*, 5> slack_ignored{};
    std::array<counter*, 5> slack_refused{};
  };

  /// Registers the slack counters of `e`.
  void slack_metrics(entry& e);

  /// The enabled connector `name` of `type`; null when there is none.
  const entry* find(std::string_view name, connector_type type) const;

  /// Hands `rec` to the connector and answers with `render` of its result,
  /// or `fail` of its error.
  void submit(const entry& e, inbox_record rec, http_responder& out,
              std::function<http_reply(const append_result&)> render,
              std::function<http_reply(const caf::error&)> fail);

  /// Fetches and stores `m`'s files on `files_pool_`, then submits it with
  /// them (actors/connector_files.cpp).
  void submit_with_files(const entry& e, telegram_update_mapping m,
                         http_responder& out);

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
  std::map<std::string, entry, std::less<>> entries_;
  /// Webhook-mode Telegram connectors' files: where they are stored (one
  /// connection) and the threads that fetch them (one download each at a
  /// time, a few waiting; the node's drain cancels them). Null without
  /// such a connector or without a database.
  std::shared_ptr<attachment_store> files_;
  std::shared_ptr<blocking_pool> files_pool_;
};

} // namespace butlers
