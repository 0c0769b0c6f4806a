#pragma once

// A local SMTP server on 127.0.0.1 (ephemeral port) that keeps every message
// it accepts, for tests of mail delivery. It speaks RFC 5321 as a submission
// server does: greeting 220; EHLO (advertising 8BITMIME, SIZE, AUTH PLAIN
// LOGIN) or HELO; AUTH PLAIN and LOGIN (RFC 4954); MAIL FROM, RCPT TO, DATA
// with dot-unstuffing; RSET, NOOP, VRFY, HELP, QUIT; out-of-order commands
// get 503, unknown ones 502. No TLS: STARTTLS is not offered. Faults make
// the next transactions fail with 451 or 550 at RCPT or at the end of DATA.
// One thread per connection; the destructor closes every connection and
// joins every thread.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test/support/loopback_server.hpp"

namespace butlers::test {

/// One message the sink accepted (250 after DATA).
struct smtp_received {
  /// The EHLO/HELO argument.
  std::string helo;
  /// Whom AUTH authenticated ("" when the session did not).
  std::string auth_user;
  /// The MAIL FROM reverse-path without its angle brackets ("" for <>).
  std::string mail_from;
  /// MAIL FROM parameters as sent ("SIZE=123 BODY=8BITMIME").
  std::string mail_params;
  /// Accepted RCPT TO forward-paths without angle brackets, in order.
  std::vector<std::string> rcpt_to;
  /// The message as transmitted after dot-unstuffing: CRLF line ends,
  /// without the terminating "." line.
  std::string data;
  /// The header section, unfolded (RFC 5322 §2.2.3), in order; values
  /// without the whitespace after the colon.
  std::vector<std::pair<std::string, std::string>> headers;
  /// When the final "." arrived.
  std::chrono::steady_clock::time_point at;

  /// The first header called `name` (case-insensitive).
  std::optional<std::string> header(std::string_view name) const;
  /// Every header called `name` (case-insensitive), in order.
  std::vector<std::string> headers_named(std::string_view name) const;
  /// What follows the blank line after the headers.
  std::string body() const;
};

/// One AUTH exchange.
struct smtp_auth_attempt {
  /// "PLAIN" or "LOGIN".
  std::string mechanism;
  std::string user;
  bool accepted = false;
};

/// Where a fault strikes and what it answers.
struct smtp_fault {
  enum class stage {
    /// Every RCPT TO of the transaction (DATA then gets 554: no valid
    /// recipients).
    rcpt,
    /// The reply to the final "." (the message was sent in full, then
    /// refused); nothing is recorded.
    data,
  };
  stage at = stage::rcpt;
  int code = 451;
  std::string text;

  /// 451 4.3.0 (try again later).
  static smtp_fault temporary(stage at);
  /// 550 5.7.1 (refused for good).
  static smtp_fault permanent(stage at);
};

struct smtp_sink_options {
  /// The name in the greeting and the EHLO reply.
  std::string hostname = "sink.test";
  /// AUTH succeeds with exactly these (535 otherwise). Empty username:
  /// any credentials succeed.
  std::string username;
  std::string password;
  /// MAIL FROM before a successful AUTH gets 530.
  bool require_auth = false;
  /// Advertised as SIZE; a bigger message gets 552.
  size_t max_size = 10 * 1024 * 1024;
};

class smtp_sink {
 public:
  explicit smtp_sink(smtp_sink_options options = {});
  ~smtp_sink();

  smtp_sink(const smtp_sink&) = delete;
  smtp_sink& operator=(const smtp_sink&) = delete;

  uint16_t port() const {
    return server_.port();
  }

  /// "smtp://127.0.0.1:<port>".
  std::string url() const;

  /// The next `transactions` mail transactions (each begins with an
  /// accepted MAIL FROM) fail with `fault`. Faults queue in order.
  void inject(smtp_fault fault, int transactions = 1);

  /// Faults not yet used.
  size_t pending_faults() const;

  /// Every accepted message, in order.
  std::vector<smtp_received> messages() const;

  size_t message_count() const;

  /// Waits until at least `n` messages were accepted or `timeout` passed.
  bool wait_for_messages(size_t n, std::chrono::milliseconds timeout) const;

  /// Every AUTH exchange, in order.
  std::vector<smtp_auth_attempt> auth_attempts() const;

  /// Every command line received, in order (AUTH payloads and message
  /// content excluded): for asserting the dialogue, e.g. that QUIT came.
  std::vector<std::string> commands() const;

  /// Connections accepted so far.
  size_t sessions() const {
    return server_.accepted();
  }

 private:
  friend class smtp_session;

  void serve(loopback_connection& conn);
  std::optional<smtp_fault> take_fault();
  void record_message(smtp_received msg);
  void record_auth(smtp_auth_attempt a);
  void record_command(std::string line);

  smtp_sink_options options_;
  mutable std::mutex mtx_;
  mutable std::condition_variable changed_;
  std::deque<smtp_fault> faults_;
  std::vector<smtp_received> messages_;
  std::vector<smtp_auth_attempt> auths_;
  std::vector<std::string> commands_;
  /// Last member: its threads use everything above.
  loopback_server server_;
};

/// Base64 (RFC 4648, with padding), for AUTH dialogues in tests.
std::string base64_encode(std::string_view data);

/// Nullopt when `text` is not valid padded base64.
std::optional<std::string> base64_decode(std::string_view text);

} // namespace butlers::test
