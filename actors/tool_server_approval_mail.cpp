// Approvals by mail (runtime/approvals.md): a question whose run came by
// mail goes out as a reply to that mail through the messenger, with a
// Message-ID known before it is sent (the smtp adapter derives it from the
// delivery's request and segment) and recorded as the question's
// notice_ref. A mail that names it in In-Reply-To or References and whose
// first line is `approve` or `deny` answers the question through
// `approval_answer`, as a button press does.

#include <spdlog/spdlog.h>

#include "actors/tool_server.hpp"
#include "runtime/approvals.hpp"
#include "runtime/dedupe.hpp"
#include "runtime/delivery.hpp"
#include "runtime/json.hpp"
#include "runtime/mail.hpp"
#include "runtime/route.hpp"
#include "runtime/threads.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

/// The notify.v1 that replies to the run's request with `text` (the mail
/// the run came from is answered, so the reply threads under it).
std::string reply_notify(const approval_wait& w, const std::string& text,
                         const std::string& key) {
  using json::quote;
  return R"({"schema_version":"notify.v1","origin_butler":)" + quote(w.butler)
         + R"(,"request_context":{"request_id":)" + quote(w.run_id)
         + R"(,"source_channel":"email","source_endpoint_identity":)"
         + quote(w.endpoint.empty() ? std::string{"mail"} : w.endpoint)
         + R"(,"source_sender_identity":)" + quote(w.sender)
         + (w.thread.empty()
              ? std::string{}
              : R"(,"source_thread_identity":)" + quote(w.thread))
         + R"(},"delivery":{"intent":"reply","channel":"email","message":)"
         + quote(text) + R"(},"idempotency_key":)" + quote(key) + "}";
}

/// Hands the reply to the messenger; `then(true)` once it has it.
void send_reply(tool_server_ptr self, const approval_wait& w,
                const std::string& text, const std::string& key,
                std::function<void(bool)> then) {
  auto messenger = self->state.ctx->messenger();
  std::string envelope;
  auto parsed = std::make_shared<route_envelope>();
  auto fresh = make_uuid_v7().to_string();
  auto bad = make_delivery_route(reply_notify(w, text, key), fresh,
                                 unix_now_us(), envelope, parsed.get());
  if (bad || !messenger) {
    spdlog::warn("approval {}: no mail to {}: {}", w.approval_id, w.sender,
                 bad ? bad->message : "no messenger on this node");
    then(false);
    return;
  }
  route_request req{std::move(envelope), "tool", w.butler, caf::actor{},
                    std::move(parsed)};
  auto id = w.approval_id;
  self->request(messenger, local_call, route_atom_v, std::move(req))
    .then(
      [then, id](route_response& r) {
        if (r.status == "error")
          spdlog::warn("approval {}: the messenger refused the mail: {}: {}",
                       id, r.error_class, r.error_message);
        then(r.status != "error");
      },
      [then, id](const caf::error& err) {
        spdlog::warn("approval {}: the messenger did not take the mail: {}", id,
                     to_string(err));
        then(false);
      });
}

/// Tells the starter that their answer came after the question was
/// decided (`status`); once per answering mail. `then(true)` once the
/// messenger has the mail.
void tell_decided(tool_server_ptr self, const approval_wait& w,
                  const std::string& status, const std::string& key,
                  std::function<void(bool)> then) {
  auto text = "You asked " + w.butler + " about using " + w.tool + ": "
              + w.summary + "\nThis was decided already ("
              + (status == "expired" ? "expired without an answer: denied"
                 : status.empty()    ? "answered"
                                     : status)
              + "); your answer changes nothing.";
  // "apn:" + id + ":" + 12 hex of the answer's key: within the 64
  // characters of a segment.
  auto note = "apn:" + w.approval_id + ":" + sha256_hex(key).substr(0, 12);
  send_reply(self, w, text, note, std::move(then));
}

} // namespace

std::string approval_mail_message_id(const std::string& mail_from,
                                     const std::string& run_id,
                                     const std::string& approval_id) {
  auto from = parse_mail_address(mail_from);
  if (!from)
    return {};
  auto domain = from->address.substr(from->address.rfind('@') + 1);
  return reply_message_id(smtp_delivery_key(run_id,
                                            "notify:approval:" + approval_id),
                          domain);
}

void approval_mail_question(tool_server_ptr self, const approval_wait& w) {
  auto& st = self->state;
  auto message_id = approval_mail_message_id(st.params.mail_from, w.run_id,
                                             w.approval_id);
  if (message_id.empty()) {
    spdlog::warn("approval {}: no smtp adapter for email on this node; it "
                 "can be answered through the API until it expires",
                 w.approval_id);
    return;
  }
  // Recorded before the mail goes out, so that no answer can come before
  // the question is found by it.
  auto ref = approval_mail_notice(message_id);
  if (auto i = st.approvals.find(w.approval_id); i != st.approvals.end())
    i->second.notice_ref = ref;
  auto secs = std::max<int64_t>(0, (w.expires_ms - unix_now_ms()) / 1000);
  auto text = approval_mail_text(w.butler, w.tool, w.summary,
                                 static_cast<uint32_t>(secs));
  st.writes.exec(
    self, named_statement{"approval_notice", {w.approval_id, ref}},
    [self, w, text](named_result& r) {
      if (!r.ok)
        spdlog::warn("approval {}: its mail's Message-ID was not stored; a "
                     "reply to it will not be recognised",
                     w.approval_id);
      send_reply(self, w, text, "approval:" + w.approval_id, [](bool) {});
    },
    [self, w, text](const caf::error& err) {
      spdlog::warn("approval {}: its mail's Message-ID was not stored ({}); "
                   "a reply to it will not be recognised",
                   w.approval_id, to_string(err));
      send_reply(self, w, text, "approval:" + w.approval_id, [](bool) {});
    });
}

void approval_mail_answer(tool_server_ptr self, approval_mail m,
                          std::function<void(tool_result)> done) {
  auto& st = self->state;
  if (!st.params.reader || m.notices.empty()) {
    done(tool_failed(m.notices.empty() ? "not_found" : "unavailable",
                     "no question to look up"));
    return;
  }
  std::string notices;
  for (auto& n : m.notices)
    notices += (notices.empty() ? "" : "\n") + n;
  self
    ->request(st.params.reader, local_call, read_atom_v,
              named_statement{"approval_by_notice", {notices}})
    .then(
      [self, m, done](named_result& r) {
        if (!r.ok) {
          done(tool_failed("unavailable", "approval_by_notice failed"));
          return;
        }
        if (r.rows.empty() || r.rows[0].size() < 14) {
          done(tool_failed("not_found", "the mail answers no question"));
          return;
        }
        // approval_by_notice: approval_id, then approval_get's columns.
        auto w = approval_wait_of(r.rows[0][0], r.rows[0], 1);
        auto caller = "email:" + m.from;
        auto key = m.key;
        approval_answer(
          self, w.approval_id, "", m.approve, caller,
          [self, w, key, done](tool_result res) {
            if (res.reason == "conflict") {
              rapidjson::Document doc;
              auto status = !json::parse(res.structured, doc) && doc.IsObject()
                              ? string_arg(doc, "status")
                              : std::string{};
              spdlog::info("approval {}: a mail answer from {} came after it "
                           "was decided ({})",
                           w.approval_id, w.sender, status);
              // The mail is settled once the note is owed durably.
              tell_decided(self, w, status, key,
                           [done, res](bool taken) mutable {
                             done(taken ? std::move(res)
                                        : tool_failed("unavailable",
                                                      "the note was not "
                                                      "taken"));
                           });
              return;
            }
            done(std::move(res));
          },
          key);
      },
      [done](const caf::error& err) {
        done(tool_failed("unavailable", to_string(err)));
      });
}

} // namespace butlers
