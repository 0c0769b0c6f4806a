#include "test/support/fake_slack.hpp"

#include <algorithm>
#include <ctime>

#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "runtime/slack_event.hpp"

namespace butlers::test {

namespace {

std::string ok_body(const std::string& rest = {}) {
  return R"({"ok":true)" + rest + "}";
}

std::string error_body(const std::string& error) {
  return R"({"ok":false,"error":)" + json::quote(error) + "}";
}

http_reply_out answer(int status, std::string body) {
  return http_reply_out{status,
                        "application/json; charset=utf-8",
                        std::move(body),
                        {}};
}

/// The arguments of a JSON or form body as strings; nullopt when the JSON
/// body is not an object.
std::optional<std::map<std::string, std::string>> parse_args(
  const http_request_in& req) {
  std::map<std::string, std::string> out;
  auto type = req.header("content-type");
  if (type.rfind("application/json", 0) == 0) {
    rapidjson::Document doc;
    if (json::parse(req.body, doc) || !doc.IsObject())
      return std::nullopt;
    for (auto& m : doc.GetObject()) {
      std::string name{m.name.GetString(), m.name.GetStringLength()};
      out[name] = m.value.IsString() ? std::string{m.value.GetString(),
                                                   m.value.GetStringLength()}
                                     : json::to_string(m.value);
    }
    return out;
  }
  for (auto& [k, v] : parse_form(req.body))
    out[k] = v;
  return out;
}

} // namespace

std::string slack_call::arg(const std::string& name) const {
  auto i = args.find(name);
  return i == args.end() ? std::string{} : i->second;
}

slack_fault slack_fault::rate_limited(int seconds) {
  return slack_fault{429, "ratelimited", seconds};
}

slack_fault slack_fault::error_of(std::string error) {
  return slack_fault{200, std::move(error), std::nullopt};
}

slack_fault slack_fault::server_error(int status) {
  return slack_fault{status, "internal_error", std::nullopt};
}

fake_slack::fake_slack(fake_slack_options options)
  : options_(std::move(options)), server_([this](loopback_connection& conn) {
      serve_http(conn, [this](const http_request_in& req) {
        return handle(req);
      });
    }) {
  // nop
}

fake_slack::~fake_slack() {
  server_.stop();
}

std::string fake_slack::base_url() const {
  return "http://127.0.0.1:" + std::to_string(server_.port()) + "/api";
}

void fake_slack::remember_message(const std::string& channel,
                                  const std::string& ts) {
  std::lock_guard<std::mutex> guard{mtx_};
  known_.emplace(channel, ts);
}

void fake_slack::inject(std::string method, slack_fault fault, int times) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (int i = 0; i < times; ++i)
    faults_[method].push_back(fault);
}

std::vector<slack_call> fake_slack::calls() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return calls_;
}

size_t fake_slack::count(std::string_view method) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return static_cast<size_t>(
    std::count_if(calls_.begin(), calls_.end(), [&](const slack_call& c) {
      return c.method == method;
    }));
}

std::vector<slack_posted> fake_slack::posted_to(
  const std::string& channel) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = posted_.find(channel);
  return i == posted_.end() ? std::vector<slack_posted>{} : i->second;
}

std::vector<std::string> fake_slack::added_reactions(
  const std::string& channel, const std::string& ts) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = added_.find({channel, ts});
  return i == added_.end() ? std::vector<std::string>{} : i->second;
}

std::vector<std::string> fake_slack::reactions_now(
  const std::string& channel, const std::string& ts) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = now_.find({channel, ts});
  if (i == now_.end())
    return {};
  return {i->second.begin(), i->second.end()};
}

bool fake_slack::wait_for(const std::function<bool()>& pred,
                          std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> guard{mtx_};
  for (;;) {
    guard.unlock();
    if (pred())
      return true;
    guard.lock();
    if (changed_.wait_until(guard, deadline) == std::cv_status::timeout) {
      guard.unlock();
      return pred();
    }
  }
}

std::optional<http_reply_out> fake_slack::handle(const http_request_in& req) {
  slack_call call;
  if (req.path.rfind("/api/", 0) == 0)
    call.method = req.path.substr(5);
  auto auth = req.header("authorization");
  call.token_ok = auth == "Bearer " + options_.token;
  auto args = parse_args(req);
  if (args)
    call.args = std::move(*args);
  http_reply_out out;
  if (call.method.empty())
    out = answer(404, error_body("unknown_method"));
  else if (auth.empty())
    out = answer(200, error_body("not_authed"));
  else if (!call.token_ok)
    out = answer(200, error_body("invalid_auth"));
  else if (!args)
    out = answer(200, error_body("invalid_json"));
  else
    out = dispatch(call.method, call);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    call.status = out.status;
    call.response = out.body;
    calls_.push_back(std::move(call));
  }
  changed_.notify_all();
  return out;
}

http_reply_out fake_slack::dispatch(const std::string& method,
                                    const slack_call& c) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto key : {method, std::string{"*"}}) {
      auto i = faults_.find(key);
      if (i == faults_.end() || i->second.empty())
        continue;
      auto f = i->second.front();
      i->second.pop_front();
      auto r = answer(f.status, error_body(f.error));
      if (f.retry_after)
        r.headers.emplace_back("Retry-After", std::to_string(*f.retry_after));
      return r;
    }
  }
  if (method == "chat.postMessage")
    return post_message(c);
  if (method == "reactions.add")
    return reaction(c, true);
  if (method == "reactions.remove")
    return reaction(c, false);
  return answer(200, error_body("unknown_method"));
}

http_reply_out fake_slack::post_message(const slack_call& c) {
  auto channel = c.arg("channel");
  auto text = c.arg("text");
  if (channel.empty())
    return answer(200, error_body("channel_not_found"));
  if (text.empty())
    return answer(200, error_body("no_text"));
  if (json::code_points(text) > 40000)
    return answer(200, error_body("msg_too_long"));
  std::lock_guard<std::mutex> guard{mtx_};
  slack_posted p{channel, std::to_string(++next_ts_) + ".000100",
                 c.arg("thread_ts"), text};
  known_.emplace(channel, p.ts);
  posted_[channel].push_back(p);
  return answer(200, ok_body(R"(,"channel":)" + json::quote(channel)
                             + R"(,"ts":)" + json::quote(p.ts)
                             + R"(,"message":{"type":"message","text":)"
                             + json::quote(text) + R"(,"ts":)"
                             + json::quote(p.ts) + "}"));
}

http_reply_out fake_slack::reaction(const slack_call& c, bool add) {
  auto channel = c.arg("channel");
  auto ts = c.arg("timestamp");
  auto name = c.arg("name");
  if (channel.empty() || ts.empty())
    return answer(200, error_body("no_item_specified"));
  if (name.empty())
    return answer(200, error_body("invalid_name"));
  std::lock_guard<std::mutex> guard{mtx_};
  message_key key{channel, ts};
  if (options_.strict && known_.count(key) == 0)
    return answer(200, error_body("message_not_found"));
  auto& now = now_[key];
  if (add) {
    if (!now.insert(name).second)
      return answer(200, error_body("already_reacted"));
    added_[key].push_back(name);
    return answer(200, ok_body());
  }
  if (now.erase(name) == 0)
    return answer(200, error_body("no_reaction"));
  return answer(200, ok_body());
}

// -- the Events API side ------------------------------------------------------

std::string signed_slack_request(const std::string& path,
                                 const std::string& body,
                                 const std::string& secret, int64_t timestamp,
                                 int retry_num) {
  auto ts = std::to_string(timestamp);
  std::string out = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Connection: close\r\n"
                    + "Content-Type: application/json\r\n"
                    + "User-Agent: Slackbot 1.0 (+https://api.slack.com/robots)"
                    + "\r\nX-Slack-Request-Timestamp: " + ts
                    + "\r\nX-Slack-Signature: "
                    + slack_signature(secret, ts, body) + "\r\n";
  if (retry_num > 0)
    out += "X-Slack-Retry-Num: " + std::to_string(retry_num)
           + "\r\nX-Slack-Retry-Reason: http_timeout\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return out;
}

int64_t slack_now_s() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::string slack_event_callback(const std::string& type,
                                 const std::string& event_id,
                                 const std::string& channel,
                                 const std::string& ts, const std::string& user,
                                 const std::string& text,
                                 const std::string& thread_ts,
                                 const std::string& extra) {
  std::string ev = R"({"type":)" + json::quote(type) + R"(,"user":)"
                   + json::quote(user) + R"(,"text":)" + json::quote(text)
                   + R"(,"ts":)" + json::quote(ts) + R"(,"channel":)"
                   + json::quote(channel) + R"(,"event_ts":)" + json::quote(ts);
  if (!thread_ts.empty())
    ev += R"(,"thread_ts":)" + json::quote(thread_ts);
  ev += extra + "}";
  return R"({"token":"XXYYZZ","team_id":"T123ABC456",)"
         R"("api_app_id":"A123ABC456","event":)"
         + ev
         + R"(,"type":"event_callback","authorizations":[{"team_id":)"
           R"("T123ABC456","user_id":"U0LAN0Z89","is_bot":true,)"
           R"("is_enterprise_install":false}],"event_id":)"
         + json::quote(event_id) + R"(,"event_time":)"
         + ts.substr(0, ts.find('.')) + "}";
}

} // namespace butlers::test
