#pragma once

// Telegram Update JSON for tests: the recorded fixtures under
// test/fixtures/telegram/ (see its README) by name, and builders for the same
// shapes with the ids and texts a test needs.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace butlers::test::telegram {

/// The text of test/fixtures/telegram/<name>.json (`name` without ".json");
/// throws std::runtime_error when there is no such file.
std::string fixture(std::string_view name);

/// A Telegram user.
struct user_spec {
  int64_t id = 1111111;
  std::string first_name = "Test Firstname";
  std::string last_name = "Test Lastname";
  /// Omitted when empty.
  std::string username = "Testusername";
  bool is_bot = false;
};

/// A message. The chat is private with `from` unless `chat_type` says
/// otherwise ("group", "supergroup": `chat_title`; "channel": no `from`,
/// the chat as `sender_chat`).
struct message_spec {
  int64_t message_id = 1365;
  int64_t chat_id = 1111111;
  std::string chat_type = "private";
  std::string chat_title = "Test Group";
  user_spec from;
  /// Omitted when nullopt (a message without text).
  std::optional<std::string> text = std::string{"/start"};
  int64_t date = 1441645532;
  /// Adds `reply_to_message`: an earlier message with this id in the same
  /// chat, from the bot `reply_to_bot_id`, text "Original".
  std::optional<int64_t> reply_to_message_id;
  int64_t reply_to_bot_id = 123456789;
  /// Adds `edit_date` (for edited messages).
  std::optional<int64_t> edit_date;
};

/// The Message object alone.
std::string message_json(const message_spec& m);

/// {"update_id":..., "message": ...}; no update_id when nullopt (the fake
/// Telegram assigns one on push).
std::string message_update(const message_spec& m,
                           std::optional<int64_t> update_id = std::nullopt);

/// {"update_id":..., "edited_message": ...} (edit_date defaults to date+60).
std::string edited_message_update(
  message_spec m, std::optional<int64_t> update_id = std::nullopt);

/// {"update_id":..., "channel_post": ...}: chat_type forced to "channel".
std::string channel_post_update(
  message_spec m, std::optional<int64_t> update_id = std::nullopt);

/// {"update_id":..., "callback_query": ...} from `from`.
std::string callback_query_update(
  const user_spec& from = {}, std::optional<int64_t> update_id = std::nullopt);

/// {"update_id":..., "my_chat_member": ...}: `from` blocked the bot
/// (`member` -> `kicked`) in their private chat.
std::string my_chat_member_update(
  const user_spec& from = {}, int64_t bot_id = 123456789,
  std::optional<int64_t> update_id = std::nullopt);

} // namespace butlers::test::telegram
