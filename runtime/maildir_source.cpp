#include "runtime/maildir_source.hpp"

#include <chrono>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "runtime/dedupe.hpp"
#include "runtime/threads.hpp"

namespace butlers {

mail_submit_result mail_verdict(const submit_outcome& out) {
  switch (out.status) {
    case submit_status::accepted:
    case submit_status::deduped: return {mail_submit::stored, out.request_id};
    case submit_status::invalid:
    // Kept in quarantine/ with the reason; the sender was told once.
    case submit_status::rate_limited:
      return {mail_submit::invalid, out.message};
    default: return {mail_submit::later, out.message};
  }
}

std::optional<approval_mail> approval_mail_of(const mail_message& m,
                                              const std::string& mailbox) {
  if (m.in_reply_to.empty() && m.references.empty())
    return std::nullopt;
  auto decision = mail_approval_decision(m.text);
  if (!decision)
    return std::nullopt;
  approval_mail out;
  out.from = m.from.address;
  out.approve = *decision;
  if (!m.in_reply_to.empty())
    out.notices.push_back(approval_mail_notice(m.in_reply_to));
  // The question is the mail answered, so the newest reference.
  for (auto i = m.references.rbegin();
       i != m.references.rend() && out.notices.size() < approval_mail_max_refs;
       ++i)
    if (*i != m.in_reply_to)
      out.notices.push_back(approval_mail_notice(*i));
  auto event_id = mail_event_id(m);
  dedupe_input key;
  key.channel = "email";
  key.endpoint_identity = mailbox;
  key.external_event_id = event_id;
  key.sender_identity = m.from.address;
  out.key = dedupe_key(key, 300);
  return out;
}

std::optional<mail_submit_result> approval_verdict(approval_reply r) {
  switch (r) {
    case approval_reply::settled:
      return mail_submit_result{mail_submit::stored, "an approval answer"};
    case approval_reply::later:
      return mail_submit_result{mail_submit::later,
                                "the approvals did not answer"};
    default: return std::nullopt;
  }
}

maildir_source::maildir_source(connector_config cfg, maildir_metrics metrics,
                               std::shared_ptr<attachment_store> store)
  : cfg_(std::move(cfg)), metrics_(metrics), store_(std::move(store)) {
  // nop
}

void maildir_source::run(connector_sink& sink) {
  maildir dir{cfg_.path};
  if (auto err = dir.prepare(); !err.empty())
    throw std::runtime_error("maildir " + cfg_.path + ": " + err);
  auto submit = [&sink](const std::vector<std::string>& envelopes) {
    std::vector<submission> batch;
    batch.reserve(envelopes.size());
    for (auto& e : envelopes)
      batch.push_back(submission{e, {}});
    auto outcomes = sink.submit_all(std::move(batch));
    std::vector<mail_submit_result> out;
    out.reserve(outcomes.size());
    for (auto& o : outcomes)
      out.push_back(mail_verdict(o));
    return out;
  };
  maildir_poller poller{dir,
                        cfg_.endpoint_identity,
                        cfg_.max_in_flight,
                        submit,
                        metrics_,
                        [] {
                          return unix_now_us();
                        }};
  poller.on_answer(
    [&sink, mailbox = cfg_.endpoint_identity](
      const mail_message& m) -> std::optional<mail_submit_result> {
      auto answer = approval_mail_of(m, mailbox);
      if (!answer)
        return std::nullopt;
      return approval_verdict(sink.answer_approval(*answer));
    });
  if (store_)
    poller.on_files(
      [store = store_](const mail_attachment& file, std::string* error) {
        return store->put(file.bytes, file.media_type, file.name, error);
      },
      store_->limits());
  auto& stop = sink.stop();
  std::string last_error;
  while (!stop.raised()) {
    auto r = poller.poll_once(batch, stop.flag());
    // Files quarantined before their submission were never counted by the
    // sink: count them as input it could not read.
    if (r.unreadable > 0)
      sink.count(source_event::invalid, r.unreadable);
    if (!r.error.empty())
      sink.count(source_event::failed);
    if (r.error != last_error) {
      if (!r.error.empty())
        spdlog::error("connector {}: {}", cfg_.name, r.error);
      last_error = r.error;
    }
    bool more = r.listed == batch && r.deferred == 0 && r.stuck < r.listed;
    if (!more && !stop.sleep_for(std::chrono::milliseconds{cfg_.poll_ms}))
      break;
  }
}

} // namespace butlers
