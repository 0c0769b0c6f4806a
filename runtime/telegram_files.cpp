#include "runtime/telegram_files.hpp"

#include <algorithm>

#include "runtime/json.hpp"

namespace butlers {

namespace {

using fetch_fn = std::function<http_response(const http_request&,
                                             const std::atomic<bool>*)>;

media_fetch refused(std::string why) {
  media_fetch out;
  out.what = media_fetch::kind::refused;
  out.reason = std::move(why);
  return out;
}

media_fetch retry(std::string why) {
  media_fetch out;
  out.what = media_fetch::kind::retry;
  out.reason = std::move(why);
  return out;
}

std::string label(const telegram_media& m) {
  return m.kind == "photo" || m.name.empty() ? "the " + m.kind
                                             : "'" + m.name + "'";
}

std::string mb(uint64_t n) {
  if (n >= 1024 * 1024)
    return std::to_string(n / (1024 * 1024)) + " MB";
  return std::to_string(n / 1024) + " KB";
}

/// Telegram's `description`, "" when none.
std::string description_of(const rapidjson::Document& doc) {
  if (!doc.IsObject())
    return {};
  auto d = doc.FindMember("description");
  if (d == doc.MemberEnd() || !d->value.IsString())
    return {};
  return d->value.GetString();
}

/// The file's path (and size, when given) from a getFile answer; a
/// refusal for a 4xx, a retry for anything else that is not 200.
media_fetch read_get_file(const http_response& r, const telegram_media& m,
                          std::string& path, uint64_t& size) {
  if (r.failure != http_failure::none)
    return retry(std::string{"getFile: "} + to_string(r.failure));
  rapidjson::Document doc;
  json::parse_limits limits;
  limits.max_bytes = r.body.size();
  bool is_json = !json::parse(r.body, doc, limits) && doc.IsObject();
  if (r.status >= 400 && r.status < 500 && r.status != 429)
    return refused(
      "Telegram would not hand over " + label(m) + " ("
      + (is_json ? description_of(doc) : "HTTP " + std::to_string(r.status))
      + ")");
  if (r.status != 200 || !is_json)
    return retry("getFile: HTTP " + std::to_string(r.status));
  auto res = doc.FindMember("result");
  if (res == doc.MemberEnd() || !res->value.IsObject())
    return retry("getFile: no result");
  auto p = res->value.FindMember("file_path");
  if (p == res->value.MemberEnd() || !p->value.IsString()
      || p->value.GetStringLength() == 0)
    return refused("Telegram has no file for " + label(m));
  path = p->value.GetString();
  auto s = res->value.FindMember("file_size");
  if (s != res->value.MemberEnd() && s->value.IsUint64())
    size = s->value.GetUint64();
  media_fetch ok;
  ok.what = media_fetch::kind::stored;
  return ok;
}

/// Refusal text for `m` of `n` bytes over `cap`.
std::string too_big(const telegram_media& m, uint64_t n, uint64_t cap) {
  return label(m) + " is " + mb(n) + "; the limit is " + mb(cap);
}

} // namespace

http_request get_file_request(const std::string& api_base,
                              const std::string& token,
                              const std::string& file_id) {
  http_request req;
  req.method = "POST";
  req.url = api_base + "/bot" + token + "/getFile";
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = R"({"file_id":)" + json::quote(file_id) + "}";
  req.timeout = std::chrono::seconds{30};
  req.connect_timeout = std::chrono::seconds{10};
  req.max_response_bytes = 64 * 1024;
  return req;
}

http_request file_download_request(const std::string& api_base,
                                   const std::string& token,
                                   const std::string& file_path,
                                   uint64_t max_bytes) {
  http_request req;
  req.method = "GET";
  req.url = api_base + "/file/bot" + token + "/" + file_path;
  // 20 MB at a slow 200 KB/s.
  req.timeout = std::chrono::seconds{120};
  req.connect_timeout = std::chrono::seconds{10};
  req.max_response_bytes = static_cast<size_t>(max_bytes);
  return req;
}

media_fetch fetch_telegram_media(const std::vector<telegram_media>& media,
                                 const attachment_limits& caps,
                                 const std::string& api_base,
                                 const std::string& token,
                                 const fetch_fn& fetch, attachment_store* store,
                                 const std::atomic<bool>* cancel) {
  if (media.size() > caps.max_count)
    return refused(std::to_string(media.size()) + " files; at most "
                   + std::to_string(caps.max_count) + " are taken");
  // Before any download: the sizes Telegram announced.
  uint64_t announced = 0;
  for (auto& m : media) {
    auto n = m.file_size.value_or(0);
    if (n > caps.max_bytes)
      return refused(too_big(m, n, caps.max_bytes));
    announced += n;
  }
  if (announced > caps.max_message_bytes)
    return refused("the files add up to " + mb(announced) + "; the limit is "
                   + mb(caps.max_message_bytes) + " per message");
  if (store == nullptr)
    return retry("no database to store attachments in");
  std::vector<std::string> bodies;
  uint64_t sum = 0;
  for (auto& m : media) {
    std::string path;
    uint64_t size = m.file_size.value_or(0);
    auto got = read_get_file(fetch(get_file_request(api_base, token, m.file_id),
                                   cancel),
                             m, path, size);
    if (got.what != media_fetch::kind::stored)
      return got;
    auto room = std::min(caps.max_bytes, caps.max_message_bytes - sum);
    if (size > room)
      return refused(too_big(m, size, room));
    auto r = fetch(file_download_request(api_base, token, path, room), cancel);
    if (r.failure == http_failure::too_large)
      return refused(label(m) + " is over the limit of " + mb(room));
    if (r.failure != http_failure::none)
      return retry(std::string{"file download: "} + to_string(r.failure));
    if (r.status >= 400 && r.status < 500 && r.status != 429)
      return refused("Telegram would not hand over " + label(m) + " (HTTP "
                     + std::to_string(r.status) + ")");
    if (r.status != 200)
      return retry("file download: HTTP " + std::to_string(r.status));
    sum += r.body.size();
    bodies.push_back(std::move(r.body));
  }
  // Everything fits: only now is anything stored.
  media_fetch out;
  out.what = media_fetch::kind::stored;
  for (size_t i = 0; i < media.size(); ++i) {
    std::string error;
    auto ref = store->put(bodies[i], media[i].media_type, media[i].name,
                          &error);
    if (!ref)
      return retry(error);
    out.refs.push_back(std::move(*ref));
  }
  return out;
}

std::string attachment_refusal_notify(const std::string& channel,
                                      const std::string& recipient,
                                      const std::string& reason,
                                      const std::string& key) {
  auto message = "Your message was not taken: " + reason
                 + ". Please send a smaller file.";
  return R"({"schema_version":"notify.v1","origin_butler":"switchboard",)"
         R"("delivery":{"intent":"send","channel":)"
         + json::quote(channel) + R"(,"recipient":)" + json::quote(recipient)
         + R"(,"message":)" + json::quote(message) + R"(},"idempotency_key":)"
         + json::quote(key) + "}";
}

} // namespace butlers
