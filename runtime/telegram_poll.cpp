#include "runtime/telegram_poll.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "runtime/config.hpp"
#include "runtime/json.hpp"
#include "runtime/resilience.hpp"
#include "runtime/telegram_files.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {

namespace {

/// Telegram's `description`, when the body has one.
std::string description_of(const rapidjson::Document& doc) {
  if (!doc.IsObject())
    return {};
  auto d = doc.FindMember("description");
  if (d == doc.MemberEnd() || !d->value.IsString())
    return {};
  return {d->value.GetString(), d->value.GetStringLength()};
}

/// `parameters.retry_after`, when the body has it.
std::optional<std::chrono::seconds> retry_after_of(
  const rapidjson::Document& doc) {
  if (!doc.IsObject())
    return std::nullopt;
  auto p = doc.FindMember("parameters");
  if (p == doc.MemberEnd() || !p->value.IsObject())
    return std::nullopt;
  auto r = p->value.FindMember("retry_after");
  if (r == p->value.MemberEnd() || !r->value.IsInt64()
      || r->value.GetInt64() < 0)
    return std::nullopt;
  return std::chrono::seconds{std::min<int64_t>(r->value.GetInt64(), 3600)};
}

get_updates_answer retry(std::string reason) {
  get_updates_answer out;
  out.what = get_updates_answer::kind::retry;
  out.reason = std::move(reason);
  return out;
}

} // namespace

get_updates_answer read_get_updates(const http_response& r) {
  if (r.failure != http_failure::none)
    return retry(std::string{"transport: "} + to_string(r.failure) + " ("
                 + r.error + ")");
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = r.body.size();
  bool is_json = !json::parse(r.body, doc, limits) && doc.IsObject();
  auto status = "HTTP " + std::to_string(r.status);
  if (is_json && !description_of(doc).empty())
    status += " " + description_of(doc);
  if (r.status == 401 || r.status == 404) {
    get_updates_answer out;
    out.what = get_updates_answer::kind::fatal;
    out.reason = status;
    return out;
  }
  if (r.status == 429) {
    auto out = retry(status);
    out.retry_after = is_json ? retry_after_of(doc) : std::nullopt;
    if (!out.retry_after)
      out.retry_after = r.retry_after();
    return out;
  }
  if (r.status != 200 || !is_json)
    return retry(is_json ? status : status + ", not Telegram's JSON");
  auto ok = doc.FindMember("ok");
  auto result = doc.FindMember("result");
  if (ok == doc.MemberEnd() || !ok->value.IsBool() || !ok->value.GetBool()
      || result == doc.MemberEnd() || !result->value.IsArray())
    return retry(status + ", no result array");
  get_updates_answer out;
  out.what = get_updates_answer::kind::updates;
  for (auto& u : result->value.GetArray())
    out.updates.push_back(json::to_string(u));
  return out;
}

http_request get_updates_request(const std::string& api_base,
                                 const std::string& token, int64_t offset,
                                 uint32_t timeout_s, uint32_t limit) {
  http_request req;
  req.method = "POST";
  req.url = api_base + "/bot" + token + "/getUpdates";
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = "{";
  if (offset > 0)
    req.body += R"("offset":)" + std::to_string(offset) + ",";
  req.body += R"("timeout":)" + std::to_string(timeout_s) + R"(,"limit":)"
              + std::to_string(limit)
              + R"(,"allowed_updates":["message","edited_message",)"
                R"("channel_post","callback_query"]})";
  // The long poll plus time for the answer to come.
  req.timeout = std::chrono::seconds{timeout_s + 15};
  req.connect_timeout = std::chrono::seconds{10};
  // 100 Updates of up to 4096 characters each, with their entities.
  req.max_response_bytes = size_t{16} << 20;
  return req;
}

telegram_poll_source::telegram_poll_source(options opts)
  : opts_(std::move(opts)), rng_(std::random_device{}()) {
  if (!opts_.fetch)
    opts_.fetch = [](const http_request& req, const std::atomic<bool>* cancel) {
      return shared_http_client().perform(req, cancel);
    };
}

bool telegram_poll_source::back_off(connector_sink& sink, uint32_t& attempt) {
  ++attempt;
  auto d = std::max(opts_.backoff, backoff_delay(attempt, opts_.backoff,
                                                 opts_.max_backoff, rng_));
  return sink.stop().sleep_for(d);
}

bool telegram_poll_source::submit(connector_sink& sink,
                                  std::vector<submission> subs) {
  uint32_t attempt = 0;
  size_t done = 0;
  while (done < subs.size()) {
    auto n = std::min(std::max<size_t>(1, opts_.batch), subs.size() - done);
    std::vector<submission> chunk(subs.begin() + static_cast<long>(done),
                                  subs.begin() + static_cast<long>(done + n));
    auto outcomes = sink.submit_all(std::move(chunk));
    size_t settled = 0;
    while (settled < outcomes.size() && outcomes[settled].settled())
      ++settled;
    done += settled;
    if (settled == outcomes.size()) {
      attempt = 0;
      continue;
    }
    auto& o = outcomes[settled];
    spdlog::info("connector {}: an update was not stored ({}: {}); "
                 "submitting it again",
                 opts_.name, to_string(o.status), o.message);
    if (!back_off(sink, attempt))
      return false;
  }
  return true;
}

bool telegram_poll_source::attach(connector_sink& sink,
                                  telegram_update_mapping& m, bool& stopped) {
  uint32_t attempt = 0;
  for (;;) {
    auto got = fetch_telegram_media(m.media, opts_.attachment_caps,
                                    opts_.api_base, opts_.token, opts_.fetch,
                                    opts_.attachments.get(),
                                    sink.stop().flag());
    if (sink.stop().raised()) {
      stopped = true;
      return false;
    }
    if (got.what == media_fetch::kind::stored) {
      m.envelope = with_attachments(std::move(m.envelope), got.refs);
      return true;
    }
    if (got.what == media_fetch::kind::refused) {
      spdlog::info("connector {}: update {} refused: {}", opts_.name,
                   m.update_id ? std::to_string(*m.update_id) : "?",
                   got.reason);
      // The person is told, through the messenger, before the update is
      // confirmed to Telegram: a crash before this sends it again.
      auto notify = attachment_refusal_notify("telegram",
                                              std::to_string(m.chat_id),
                                              got.reason,
                                              "attachment-refused:"
                                                + opts_.endpoint_identity + ":"
                                                + std::to_string(
                                                  m.update_id.value_or(0)));
      while (!sink.deliver(notify)) {
        spdlog::warn("connector {}: the refusal of update {} was not handed "
                     "to the messenger; trying again",
                     opts_.name, m.update_id.value_or(0));
        if (!back_off(sink, attempt)) {
          stopped = true;
          return false;
        }
      }
      sink.count(source_event::attachment_refused);
      return false;
    }
    sink.count(source_event::failed);
    spdlog::warn("connector {}: the files of update {} were not fetched ({}); "
                 "trying again",
                 opts_.name, m.update_id.value_or(0), got.reason);
    if (!back_off(sink, attempt)) {
      stopped = true;
      return false;
    }
  }
}

std::optional<int64_t> telegram_poll_source::take(
  connector_sink& sink, const std::vector<std::string>& updates) {
  int64_t next = 0;
  std::vector<submission> subs;
  for (auto& text : updates) {
    auto m = map_telegram_update(text, opts_.endpoint_identity,
                                 opts_.attachment_caps.max_bytes);
    if (m.update_id)
      next = std::max(next, *m.update_id + 1);
    switch (m.verdict) {
      case update_verdict::envelope: {
        bool stopped = false;
        // Without a store (no database) files are not fetched: the text
        // or caption goes alone, and a message of media only is ignored.
        if (!m.media.empty() && !opts_.attachments && !m.has_text) {
          sink.count(source_event::ignored);
          break;
        }
        if (!m.media.empty() && opts_.attachments
            && !attach(sink, m, stopped)) {
          if (stopped)
            return std::nullopt;
          break;
        }
        subs.push_back(submission{std::move(m.envelope), {}});
        break;
      }
      case update_verdict::ignored:
        if (m.kind == "callback_query" && opts_.on_callback)
          opts_.on_callback(opts_.endpoint_identity, text);
        else
          sink.count(source_event::ignored);
        break;
      case update_verdict::invalid:
        sink.count(source_event::invalid);
        spdlog::warn("connector {}: update {} is invalid and was dropped: {}",
                     opts_.name,
                     m.update_id ? std::to_string(*m.update_id) : "?",
                     m.reason);
        break;
    }
  }
  if (!submit(sink, std::move(subs)))
    return std::nullopt;
  return next;
}

void telegram_poll_source::run(connector_sink& sink) {
  int64_t offset = 0;
  uint32_t attempt = 0;
  spdlog::info("connector {}: polling getUpdates (timeout {} s)", opts_.name,
               opts_.poll_timeout_s);
  while (!sink.stop().raised()) {
    auto req = get_updates_request(opts_.api_base, opts_.token, offset,
                                   opts_.poll_timeout_s, opts_.limit);
    auto resp = opts_.fetch(req, sink.stop().flag());
    if (sink.stop().raised())
      return;
    auto answer = read_get_updates(resp);
    if (answer.what == get_updates_answer::kind::fatal) {
      spdlog::error("connector {}: Telegram refused the bot token ({}); the "
                    "connector stops. Fix token (or {}) and restart the node",
                    opts_.name, answer.reason,
                    connector_env_name(opts_.name, "TOKEN"));
      return;
    }
    if (answer.what == get_updates_answer::kind::retry) {
      sink.count(source_event::failed);
      if (answer.retry_after) {
        spdlog::warn("connector {}: getUpdates: {}; waiting {} s as asked",
                     opts_.name, answer.reason, answer.retry_after->count());
        if (!sink.stop().sleep_for(
              std::max<std::chrono::milliseconds>(*answer.retry_after,
                                                  std::chrono::seconds{1})))
          return;
        continue;
      }
      spdlog::warn("connector {}: getUpdates: {}; backing off", opts_.name,
                   answer.reason);
      if (!back_off(sink, attempt))
        return;
      continue;
    }
    attempt = 0;
    auto next = take(sink, answer.updates);
    if (!next)
      return;
    // Confirmed by the next getUpdates: every Update below it is settled.
    offset = std::max(offset, *next);
  }
}

} // namespace butlers
