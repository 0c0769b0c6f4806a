#pragma once

// The messenger's slack adapter (`[[messenger.adapter]] kind = "slack"`,
// actors/SLACK.md): a reply goes to the conversation the request came from
// as chat.postMessage in the message's thread, split at
// `slack_chunk_chars`; a `send` goes to its recipient (a channel id) as a
// new message; lifecycle reactions (notify.v1 intent "react") are
// reactions.add of the state's emoji on the source message, then
// reactions.remove of the other states' (a message shows one state).
// Every chunk and reaction is recorded in the outbound ledger before and
// after it is sent, as the telegram adapter's are. Blocking: it runs on
// the messenger's delivery threads, HTTP through the shared client. The
// bot token goes only into the Authorization header, never into a log.

#include <chrono>
#include <string>

#include "runtime/delivery.hpp"
#include "runtime/slack.hpp"

namespace butlers {

/// Where the Web API is: the slack connector's `api_base` and `token`.
struct slack_endpoint {
  std::string api_base = "https://slack.com/api";
  std::string token;
};

/// The adapter's pauses (tests shorten them).
struct slack_timing {
  /// Full-jitter exponential backoff after a 5xx, a timeout or a failed
  /// connection.
  std::chrono::milliseconds backoff_base{500};
  std::chrono::milliseconds backoff_cap{10000};
  /// A 429 asking for a longer wait than this fails the send
  /// (overload_rejected) instead of holding a delivery thread.
  std::chrono::milliseconds max_retry_after{60000};
};

class slack_adapter final : public delivery_adapter {
 public:
  slack_adapter(delivery_adapter_config cfg, slack_endpoint endpoint,
                slack_timing timing = {});

  bool reacts() const override;

  delivery_attempt deliver(const delivery_context& dc) const override;

 private:
  delivery_attempt send_text(const delivery_context& dc) const;
  delivery_attempt react(const delivery_context& dc) const;

  /// Sets `name` on `msg` (reactions.add, "already_reacted" is success),
  /// then removes the other states' emoji ("no_reaction" is success).
  slack_answer show(const slack_message_ref& msg, const std::string& name,
                    const delivery_context& dc) const;

  /// Calls `method` with `body`, retrying what may succeed later (up to
  /// `retries` times); a retry after an ambiguous answer records `resend`
  /// in the ledger when `send` is set.
  slack_answer call(const std::string& method, const std::string& body,
                    const delivery_context& dc,
                    const outbound_send* send) const;

  slack_endpoint endpoint_;
  slack_timing timing_;
};

} // namespace butlers
