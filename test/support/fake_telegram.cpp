#include "test/support/fake_telegram.hpp"

#include <algorithm>
#include <ctime>
#include <stdexcept>

#include "runtime/json.hpp"
#include "test/support/fake_telegram_detail.hpp"

namespace butlers::test {

namespace {

using rapidjson::Value;
using telegram_detail::as_int;
using telegram_detail::failure;
using telegram_detail::lower;
using telegram_detail::member;

std::string nginx_page(int status) {
  std::string line = std::to_string(status) + " " + reason_phrase(status);
  return "<html>\r\n<head><title>" + line
         + "</title></head>\r\n<body>\r\n<center><h1>" + line
         + "</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n"
           "</body>\r\n</html>\r\n";
}

/// Adds `key` = `raw` to `obj`: a value that looks like JSON (form and query
/// parameters carry objects and arrays JSON-serialized) is parsed, anything
/// else stays a string.
void add_param(rapidjson::Document& doc, const std::string& key,
               const std::string& raw) {
  auto& a = doc.GetAllocator();
  Value v;
  if (!raw.empty() && (raw.front() == '[' || raw.front() == '{')) {
    rapidjson::Document parsed;
    if (!json::parse(raw, parsed))
      v.CopyFrom(parsed, a);
  }
  if (v.IsNull())
    v.SetString(raw.c_str(), static_cast<rapidjson::SizeType>(raw.size()), a);
  doc.RemoveMember(key.c_str());
  doc.AddMember(Value{key.c_str(), a}, v, a);
}

/// Parameters of a request; nullopt when a JSON body is not an object.
std::optional<std::shared_ptr<rapidjson::Document>> parse_params(
  const http_request_in& req) {
  auto doc = std::make_shared<rapidjson::Document>();
  doc->SetObject();
  for (const auto& [k, v] : parse_form(req.query))
    add_param(*doc, k, v);
  auto type = lower(req.header("content-type"));
  if (req.body.empty())
    return doc;
  if (type.rfind("application/json", 0) == 0) {
    rapidjson::Document body;
    if (json::parse(req.body, body) || !body.IsObject())
      return std::nullopt;
    auto& a = doc->GetAllocator();
    for (auto& m : body.GetObject()) {
      doc->RemoveMember(m.name);
      doc->AddMember(Value{m.name, a}, Value{m.value, a}, a);
    }
  } else if (type.rfind("application/x-www-form-urlencoded", 0) == 0) {
    for (const auto& [k, v] : parse_form(req.body))
      add_param(*doc, k, v);
  }
  return doc;
}

size_t count_of(const std::vector<telegram_call>& calls,
                const std::string& lower_method, bool answered_only) {
  return static_cast<size_t>(
    std::count_if(calls.begin(), calls.end(), [&](const telegram_call& c) {
      return (c.answered || !answered_only) && lower(c.method) == lower_method;
    }));
}

/// The kind of an Update: its one field besides update_id.
std::string update_kind(const Value& update) {
  for (const auto& m : update.GetObject())
    if (std::string_view{m.name.GetString()} != "update_id")
      return m.name.GetString();
  return "";
}

} // namespace

// -- telegram_call
// --------------------------------------------------------------

const rapidjson::Value* telegram_call::param(std::string_view name) const {
  return params ? member(*params, name) : nullptr;
}

std::optional<int64_t> telegram_call::int_param(std::string_view name) const {
  return as_int(param(name));
}

std::optional<std::string> telegram_call::string_param(
  std::string_view name) const {
  auto v = param(name);
  if (v == nullptr || !v->IsString())
    return std::nullopt;
  return std::string{v->GetString(), v->GetStringLength()};
}

// -- telegram_fault
// -------------------------------------------------------------

telegram_fault telegram_fault::too_many_requests(int retry_after_seconds) {
  telegram_fault f;
  f.status = 429;
  f.description = "Too Many Requests: retry after "
                  + std::to_string(retry_after_seconds);
  f.retry_after = retry_after_seconds;
  return f;
}

telegram_fault telegram_fault::server_error(int status) {
  telegram_fault f;
  f.status = status;
  if (status == 500)
    f.description = "Internal Server Error";
  else
    f.raw_body = nginx_page(status);
  return f;
}

telegram_fault telegram_fault::bad_request(std::string description) {
  return error(400, std::move(description));
}

telegram_fault telegram_fault::forbidden(std::string description) {
  return error(403, std::move(description));
}

telegram_fault telegram_fault::error(int status, std::string description) {
  telegram_fault f;
  f.status = status;
  f.description = std::move(description);
  return f;
}

telegram_fault telegram_fault::stall(std::chrono::milliseconds hold) {
  telegram_fault f;
  f.what = kind::stall;
  f.status = 0;
  f.hold = hold;
  return f;
}

telegram_fault telegram_fault::lost_reply(std::chrono::milliseconds hold) {
  telegram_fault f;
  f.what = kind::lost_reply;
  f.status = 0;
  f.hold = hold;
  return f;
}

// -- lifetime
// -------------------------------------------------------------------

fake_telegram::fake_telegram(fake_telegram_options options)
  : options_(std::move(options)), next_update_id_(options_.first_update_id),
    server_(
      [this](loopback_connection& conn) {
        serve_http(conn, [this](const http_request_in& req) {
          return handle(req);
        });
      },
      options_.port) {
  // nop
}

fake_telegram::~fake_telegram() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  changed_.notify_all();
  server_.stop();
}

std::string fake_telegram::base_url() const {
  return "http://127.0.0.1:" + std::to_string(port());
}

int64_t fake_telegram::bot_id() const {
  auto colon = options_.token.find(':');
  try {
    return std::stoll(options_.token.substr(0, colon));
  } catch (const std::exception&) {
    return 1;
  }
}

// -- serving
// --------------------------------------------------------------------

std::optional<http_reply_out> fake_telegram::handle(
  const http_request_in& req) {
  telegram_call call;
  call.http_method = req.method;
  call.at = std::chrono::steady_clock::now();
  if (req.path.rfind("/file/bot", 0) == 0)
    return download(req.path.substr(9));
  std::string token;
  if (req.path.rfind("/bot", 0) == 0) {
    auto slash = req.path.find('/', 4);
    if (slash != std::string::npos) {
      token = req.path.substr(4, slash - 4);
      call.method = req.path.substr(slash + 1);
    }
  }
  call.token_ok = !call.method.empty() && token == options_.token;
  auto params = parse_params(req);
  auto doc = params ? *params : std::make_shared<rapidjson::Document>();
  if (!params)
    doc->SetObject();
  call.params_json = json::to_string(*doc);
  call.params = doc;
  auto idx = record(call);
  auto reply = [&](int status, std::string body, std::string type) {
    complete(idx, status, body, true);
    return http_reply_out{status, std::move(type), std::move(body), {}};
  };
  if (call.method.empty())
    return reply(404, failure(404, "Not Found"), "application/json");
  if (!call.token_ok)
    return reply(401, failure(401, "Unauthorized"), "application/json");
  if (!params)
    return reply(400, failure(400, "Bad Request: invalid JSON body"),
                 "application/json");
  if (auto fault = take_fault(call.method)) {
    switch (fault->what) {
      case telegram_fault::kind::reply: {
        if (!fault->raw_body.empty())
          return reply(fault->status, fault->raw_body, "text/html");
        auto body = failure(fault->status, fault->description,
                            fault->retry_after);
        auto r = reply(fault->status, body, "application/json");
        if (fault->retry_after)
          r.headers.emplace_back("Retry-After",
                                 std::to_string(*fault->retry_after));
        return r;
      }
      case telegram_fault::kind::stall:
        complete(idx, 0, "", false);
        hold(fault->hold);
        return std::nullopt;
      case telegram_fault::kind::lost_reply: {
        auto result = dispatch(call.method, call);
        complete(idx, result.status, result.body, false);
        hold(fault->hold);
        return std::nullopt;
      }
    }
  }
  auto result = dispatch(call.method, call);
  return reply(result.status, std::move(result.body), "application/json");
}

fake_telegram::call_index fake_telegram::record(telegram_call call) {
  std::lock_guard<std::mutex> guard{mtx_};
  calls_.push_back(std::move(call));
  changed_.notify_all();
  return calls_.size() - 1;
}

void fake_telegram::complete(call_index i, int status, std::string body,
                             bool answered) {
  telegram_call copy;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& c = calls_[i];
    c.status = status;
    c.response = std::move(body);
    c.answered = answered;
    if (options_.on_call)
      copy = c;
  }
  changed_.notify_all();
  if (options_.on_call)
    options_.on_call(copy);
}

void fake_telegram::hold(std::chrono::milliseconds how_long) {
  std::unique_lock<std::mutex> guard{mtx_};
  changed_.wait_for(guard, how_long, [this] {
    return stopping_;
  });
}

std::optional<telegram_fault> fake_telegram::take_fault(
  const std::string& method) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (const auto& key : {lower(method), std::string{"*"}}) {
    auto i = faults_.find(key);
    if (i != faults_.end() && !i->second.empty()) {
      auto f = std::move(i->second.front());
      i->second.pop_front();
      return f;
    }
  }
  return std::nullopt;
}

fake_telegram::method_result fake_telegram::dispatch(const std::string& method,
                                                     const telegram_call& c) {
  auto m = lower(method);
  if (m == "getme")
    return get_me();
  if (m == "getfile")
    return get_file(c);
  if (m == "getupdates")
    return get_updates(c);
  if (m == "sendmessage")
    return send_message(c);
  if (m == "setmessagereaction")
    return set_message_reaction(c);
  if (m == "answercallbackquery")
    return answer_callback_query(c);
  if (m == "editmessagetext")
    return edit_message(c, true);
  if (m == "editmessagereplymarkup")
    return edit_message(c, false);
  if (m == "sendchataction")
    return send_chat_action(c);
  if (m == "setwebhook")
    return set_webhook(c);
  if (m == "deletewebhook")
    return delete_webhook(c);
  if (m == "getwebhookinfo")
    return get_webhook_info();
  return {404, failure(404, "Not Found")};
}

// -- test controls
// --------------------------------------------------------------

int64_t fake_telegram::push_update(std::string_view update_json) {
  rapidjson::Document doc;
  if (json::parse(update_json, doc) || !doc.IsObject())
    throw std::invalid_argument{"push_update: not a JSON object"};
  std::lock_guard<std::mutex> guard{mtx_};
  auto id = insert_update(doc);
  changed_.notify_all();
  return id;
}

void fake_telegram::remember_update(std::string_view update_json) {
  rapidjson::Document doc;
  if (json::parse(update_json, doc) || !doc.IsObject())
    throw std::invalid_argument{"remember_update: not a JSON object"};
  std::lock_guard<std::mutex> guard{mtx_};
  learn(doc);
}

int64_t fake_telegram::next_message_id(int64_t chat_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& next = next_message_id_[chat_id];
  next = std::max<int64_t>(next, 1);
  return next++;
}

size_t fake_telegram::pending_updates() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return updates_.size();
}

int64_t fake_telegram::confirmed_offset() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return confirmed_;
}

void fake_telegram::add_chat(telegram_chat chat) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto id = chat.id;
  chats_[id] = std::move(chat);
}

void fake_telegram::block_chat(int64_t chat_id, bool blocked) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (blocked)
    blocked_.insert(chat_id);
  else
    blocked_.erase(chat_id);
}

void fake_telegram::inject(std::string method, telegram_fault fault,
                           int times) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& q = faults_[lower(method)];
  for (int i = 0; i < times; ++i)
    q.push_back(fault);
}

size_t fake_telegram::pending_faults() const {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  for (const auto& [method, q] : faults_)
    n += q.size();
  return n;
}

// -- what happened
// --------------------------------------------------------------

std::vector<telegram_call> fake_telegram::calls() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return calls_;
}

std::vector<telegram_call> fake_telegram::calls(std::string_view method) const {
  auto m = lower(method);
  std::vector<telegram_call> out;
  std::lock_guard<std::mutex> guard{mtx_};
  for (const auto& c : calls_)
    if (lower(c.method) == m)
      out.push_back(c);
  return out;
}

size_t fake_telegram::count(std::string_view method) const {
  std::lock_guard<std::mutex> guard{mtx_};
  return count_of(calls_, lower(method), false);
}

bool fake_telegram::wait_for(
  std::function<bool(const std::vector<telegram_call>&)> pred,
  std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> guard{mtx_};
  return changed_.wait_for(guard, timeout, [&] {
    return pred(calls_);
  });
}

bool fake_telegram::wait_for_calls(std::string_view method, size_t n,
                                   std::chrono::milliseconds timeout) const {
  auto m = lower(method);
  return wait_for(
    [&](const std::vector<telegram_call>& calls) {
      return count_of(calls, m, true) >= n;
    },
    timeout);
}

bool fake_telegram::wait_for_calls_arrived(
  std::string_view method, size_t n, std::chrono::milliseconds timeout) const {
  auto m = lower(method);
  return wait_for(
    [&](const std::vector<telegram_call>& calls) {
      return count_of(calls, m, false) >= n;
    },
    timeout);
}

std::vector<telegram_sent_message> fake_telegram::messages_to(
  int64_t chat_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = sent_.find(chat_id);
  return i == sent_.end() ? std::vector<telegram_sent_message>{} : i->second;
}

std::vector<std::string> fake_telegram::reactions_of(int64_t chat_id,
                                                     int64_t message_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = reactions_.find({chat_id, message_id});
  return i == reactions_.end() ? std::vector<std::string>{} : i->second;
}

std::string fake_telegram::webhook_url() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return webhook_url_;
}

std::string fake_telegram::webhook_secret() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return webhook_secret_;
}

// -- what the fake knows
// --------------------------------------------------------

void fake_telegram::learn_message(const rapidjson::Value& msg) {
  auto chat = member(msg, "chat");
  auto chat_id = chat ? as_int(member(*chat, "id")) : std::nullopt;
  if (!chat_id)
    return;
  if (chats_.count(*chat_id) == 0) {
    telegram_chat c;
    c.id = *chat_id;
    auto str = [&](const char* key) {
      auto v = member(*chat, key);
      return v && v->IsString() ? std::string{v->GetString()} : std::string{};
    };
    c.type = str("type").empty() ? "private" : str("type");
    c.title = str("title");
    c.username = str("username");
    c.first_name = str("first_name");
    chats_[c.id] = c;
  }
  auto message_id = as_int(member(msg, "message_id"));
  if (!message_id)
    return;
  messages_[{*chat_id, *message_id}] = json::to_string(msg);
  auto& next = next_message_id_[*chat_id];
  next = std::max(next, *message_id + 1);
}

void fake_telegram::learn(const rapidjson::Value& update) {
  for (auto key :
       {"message", "edited_message", "channel_post", "edited_channel_post"})
    if (auto msg = member(update, key); msg && msg->IsObject())
      learn_message(*msg);
}

int64_t fake_telegram::insert_update(rapidjson::Document& doc) {
  learn(doc);
  auto given = as_int(member(doc, "update_id"));
  int64_t id = given ? *given : next_update_id_;
  if (!given)
    doc.AddMember("update_id", id, doc.GetAllocator());
  next_update_id_ = std::max(next_update_id_, id + 1);
  if (id < confirmed_)
    return id;
  stored_update u{id, update_kind(doc), json::to_string(doc)};
  auto pos = std::find_if(updates_.begin(), updates_.end(),
                          [&](const stored_update& s) {
                            return s.id > id;
                          });
  updates_.insert(pos, std::move(u));
  return id;
}

std::optional<fake_telegram::method_result> fake_telegram::chat_problem(
  int64_t chat_id) const {
  if (blocked_.count(chat_id) != 0)
    return method_result{403,
                         failure(403,
                                 "Forbidden: bot was blocked by the user")};
  if (options_.strict && chats_.count(chat_id) == 0)
    return method_result{400, failure(400, "Bad Request: chat not found")};
  return std::nullopt;
}

std::string fake_telegram::chat_json(int64_t chat_id) const {
  telegram_chat c;
  if (auto i = chats_.find(chat_id); i != chats_.end()) {
    c = i->second;
  } else {
    c.id = chat_id;
    c.type = chat_id > 0                 ? "private"
             : chat_id <= -1000000000000 ? "supergroup"
                                         : "group";
  }
  std::string out = R"({"id":)" + std::to_string(c.id);
  if (c.type == "private") {
    out += R"(,"first_name":)"
           + json::quote(c.first_name.empty() ? "Test" : c.first_name);
  } else {
    out += R"(,"title":)"
           + json::quote(c.title.empty() ? "Test " + c.type : c.title);
  }
  if (!c.username.empty())
    out += R"(,"username":)" + json::quote(c.username);
  return out + R"(,"type":)" + json::quote(c.type) + "}";
}

} // namespace butlers::test
