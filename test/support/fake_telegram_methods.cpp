// The Bot API methods of the fake Telegram (fake_telegram.hpp): what each
// one checks, remembers and answers.

#include <algorithm>
#include <atomic>
#include <ctime>

#include "runtime/json.hpp"
#include "runtime/telegram_reactions.hpp"
#include "runtime/text.hpp"
#include "test/support/fake_telegram.hpp"
#include "test/support/fake_telegram_detail.hpp"

namespace butlers::test {

namespace {

using rapidjson::Value;
using telegram_detail::as_int;
using telegram_detail::failure;
using telegram_detail::lower;
using telegram_detail::member;
using telegram_detail::ok;

bool truthy(const Value* v) {
  if (v == nullptr)
    return false;
  if (v->IsBool())
    return v->GetBool();
  if (v->IsString())
    return std::string_view{v->GetString()} == "true"
           || std::string_view{v->GetString()} == "1";
  return false;
}

/// A parameter that holds an array or object, also when it arrived
/// JSON-serialized in a string.
std::optional<rapidjson::Document> structured(const Value* v) {
  if (v == nullptr)
    return std::nullopt;
  rapidjson::Document doc;
  if (v->IsString()) {
    if (json::parse(std::string_view{v->GetString(), v->GetStringLength()},
                    doc))
      return std::nullopt;
  } else {
    doc.CopyFrom(*v, doc.GetAllocator());
  }
  return doc;
}

/// Why a call has no usable chat_id: none given, or a "@username" (the
/// fake knows chats by id only).
std::string no_chat(const telegram_call& c) {
  return c.param("chat_id") == nullptr ? "Bad Request: chat_id is empty"
                                       : "Bad Request: chat not found";
}

} // namespace

std::string fake_telegram::add_file(const std::string& file_id,
                                    std::string bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto path = "documents/file_" + std::to_string(files_.size()) + ".bin";
  files_[file_id] = std::move(bytes);
  file_paths_[path] = file_id;
  return path;
}

size_t fake_telegram::downloads() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return downloads_;
}

fake_telegram::method_result fake_telegram::get_file(const telegram_call& c) {
  auto id = c.string_param("file_id");
  if (!id || id->empty())
    return {400, failure(400, "Bad Request: file_id is empty")};
  std::lock_guard<std::mutex> guard{mtx_};
  auto f = files_.find(*id);
  if (f == files_.end())
    return {400, failure(400, "Bad Request: invalid file_id")};
  // The Bot API hands over files of up to 20 MB.
  if (f->second.size() > size_t{20} * 1024 * 1024)
    return {400, failure(400, "Bad Request: file is too big")};
  std::string path;
  for (auto& [p, fid] : file_paths_)
    if (fid == *id)
      path = p;
  return {200, ok(R"({"file_id":)" + json::quote(*id) + R"(,"file_unique_id":)"
                  + json::quote("u" + *id) + R"(,"file_size":)"
                  + std::to_string(f->second.size()) + R"(,"file_path":)"
                  + json::quote(path) + "}")};
}

http_reply_out fake_telegram::download(const std::string& rest) {
  // rest: <token>/<file_path>
  auto slash = rest.find('/');
  std::lock_guard<std::mutex> guard{mtx_};
  if (slash == std::string::npos || rest.substr(0, slash) != options_.token)
    return {401, "application/json", failure(401, "Unauthorized"), {}};
  auto p = file_paths_.find(rest.substr(slash + 1));
  if (p == file_paths_.end())
    return {404, "application/json", failure(404, "Not Found"), {}};
  ++downloads_;
  return {200, "application/octet-stream", files_[p->second], {}};
}

fake_telegram::method_result fake_telegram::get_me() {
  std::string user = R"({"id":)" + std::to_string(bot_id())
                     + R"(,"is_bot":true,"first_name":)"
                     + json::quote(options_.bot_first_name) + R"(,"username":)"
                     + json::quote(options_.bot_username)
                     + R"(,"can_join_groups":true,)"
                       R"("can_read_all_group_messages":false,)"
                       R"("supports_inline_queries":false,)"
                       R"("can_connect_to_business":false,)"
                       R"("has_main_web_app":false})";
  return {200, ok(user)};
}

std::vector<const fake_telegram::stored_update*> fake_telegram::deliverable(
  size_t limit) const {
  std::vector<const stored_update*> out;
  for (const auto& u : updates_) {
    if (out.size() >= limit)
      break;
    bool allowed = allowed_updates_.empty()
                     ? u.kind != "chat_member" && u.kind != "message_reaction"
                         && u.kind != "message_reaction_count"
                     : std::find(allowed_updates_.begin(),
                                 allowed_updates_.end(), u.kind)
                         != allowed_updates_.end();
    if (allowed)
      out.push_back(&u);
  }
  return out;
}

fake_telegram::method_result fake_telegram::get_updates(
  const telegram_call& c) {
  auto offset = c.int_param("offset");
  auto limit = std::clamp<int64_t>(c.int_param("limit").value_or(100), 1, 100);
  auto timeout = std::max<int64_t>(c.int_param("timeout").value_or(0), 0);
  auto allowed = structured(c.param("allowed_updates"));
  std::unique_lock<std::mutex> guard{mtx_};
  if (!webhook_url_.empty())
    return {409, failure(409, "Conflict: can't use getUpdates method while "
                              "webhook is active; use deleteWebhook to "
                              "delete the webhook first")};
  if (allowed && allowed->IsArray()) {
    allowed_updates_.clear();
    for (const auto& k : allowed->GetArray())
      if (k.IsString())
        allowed_updates_.emplace_back(k.GetString());
  }
  if (offset && *offset > 0) {
    while (!updates_.empty() && updates_.front().id < *offset)
      updates_.pop_front();
    confirmed_ = std::max(confirmed_, *offset);
  } else if (offset && *offset < 0) {
    auto keep = static_cast<size_t>(-*offset);
    while (updates_.size() > keep)
      updates_.pop_front();
  }
  auto generation = ++poll_generation_;
  changed_.notify_all(); // an older poll still waiting ends with 409
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds{timeout};
  auto ready = [&] {
    return stopping_ || generation != poll_generation_
           || !deliverable(1).empty();
  };
  changed_.wait_until(guard, deadline, ready);
  if (generation != poll_generation_)
    return {409, failure(409, "Conflict: terminated by other getUpdates "
                              "request; make sure that only one bot "
                              "instance is running")};
  std::string result = "[";
  for (auto* u : deliverable(static_cast<size_t>(limit))) {
    if (result.size() > 1)
      result += ",";
    result += u->json;
  }
  return {200, ok(result + "]")};
}

fake_telegram::method_result fake_telegram::send_message(
  const telegram_call& c) {
  auto chat_id = c.int_param("chat_id");
  if (!chat_id)
    return {400, failure(400, no_chat(c))};
  auto text = c.string_param("text").value_or("");
  if (trim(text).empty())
    return {400, failure(400, "Bad Request: message text is empty")};
  if (json::code_points(text) > telegram_max_text)
    return {400, failure(400, "Bad Request: message is too long")};
  auto parse_mode = c.string_param("parse_mode").value_or("");
  auto pm = lower(parse_mode);
  if (!pm.empty() && pm != "html" && pm != "markdown" && pm != "markdownv2")
    return {400, failure(400, "Bad Request: unsupported parse_mode")};
  std::optional<int64_t> reply_to = c.int_param("reply_to_message_id");
  bool without_reply = truthy(c.param("allow_sending_without_reply"));
  if (auto rp = structured(c.param("reply_parameters")); rp) {
    if (auto id = as_int(member(*rp, "message_id")))
      reply_to = id;
    without_reply = truthy(member(*rp, "allow_sending_without_reply"));
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto problem = chat_problem(*chat_id))
    return *problem;
  std::string replied;
  if (reply_to) {
    auto i = messages_.find({*chat_id, *reply_to});
    if (i != messages_.end())
      replied = i->second;
    else if (options_.strict && !without_reply)
      return {400,
              failure(400, "Bad Request: message to be replied not found")};
  }
  telegram_sent_message sent;
  sent.chat_id = *chat_id;
  auto& next = next_message_id_[*chat_id];
  next = std::max<int64_t>(next, 1);
  sent.message_id = next++; // next_message_id() without the second lock
  sent.text = text;
  sent.reply_to_message_id = reply_to;
  sent.parse_mode = parse_mode;
  sent.date = static_cast<int64_t>(std::time(nullptr));
  if (auto* markup = c.param("reply_markup"))
    sent.reply_markup = markup->IsString() ? markup->GetString()
                                           : json::to_string(*markup);
  std::string msg = R"({"message_id":)" + std::to_string(sent.message_id)
                    + R"(,"from":{"id":)" + std::to_string(bot_id())
                    + R"(,"is_bot":true,"first_name":)"
                    + json::quote(options_.bot_first_name) + R"(,"username":)"
                    + json::quote(options_.bot_username) + R"(},"chat":)"
                    + chat_json(*chat_id) + R"(,"date":)"
                    + std::to_string(sent.date);
  if (!replied.empty())
    msg += R"(,"reply_to_message":)" + replied;
  msg += R"(,"text":)" + json::quote(text) + "}";
  messages_[{*chat_id, sent.message_id}] = msg;
  sent_[*chat_id].push_back(std::move(sent));
  changed_.notify_all();
  return {200, ok(msg)};
}

fake_telegram::method_result fake_telegram::set_message_reaction(
  const telegram_call& c) {
  auto chat_id = c.int_param("chat_id");
  if (!chat_id)
    return {400, failure(400, no_chat(c))};
  auto message_id = c.int_param("message_id");
  if (!message_id)
    return {400, failure(400, "Bad Request: message_id is empty")};
  std::string emoji;
  if (auto reaction = structured(c.param("reaction")); reaction) {
    if (!reaction->IsArray())
      return {400, failure(400, "Bad Request: REACTION_INVALID")};
    if (reaction->Size() > 1)
      return {400, failure(400, "Bad Request: REACTIONS_TOO_MANY")};
    for (const auto& r : reaction->GetArray()) {
      auto type = member(r, "type");
      auto e = member(r, "emoji");
      if (type == nullptr || !type->IsString()
          || std::string_view{type->GetString()} != "emoji" || e == nullptr
          || !e->IsString() || !is_allowed_reaction(e->GetString()))
        return {400, failure(400, "Bad Request: REACTION_INVALID")};
      emoji = e->GetString();
    }
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto problem = chat_problem(*chat_id))
    return *problem;
  if (options_.strict && messages_.count({*chat_id, *message_id}) == 0)
    return {400, failure(400, "Bad Request: message to react not found")};
  reactions_[{*chat_id, *message_id}].push_back(emoji);
  changed_.notify_all();
  return {200, ok("true")};
}

fake_telegram::method_result fake_telegram::answer_callback_query(
  const telegram_call& c) {
  auto id = c.string_param("callback_query_id").value_or("");
  if (id.empty())
    return {400, failure(400, "Bad Request: query is too old and response "
                              "timeout expired or query ID is invalid")};
  return {200, ok("true")};
}

fake_telegram::method_result fake_telegram::edit_message(const telegram_call& c,
                                                         bool text) {
  auto chat_id = c.int_param("chat_id");
  auto message_id = c.int_param("message_id");
  if (!chat_id || !message_id)
    return {400, failure(400, "Bad Request: message to edit not found")};
  auto new_text = c.string_param("text").value_or("");
  if (text && trim(new_text).empty())
    return {400, failure(400, "Bad Request: message text is empty")};
  std::lock_guard<std::mutex> guard{mtx_};
  auto& sent = sent_[*chat_id];
  auto i = std::find_if(sent.begin(), sent.end(),
                        [&](const telegram_sent_message& m) {
                          return m.message_id == *message_id;
                        });
  if (i == sent.end())
    return {400, failure(400, "Bad Request: message to edit not found")};
  if (text)
    i->text = new_text;
  i->reply_markup.clear();
  if (auto* markup = c.param("reply_markup"))
    i->reply_markup = markup->IsString() ? markup->GetString()
                                         : json::to_string(*markup);
  ++i->edits;
  changed_.notify_all();
  return {200,
          ok(R"({"message_id":)" + std::to_string(*message_id) + R"(,"chat":)"
             + chat_json(*chat_id) + R"(,"date":)" + std::to_string(i->date)
             + R"(,"text":)" + json::quote(i->text) + "}")};
}

std::string fake_telegram::callback_query_update(int64_t from_id,
                                                 int64_t chat_id,
                                                 int64_t message_id,
                                                 std::string_view data) const {
  static std::atomic<int64_t> next{1};
  return R"({"callback_query":{"id":")" + std::to_string(next++)
         + R"(","from":{"id":)" + std::to_string(from_id)
         + R"(,"is_bot":false,"first_name":"Tester"},"message":{)"
           R"("message_id":)"
         + std::to_string(message_id) + R"(,"chat":{"id":)"
         + std::to_string(chat_id)
         + R"(,"type":"private"},"date":1730910000,"text":"?"},)"
           R"("chat_instance":"1","data":)"
         + json::quote(data) + "}}";
}

fake_telegram::method_result fake_telegram::send_chat_action(
  const telegram_call& c) {
  // https://core.telegram.org/bots/api#sendchataction
  static const std::set<std::string> actions = {"typing",
                                                "upload_photo",
                                                "record_video",
                                                "upload_video",
                                                "record_voice",
                                                "upload_voice",
                                                "upload_document",
                                                "choose_sticker",
                                                "find_location",
                                                "record_video_note",
                                                "upload_video_note"};
  auto chat_id = c.int_param("chat_id");
  if (!chat_id)
    return {400, failure(400, no_chat(c))};
  auto action = c.string_param("action");
  if (!action || action->empty())
    return {400, failure(400, "Bad Request: action is empty")};
  if (actions.count(*action) == 0)
    return {400,
            failure(400, "Bad Request: wrong parameter action in request")};
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto problem = chat_problem(*chat_id))
    return *problem;
  return {200, ok("true")};
}

fake_telegram::method_result fake_telegram::set_webhook(
  const telegram_call& c) {
  auto url = c.string_param("url").value_or("");
  std::lock_guard<std::mutex> guard{mtx_};
  if (!url.empty() && url.rfind("https://", 0) != 0)
    return {400, failure(400, "Bad Request: bad webhook: An HTTPS URL must "
                              "be provided for webhook")};
  webhook_url_ = url;
  webhook_secret_ = c.string_param("secret_token").value_or("");
  if (truthy(c.param("drop_pending_updates")))
    updates_.clear();
  changed_.notify_all();
  return {200, R"({"ok":true,"result":true,"description":)"
                 + json::quote(url.empty() ? "Webhook was deleted"
                                           : "Webhook was set")
                 + "}"};
}

fake_telegram::method_result fake_telegram::delete_webhook(
  const telegram_call& c) {
  std::lock_guard<std::mutex> guard{mtx_};
  bool had = !webhook_url_.empty();
  webhook_url_.clear();
  webhook_secret_.clear();
  if (truthy(c.param("drop_pending_updates")))
    updates_.clear();
  changed_.notify_all();
  return {200, R"({"ok":true,"result":true,"description":)"
                 + json::quote(had ? "Webhook was deleted"
                                   : "Webhook is already deleted")
                 + "}"};
}

fake_telegram::method_result fake_telegram::get_webhook_info() {
  std::lock_guard<std::mutex> guard{mtx_};
  return {200, ok(R"({"url":)" + json::quote(webhook_url_)
                  + R"(,"has_custom_certificate":false,)"
                    R"("pending_update_count":)"
                  + std::to_string(updates_.size()) + "}")};
}

} // namespace butlers::test
