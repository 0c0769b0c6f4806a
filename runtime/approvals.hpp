#pragma once

// Tool approvals as plain functions (runtime/approvals.md): a butler's
// policy (ask, allow, deny and patterns per tool name), the short summary
// of a tool's arguments that is stored and shown, who may answer (the
// run's starter), and the Telegram bodies of the question and its answer
// (an inline keyboard whose callback_data carries the approval id), and the
// question by mail and a reply that answers it. No I/O here
// (actors/tool_server_approvals.cpp asks, waits and answers;
// actors/tool_server_approval_mail.cpp does it by mail).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace butlers {

struct butler_config;

/// What a butler does when a session wants to use a tool that needs a yes.
enum class approval_mode : uint8_t {
  /// Put the question to the run's starter and wait for the answer.
  ask,
  /// Approve without asking.
  allow,
  /// Refuse without asking (the default: nobody is asked by surprise).
  deny,
};

/// "ask", "allow", "deny".
const char* to_string(approval_mode x);

/// Parses "ask", "allow" or "deny".
std::optional<approval_mode> parse_approval_mode(std::string_view x);

/// A butler's `approvals`, `approvals_allow`, `approvals_deny` and
/// `approval_timeout_s`.
struct approval_policy {
  approval_mode mode = approval_mode::deny;
  /// Tool names (`*` matches any run of characters) approved or refused
  /// without asking whatever `mode` says; deny patterns win.
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  /// How long a question waits for its answer; then it is denied
  /// (`expired`).
  uint32_t timeout_s = 600;

  static approval_policy of(const butler_config& cfg);

  /// What to do for `tool`: deny patterns, then allow patterns, then mode.
  approval_mode decide(std::string_view tool) const;

  /// Whether a runtime should hand its approval requests over at all
  /// (false: every request is declined where it arises, as before).
  bool active() const {
    return mode != approval_mode::deny || !allow.empty();
  }
};

/// `*`-glob match of a whole name (no other metacharacters).
bool glob_match(std::string_view pattern, std::string_view name);

/// At most `max_chars` code points of `text` with control characters as
/// spaces, and "…" when cut; never splits a UTF-8 sequence.
std::string approval_summary(std::string_view text, size_t max_chars = 200);

/// The outcome of an approval: "approved", "denied" or "expired".
bool approval_granted(std::string_view status);

// -- who may answer
// ------------------------------------------------------------

/// The identity of whoever answers through the HTTP API: for now the body's
/// `sender` (one shared bearer token cannot tell callers apart); a scoped
/// token will name it instead, here.
std::string api_caller_identity(std::string_view body_sender);

/// Whether `caller` may answer a question put to (`channel`, `sender`):
/// `caller` is "<channel>:<sender>" or the sender alone.
bool approval_caller_matches(std::string_view channel, std::string_view sender,
                             std::string_view caller);

/// The body of POST /v1/runs/{run_id}/approvals/{approval_id}:
/// `{"decision":"approve"|"deny","sender":"..."}` (sender optional,
/// default "api").
struct approval_post_body {
  bool approve = false;
  std::string sender = "api";
};

/// Reads the body; the error names the bad field.
std::optional<approval_post_body> parse_approval_post(std::string_view body,
                                                      std::string& error);

// -- Telegram --------------------------------------------------------------

/// callback_data of a button: "ap:<approval_id>:y" or ":n" (Telegram's limit
/// is 64 bytes; this is 41).
std::string approval_callback_data(std::string_view approval_id, bool approve);

/// sendMessage with the question and Approve / Deny buttons.
std::string approval_question_body(std::string_view chat_id,
                                   std::string_view text,
                                   std::string_view approval_id);

/// The question's text.
std::string approval_question_text(std::string_view butler,
                                   std::string_view tool,
                                   std::string_view summary,
                                   uint32_t timeout_s);

/// answerCallbackQuery with a short text.
std::string answer_callback_body(std::string_view callback_id,
                                 std::string_view text);

/// editMessageText of the question: its outcome, without buttons.
std::string approval_outcome_body(std::string_view chat_id, int64_t message_id,
                                  std::string_view text);

/// A callback_query Update that answers a question.
struct approval_press {
  std::string callback_id;
  std::string approval_id;
  bool approve = false;
  /// `from.id` of whoever pressed the button.
  std::string from;
};

/// Reads a callback_query Update (JSON text); nullopt when it is not one
/// or its data is not an approval's.
std::optional<approval_press> parse_approval_callback(
  std::string_view update_json);

// -- mail ------------------------------------------------------------------

/// The question's mail: what `approval_question_text` says, and how to
/// answer it.
std::string approval_mail_text(std::string_view butler, std::string_view tool,
                               std::string_view summary, uint32_t timeout_s);

/// The decision of a reply's text: its first non-empty line, trimmed, is
/// `approve` or `deny` (any case); nullopt for anything else (then the
/// mail is an ordinary message). What follows that line (a quoted
/// question, a signature) does not matter.
std::optional<bool> mail_approval_decision(std::string_view text);

/// `notice_ref` of a question that went out as the mail `message_id` (no
/// angle brackets): "email:<message_id>".
std::string approval_mail_notice(std::string_view message_id);

/// Most ids of a reply's In-Reply-To and References that are looked up.
constexpr size_t approval_mail_max_refs = 20;

/// A mail that may answer an approval question (the maildir connector's
/// to the tool server).
struct approval_mail {
  /// `approval_mail_notice` of In-Reply-To and the newest References,
  /// at most `approval_mail_max_refs`.
  std::vector<std::string> notices;
  /// The From address: who answers ("email:<from>").
  std::string from;
  bool approve = false;
  /// The mail's dedupe key (`email:<mailbox>:<Message-ID>`): the same mail
  /// again is recognised as the answer it gave.
  std::string key;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, approval_mail& x) {
  return f(caf::meta::type_name("approval_mail"), x.notices, x.from, x.approve,
           x.key);
}

} // namespace butlers
