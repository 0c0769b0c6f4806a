#pragma once

// The messenger's channel adapters: where a notify.v1 goes once the
// messenger has it. One class per kind (a webhook, an outbox file) behind
// `delivery_adapter`, made from `[[messenger.adapter]]` by one factory, so
// a new channel (Telegram, SMTP) is one more subclass and one more line in
// the factory. No actors here: the session (or the butler, for deliveries
// that never block) decides on which thread a delivery runs.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/delivery_services.hpp"
#include "runtime/messages.hpp"
#include "runtime/route.hpp"
#include "runtime/smtp_client.hpp"

namespace butlers {

/// One adapter's try at a delivery.
struct delivery_attempt {
  /// "" when it delivered, else why not.
  std::string error;
  /// A later try may succeed (a server that was down, a full queue).
  bool retryable = false;
  /// The failure's class of the taxonomy; "" means target_unavailable.
  std::string error_class;
};

/// Everything one delivery gives an adapter's `deliver`.
struct delivery_context {
  /// The notify.v1, read and as JSON text.
  const notify_view& view;
  const std::string& notify;
  /// The delivery's work item lineage: request and segment of every ledger
  /// key this delivery sends under (`outbound_key`).
  const std::string& request_id;
  const std::string& segment_id;
  /// Source messages and the outbound ledger.
  delivery_services& services;
  /// When set, ends retries early (the session was cancelled or timed out).
  const std::atomic<bool>* stop = nullptr;
};

/// An outbound channel adapter (one `[[messenger.adapter]]`).
class delivery_adapter {
 public:
  explicit delivery_adapter(delivery_adapter_config cfg);

  virtual ~delivery_adapter();

  /// Its configuration.
  const delivery_adapter_config& config() const {
    return cfg_;
  }

  /// It delivers for source channel `channel` (its `channels` name it, or
  /// "*"; a telegram or slack adapter only for its own channel).
  bool serves(std::string_view channel) const;

  /// `post` never blocks the calling thread (then a delivery through
  /// adapters like this one needs no thread and no session of its own).
  virtual bool nonblocking() const;

  /// Whether it sets lifecycle reactions (notify.v1 intent "react"); the
  /// others are left out of a reaction's plan. False by default.
  virtual bool reacts() const;

  /// Delivers `dc.notify`, blocking until it is delivered or given up.
  virtual delivery_attempt deliver(const delivery_context& dc) const = 0;

  /// Delivers `notify` without ledger or source message (only adapters that
  /// need neither are `nonblocking()`) and calls `done` once with the
  /// outcome, on any thread. Blocks as `deliver` does unless
  /// `nonblocking()`.
  virtual void post(const notify_view& view, const std::string& notify,
                    std::function<void(delivery_attempt)> done) const;

 protected:
  delivery_adapter_config cfg_;
};

/// POSTs the notify to an http:// URL, with retries (see deliver_webhook).
class webhook_adapter final : public delivery_adapter {
 public:
  using delivery_adapter::delivery_adapter;

  delivery_attempt deliver(const delivery_context& dc) const override;
};

/// Appends `{"notify":...}` as one line to a file, synced; posted lines go
/// to the file's writer thread, which syncs many at once.
class outbox_adapter final : public delivery_adapter {
 public:
  using delivery_adapter::delivery_adapter;

  bool nonblocking() const override;

  delivery_attempt deliver(const delivery_context& dc) const override;

  void post(const notify_view& view, const std::string& notify,
            std::function<void(delivery_attempt)> done) const override;
};

/// Mails the answer through an SMTP relay (runtime/smtp_delivery.cpp). A
/// reply goes to the source mail's Reply-To (else its From) with "Re: " and
/// its subject, In-Reply-To its Message-ID and References its References
/// plus that id, read from the stored request (`payload.raw`, see
/// `mail_raw_fields`); a reply to a request that did not come by mail, or
/// whose row is gone, goes to the recipient of the notify without
/// threading. The send is recorded in the outbound ledger under (request,
/// segment, "mail") before and after it, and its Message-ID follows that
/// key, so a redelivery in the counted window carries the same id.
/// Automatic replies to auto-submitted mail (bounces, vacation notices;
/// RFC 3834) are refused, which breaks mail loops.
class smtp_adapter final : public delivery_adapter {
 public:
  /// How a mail goes out: `smtp_send`, or a fake in unit tests.
  using send_fn = std::function<
    smtp_result(const std::string& url, const smtp_message& m,
                const std::string& username, const std::string& password,
                std::chrono::milliseconds timeout,
                const std::atomic<bool>* cancel)>;

  /// Sends with `smtp_send`; the credentials are read once, here, from the
  /// environment variables `cfg` names.
  explicit smtp_adapter(delivery_adapter_config cfg);

  /// The same with the send function, the environment and the clock given.
  smtp_adapter(delivery_adapter_config cfg, send_fn send,
               const std::function<const char*(const char*)>& getenv_fn,
               std::function<int64_t()> now_us);

  delivery_attempt deliver(const delivery_context& dc) const override;

 private:
  /// Sends `m`, retrying transient failures `cfg_.retries` times with
  /// backoff; stops early when `stop` is raised.
  smtp_result send_with_retries(const smtp_message& m,
                                const std::atomic<bool>* stop) const;

  send_fn send_;
  std::string username_;
  std::string password_;
  std::function<int64_t()> now_us_;
};

/// The key an smtp adapter makes a delivery's Message-ID from
/// (`mail_draft::delivery_key`, `reply_message_id`): one per (request,
/// segment), so whoever knows both knows the id before the mail goes out.
std::string smtp_delivery_key(std::string_view request_id,
                              std::string_view segment_id);

using delivery_adapter_ptr = std::shared_ptr<const delivery_adapter>;

/// The adapter `cfg.kind` names; a telegram adapter takes the token and
/// api_base of the connector `cfg.connector` names among `connectors`.
delivery_adapter_ptr make_delivery_adapter(
  const delivery_adapter_config& cfg,
  const std::vector<connector_config>& connectors = {});

/// The messenger's adapters, in configured order; none configured means
/// one outbox, "outbox.jsonl" in the working directory.
std::vector<delivery_adapter_ptr> make_delivery_adapters(
  const std::vector<delivery_adapter_config>& configured,
  const std::vector<connector_config>& connectors = {});

/// A notify and the adapters that serve its channel, in configured order.
struct delivery_plan {
  notify_view view;
  std::vector<delivery_adapter_ptr> adapters;

  /// No adapter of the plan blocks.
  bool nonblocking() const;
};

/// The plan for `notify`, or the result that ends the delivery now: a
/// failure (not a notify.v1, or no adapter serves its channel), or, for a
/// reaction (intent "react") that no adapter serving its channel sets,
/// success with nothing sent.
std::variant<delivery_plan, adapter_result> plan_delivery(
  const std::vector<delivery_adapter_ptr>& adapters, const std::string& notify);

/// The delivery's answer from its adapters' attempts (in plan order): the
/// report covers them up to the first failure, which fails the delivery,
/// retryably when any attempt may succeed later.
adapter_result delivery_result(const delivery_plan& plan,
                               const std::vector<delivery_attempt>& attempts);

/// Delivers through every adapter of `plan` in order, blocking; stops at
/// the first failure. `request_id` and `segment_id` are the delivery work
/// item's (the ledger keys' lineage).
adapter_result deliver_blocking(const delivery_plan& plan,
                                const std::string& notify,
                                const std::string& request_id,
                                const std::string& segment_id,
                                delivery_services& services,
                                const std::atomic<bool>* stop);

/// Posts to every adapter of a nonblocking `plan` at once; `done` gets the
/// result once all have answered (on the thread of the last one).
void deliver_nonblocking(delivery_plan plan, const std::string& notify,
                         std::function<void(adapter_result)> done);

} // namespace butlers
