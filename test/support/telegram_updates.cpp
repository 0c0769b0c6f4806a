#include "test/support/telegram_updates.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "runtime/json.hpp"

#ifndef BUTLERS_TELEGRAM_FIXTURES
#  error                                                                       \
    "the build defines BUTLERS_TELEGRAM_FIXTURES (target butlers_test_fakes)"
#endif

namespace butlers::test::telegram {

namespace {

std::string user_json(const user_spec& u) {
  std::string out = R"({"id":)" + std::to_string(u.id) + R"(,"is_bot":)"
                    + (u.is_bot ? "true" : "false") + R"(,"first_name":)"
                    + json::quote(u.first_name);
  if (!u.last_name.empty())
    out += R"(,"last_name":)" + json::quote(u.last_name);
  if (!u.username.empty())
    out += R"(,"username":)" + json::quote(u.username);
  return out + "}";
}

std::string chat_json(const message_spec& m) {
  std::string out = R"({"id":)" + std::to_string(m.chat_id);
  if (m.chat_type == "private") {
    out += R"(,"first_name":)" + json::quote(m.from.first_name);
    if (!m.from.last_name.empty())
      out += R"(,"last_name":)" + json::quote(m.from.last_name);
    if (!m.from.username.empty())
      out += R"(,"username":)" + json::quote(m.from.username);
  } else {
    out += R"(,"title":)" + json::quote(m.chat_title);
  }
  return out + R"(,"type":)" + json::quote(m.chat_type) + "}";
}

std::string update(std::string_view kind, const std::string& body,
                   std::optional<int64_t> update_id) {
  std::string out = "{";
  if (update_id)
    out += R"("update_id":)" + std::to_string(*update_id) + ",";
  return out + json::quote(kind) + ":" + body + "}";
}

} // namespace

std::string fixture(std::string_view name) {
  std::string path = std::string{BUTLERS_TELEGRAM_FIXTURES} + "/"
                     + std::string{name} + ".json";
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw std::runtime_error{"no Telegram fixture " + path};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string message_json(const message_spec& m) {
  auto chat = chat_json(m);
  std::string out = R"({"message_id":)" + std::to_string(m.message_id);
  if (m.chat_type == "channel")
    out += R"(,"sender_chat":)" + chat;
  else
    out += R"(,"from":)" + user_json(m.from);
  out += R"(,"chat":)" + chat + R"(,"date":)" + std::to_string(m.date);
  if (m.edit_date)
    out += R"(,"edit_date":)" + std::to_string(*m.edit_date);
  if (m.reply_to_message_id) {
    user_spec bot{m.reply_to_bot_id, "Butlers Test Bot", "", "butlers_test_bot",
                  true};
    out += R"(,"reply_to_message":{"message_id":)"
           + std::to_string(*m.reply_to_message_id) + R"(,"from":)"
           + user_json(bot) + R"(,"chat":)" + chat + R"(,"date":)"
           + std::to_string(m.date - 60) + R"(,"text":"Original"})";
  }
  if (m.text)
    out += R"(,"text":)" + json::quote(*m.text);
  return out + "}";
}

std::string message_update(const message_spec& m,
                           std::optional<int64_t> update_id) {
  return update("message", message_json(m), update_id);
}

std::string edited_message_update(message_spec m,
                                  std::optional<int64_t> update_id) {
  if (!m.edit_date)
    m.edit_date = m.date + 60;
  return update("edited_message", message_json(m), update_id);
}

std::string channel_post_update(message_spec m,
                                std::optional<int64_t> update_id) {
  m.chat_type = "channel";
  if (m.chat_title == "Test Group")
    m.chat_title = "Test Channel";
  return update("channel_post", message_json(m), update_id);
}

std::string callback_query_update(const user_spec& from,
                                  std::optional<int64_t> update_id) {
  return update("callback_query",
                R"({"id":"4382bfdwdsb323b2d9","from":)" + user_json(from)
                  + R"(,"chat_instance":"-3870456790519829170",)"
                    R"("data":"Data from button callback",)"
                    R"("inline_message_id":"1234csdbsk4839"})",
                update_id);
}

std::string my_chat_member_update(const user_spec& from, int64_t bot_id,
                                  std::optional<int64_t> update_id) {
  message_spec chat_of;
  chat_of.chat_id = from.id;
  chat_of.from = from;
  user_spec bot{bot_id, "Butlers Test Bot", "", "butlers_test_bot", true};
  auto bot_json = user_json(bot);
  return update("my_chat_member",
                R"({"chat":)" + chat_json(chat_of) + R"(,"from":)"
                  + user_json(from) + R"(,"date":1441645800,)"
                  + R"("old_chat_member":{"user":)" + bot_json
                  + R"(,"status":"member"},"new_chat_member":{"user":)"
                  + bot_json + R"(,"status":"kicked","until_date":0}})",
                update_id);
}

} // namespace butlers::test::telegram
