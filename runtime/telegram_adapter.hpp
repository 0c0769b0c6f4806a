#pragma once

// The messenger's telegram adapter (`[[messenger.adapter]] kind =
// "telegram"`): replies go to the chat the request came from as
// sendMessage, replying to its message, split at Telegram's limit; a `send`
// goes to its recipient as chat id; lifecycle reactions (notify.v1 intent
// "react") are setMessageReaction on the source message, in the
// messenger's order (never backwards, runtime/reaction_gate.hpp), and from
// 👀 until 😴 or the end the chat shows "typing" (sendChatAction, repeated
// by the messenger's ticker, runtime/typing_ticker.hpp). Every message
// chunk and reaction is recorded in the outbound ledger before and after it
// is sent (runtime/delivery_services.hpp), so a re-run skips what was sent.
// Blocking: it runs on the messenger's delivery threads, HTTP through the
// shared client (runtime/http_client.hpp).

#include <chrono>
#include <string>

#include "runtime/delivery.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/telegram.hpp"

namespace butlers {

class typing_ticker;

/// Where the Bot API is: the telegram connector's `api_base` and `token`.
struct telegram_endpoint {
  std::string api_base = "https://api.telegram.org";
  std::string token;
};

/// The adapter's pauses (tests shorten them).
struct telegram_timing {
  /// Full-jitter exponential backoff after a 5xx, a timeout or a failed
  /// connection.
  std::chrono::milliseconds backoff_base{500};
  std::chrono::milliseconds backoff_cap{10000};
  /// A 429 asking for a longer wait than this fails the send
  /// (overload_rejected) instead of holding a delivery thread.
  std::chrono::milliseconds max_retry_after{60000};
};

class telegram_adapter final : public delivery_adapter {
 public:
  telegram_adapter(delivery_adapter_config cfg, telegram_endpoint endpoint,
                   telegram_timing timing = {});

  bool reacts() const override;

  delivery_attempt deliver(const delivery_context& dc) const override;

 private:
  delivery_attempt send_text(const delivery_context& dc) const;
  delivery_attempt react(const delivery_context& dc) const;
  /// Sets the reaction of `state` on `src` under the ledger; `sent` when
  /// it went out.
  delivery_attempt set_reaction(const delivery_context& dc,
                                const telegram_message_ref& src,
                                lifecycle_state state, int64_t rank,
                                bool& sent) const;
  /// Shows "typing" in `chat_id` for request `request_id` until its 😴
  /// or terminal reaction (`typing_interval_ms`, `typing_max_s`).
  void start_typing(typing_ticker& typing, const std::string& request_id,
                    const std::string& chat_id) const;

  /// Calls `method` with `body`, retrying what may succeed later (up to
  /// `retries` times); a retry after an answer that leaves open whether
  /// the call was carried out records `resend` (a possible duplicate) in
  /// the ledger when `send` is set.
  telegram_answer call(const std::string& method, const std::string& body,
                       const delivery_context& dc,
                       const outbound_send* send) const;

  telegram_endpoint endpoint_;
  telegram_timing timing_;
};

} // namespace butlers
