#pragma once

// The `telegram` connector in `mode = "poll"` (runtime/telegram.md):
// long-polls `getUpdates` (the three kinds it takes as `allowed_updates`)
// through the shared HTTP client, maps each Update to ingest.v1
// (runtime/telegram_update.hpp) and submits a batch's envelopes in order.
// The offset that confirms a batch to Telegram goes out with the next
// getUpdates only once every Update of the batch is committed (or could
// never be: ignored and invalid ones), so a crash makes Telegram send the
// unconfirmed ones again and dedupe (update_id + bot) absorbs those already
// stored.
//
// Failures: a transport error, a 5xx or a 409 (another poller, or a webhook
// set for the bot) waits a jittered exponential backoff (1 s doubling to
// 60 s); a 429 waits `parameters.retry_after`; a 401 or 404 (Telegram's
// answer to a bad token) stops the connector with a log line saying so.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/attachment_store.hpp"
#include "runtime/connector_source.hpp"
#include "runtime/http_client.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {

/// What one getUpdates answer said.
struct get_updates_answer {
  enum class kind : uint8_t {
    /// `updates` holds the result (possibly none).
    updates,
    /// Try again after `retry_after` (429) or a backoff (transport, 5xx,
    /// 409, an answer that is not Telegram's).
    retry,
    /// The token is refused (401, 404): stop.
    fatal,
  };
  kind what = kind::retry;
  /// kind updates: each Update of the result (JSON text).
  std::vector<std::string> updates;
  /// kind retry: Telegram's `parameters.retry_after` (429).
  std::optional<std::chrono::seconds> retry_after;
  /// retry, fatal: what happened, for logs (never the token).
  std::string reason;
};

/// Reads a getUpdates response (`http_client` outcome).
get_updates_answer read_get_updates(const http_response& r);

/// The getUpdates request: `offset` (0: none), the long-poll `timeout_s`
/// and the kinds the connector takes.
http_request get_updates_request(const std::string& api_base,
                                 const std::string& token, int64_t offset,
                                 uint32_t timeout_s, uint32_t limit);

class telegram_poll_source final : public connector_source {
 public:
  /// Performs one HTTP request, blocking; `cancel` is the stop flag.
  using fetch_fn = std::function<http_response(const http_request&,
                                               const std::atomic<bool>*)>;

  struct options {
    /// The connector's name, for logs.
    std::string name;
    std::string api_base = "https://api.telegram.org";
    /// Never logged.
    std::string token;
    /// The bot: `source.endpoint_identity` of every envelope.
    std::string endpoint_identity;
    uint32_t poll_timeout_s = 30;
    /// Updates per getUpdates (Telegram allows 1..100).
    uint32_t limit = 100;
    /// Envelopes submitted at once (`max_in_flight`).
    size_t batch = 8;
    std::chrono::milliseconds backoff{1000};
    std::chrono::milliseconds max_backoff{60000};
    /// Defaults to the shared HTTP client.
    fetch_fn fetch;
    /// callback_query Updates go here (bot, Update JSON); empty: ignored.
    std::function<void(const std::string&, const std::string&)> on_callback;
    /// Where the files of messages go (runtime/telegram_files.hpp); null:
    /// a message with files waits (retried) until there is one.
    std::shared_ptr<attachment_store> attachments;
    /// The caps a message's files are held to.
    attachment_limits attachment_caps;
  };

  explicit telegram_poll_source(options opts);

  void run(connector_sink& sink) override;

 private:
  /// Maps and submits one batch until every Update is settled; returns
  /// the offset confirming it (0 when the batch had no usable update_id),
  /// or nullopt when stopped first.
  std::optional<int64_t> take(connector_sink& sink,
                              const std::vector<std::string>& updates);

  /// Submits `subs` until each is settled; false when stopped first.
  bool submit(connector_sink& sink, std::vector<submission> subs);

  /// Fetches and stores the files of `m` and adds them to its envelope;
  /// for a message over a cap, tells its sender and counts it. False when
  /// the message is not to be submitted (refused) or the source stopped
  /// (`stopped` set).
  bool attach(connector_sink& sink, telegram_update_mapping& m, bool& stopped);

  /// Waits the next backoff (doubling, jittered); false when stopped.
  bool back_off(connector_sink& sink, uint32_t& attempt);

  options opts_;
  std::mt19937_64 rng_;
};

} // namespace butlers
