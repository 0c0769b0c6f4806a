#pragma once

// The emoji a bot may put on a message with `setMessageReaction`: the
// Bot API's list for `ReactionTypeEmoji.emoji` (https://core.telegram.org/
// bots/api#reactiontypeemoji). Telegram answers any other emoji with
// "400 Bad Request: REACTION_INVALID", so configuration is checked against
// this list at load, and the test fake answers with it.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace butlers {

/// Every emoji Telegram accepts as a reaction, byte for byte as the Bot API
/// lists them (UTF-8; "❤" is U+2764 without a variation selector, and the
/// ZWJ sequences carry none either).
extern const std::array<std::string_view, 73> telegram_reaction_emoji;

/// True when Telegram accepts `emoji` exactly as given.
bool is_allowed_reaction(std::string_view emoji);

/// The listed form of `emoji` when it matches one once every U+FE0F
/// (variation selector 16) is dropped from both, e.g. "❤️" (as keyboards
/// and editors often produce it) gives "❤". Nullopt when nothing matches.
std::optional<std::string> canonical_reaction(std::string_view emoji);

} // namespace butlers
