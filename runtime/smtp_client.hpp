#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace butlers {

/// One mail to submit.
struct smtp_message {
  /// Envelope sender (MAIL FROM), a bare address: "bot@example.org".
  std::string from;
  /// Envelope recipients (RCPT TO), bare addresses.
  std::vector<std::string> to;
  /// The whole RFC 5322 message, headers and body. Bare LF line ends are
  /// sent as CRLF; lines starting with '.' are dot-stuffed by libcurl.
  std::string rfc822;
};

/// How a submission ended.
struct smtp_result {
  /// The server accepted the message (250 after DATA).
  bool sent = false;
  /// Not sent, but trying again may succeed: a 4xx reply, a transport
  /// error (connect, TLS, timeout, connection lost) or cancellation.
  /// A 5xx reply is permanent.
  bool retryable = false;
  /// The last SMTP reply code; 0 when none arrived.
  int code = 0;
  /// What went wrong; never contains the credentials.
  std::string error;
};

/// Submits `m` through libcurl. `url`: `smtp://host[:port]` (STARTTLS when
/// the server offers it; certificates are then checked) or
/// `smtps://host[:port]` (implicit TLS). `username` and `password` are
/// sent (AUTH) only when `username` is not empty. `timeout` bounds the
/// whole exchange; `cancel`, when set, is polled during it (every 50 ms at
/// least). The CA bundle is BUTLERS_CA_FILE when set, as for
/// shared_http_client(). Blocking: the same rules as http_client::perform.
/// Never throws.
smtp_result smtp_send(const std::string& url, const smtp_message& m,
                      const std::string& username, const std::string& password,
                      std::chrono::milliseconds timeout,
                      const std::atomic<bool>* cancel = nullptr);

} // namespace butlers
