// The `smtp` messenger adapter (runtime/delivery.hpp): a notify.v1 as a
// mail, threaded under the mail it answers.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <variant>

#include <spdlog/spdlog.h>

#include "runtime/delivery.hpp"
#include "runtime/interruptible_sleep.hpp"
#include "runtime/mail.hpp"

namespace butlers {

namespace {

using std::chrono::milliseconds;

const char* env_or_empty(const std::function<const char*(const char*)>& get,
                         const std::string& name) {
  if (name.empty())
    return "";
  const char* v = get(name.c_str());
  return v != nullptr ? v : "";
}

int64_t system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

delivery_attempt failure(std::string error, bool retryable,
                         const char* error_class) {
  delivery_attempt a;
  a.error = std::move(error);
  a.retryable = retryable;
  a.error_class = error_class;
  return a;
}

/// The source mail of a reply: its stored headers, nothing (not a mail, or
/// its row is gone), or the failure to ask.
using source_mail = std::variant<std::optional<mail_raw_fields>,
                                 delivery_attempt>;

source_mail find_source_mail(const delivery_context& dc) {
  auto& v = dc.view;
  if (v.intent != "reply" || v.request_id.empty()
      || v.source_channel != "email")
    return std::optional<mail_raw_fields>{};
  auto found = dc.services.source_payload(v.request_id);
  if (!found.ok)
    return failure("smtp: the source mail of request " + v.request_id
                     + " could not be read: " + found.error,
                   true, "target_unavailable");
  if (!found.found) {
    spdlog::warn("smtp: request {} has no inbox row any more; replying "
                 "without threading",
                 v.request_id);
    return std::optional<mail_raw_fields>{};
  }
  return read_mail_raw(found.raw_payload);
}

/// The mail that answers `dc` (without its delivery key and date), or why
/// there is none.
std::variant<mail_draft, delivery_attempt> make_draft(
  const delivery_context& dc, const delivery_adapter_config& cfg) {
  auto& v = dc.view;
  auto source = find_source_mail(dc);
  if (auto* fail = std::get_if<delivery_attempt>(&source))
    return *fail;
  auto& raw = std::get<std::optional<mail_raw_fields>>(source);
  // make_notify_json names the request's sender as the recipient of every
  // reply; anything else is the butler's own choice and wins.
  bool chosen = !v.recipient.empty() && v.recipient != v.source_sender_identity;
  mail_draft d;
  d.from = cfg.from;
  d.text = v.message;
  if (chosen || !raw) {
    d.to = v.recipient;
  } else {
    if (!raw->may_auto_reply())
      return failure("smtp: no automatic reply to an auto-submitted mail "
                     "(Auto-Submitted: "
                       + raw->auto_submitted + "; RFC 3834)",
                     false, "validation_error");
    d.to = raw->reply_to.empty() ? raw->from.address
                                 : raw->reply_to.front().address;
  }
  if (raw && v.intent == "reply") {
    d.in_reply_to = raw->message_id;
    d.references = raw->references;
    if (d.references.empty() && !raw->in_reply_to.empty())
      d.references.push_back(raw->in_reply_to);
  }
  if (!v.subject.empty())
    d.subject = v.subject;
  else if (raw && v.intent == "reply")
    d.subject = reply_subject(raw->subject);
  else
    d.subject = v.intent == "reply" ? "Re: your message"
                                    : "A message from " + v.origin_butler;
  if (!parse_mail_address(d.to))
    return failure("smtp: no mail address to send to (recipient '" + d.to
                     + "'); route only email to this adapter (channels)",
                   false, "validation_error");
  return d;
}

} // namespace

std::string smtp_delivery_key(std::string_view request_id,
                              std::string_view segment_id) {
  return std::string{request_id} + '\n' + std::string{segment_id} + "\nmail";
}

smtp_adapter::smtp_adapter(delivery_adapter_config cfg)
  : smtp_adapter(std::move(cfg), smtp_send, std::getenv, system_now_us) {
  // nop
}

smtp_adapter::smtp_adapter(
  delivery_adapter_config cfg, send_fn send,
  const std::function<const char*(const char*)>& getenv_fn,
  std::function<int64_t()> now_us)
  : delivery_adapter(std::move(cfg)), send_(std::move(send)),
    username_(env_or_empty(getenv_fn, cfg_.username_env)),
    password_(env_or_empty(getenv_fn, cfg_.password_env)),
    now_us_(std::move(now_us)) {
  // nop
}

smtp_result smtp_adapter::send_with_retries(
  const smtp_message& m, const std::atomic<bool>* stop) const {
  thread_local std::minstd_rand rng{std::random_device{}()};
  smtp_result r;
  for (uint32_t attempt = 0;; ++attempt) {
    r = send_(cfg_.url, m, username_, password_, milliseconds{cfg_.timeout_ms},
              stop);
    if (r.sent || !r.retryable || attempt >= cfg_.retries)
      return r;
    // Full jitter over 200 ms * 2^attempt, at most 5 s.
    auto limit = std::min<int64_t>(5000, int64_t{200} << std::min(attempt, 5u));
    std::uniform_int_distribution<int64_t> pick{0, limit};
    if (!sleep_unless_stopped(milliseconds{pick(rng)}, stop))
      return r;
  }
}

delivery_attempt smtp_adapter::deliver(const delivery_context& dc) const {
  outbound_send s;
  s.key = {dc.request_id, dc.segment_id, "mail"};
  s.adapter = "smtp";
  s.kind = outbound_kind::mail;
  auto draft = make_draft(dc, cfg_);
  if (auto* fail = std::get_if<delivery_attempt>(&draft)) {
    if (!fail->retryable)
      dc.services.ledger_dead(s, fail->error_class, fail->error);
    return *fail;
  }
  auto& d = std::get<mail_draft>(draft);
  // One key, one Message-ID: a redelivery is recognisably the same mail.
  d.delivery_key = smtp_delivery_key(dc.request_id, dc.segment_id);
  d.date_us = now_us_();
  std::string error;
  auto mail = compose_mail(d, &error);
  if (!mail) {
    dc.services.ledger_dead(s, "validation_error", error);
    return failure("smtp: " + error, false, "validation_error");
  }
  auto claim = dc.services.ledger_begin(s);
  if (!claim.ok)
    return failure("smtp: outbound ledger: " + claim.error, true,
                   "target_unavailable");
  if (claim.decision == send_decision::skip
      || claim.decision == send_decision::supersede)
    return {}; // sent by an earlier run
  smtp_message m{mail->envelope_from,
                 {parse_mail_address(d.to)->address},
                 std::move(mail->rfc822)};
  auto r = send_with_retries(m, dc.stop);
  if (r.sent) {
    auto mark = dc.services.ledger_end(s, ledger_state::sent, mail->message_id);
    if (!mark.ok) // sent all the same; a re-run would send it again
      spdlog::warn("smtp: mail for request {} sent, not recorded: {}",
                   dc.request_id, mark.error);
    return {};
  }
  auto message = "smtp " + cfg_.url + ": " + r.error;
  if (r.retryable)
    return failure(std::move(message), true, "target_unavailable");
  dc.services.ledger_dead(s, "target_unavailable", message);
  return failure(std::move(message), false, "target_unavailable");
}

} // namespace butlers
