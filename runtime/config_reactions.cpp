// The lifecycle reactions of `[messenger.adapter.reactions]`: a telegram
// adapter's are Telegram reaction emoji, a slack adapter's Slack emoji
// names (config/README.md). Apart from config_fields.cpp, which would
// outgrow the line cap.

#include "runtime/config_fields.hpp"
#include "runtime/slack.hpp"
#include "runtime/telegram_reactions.hpp"

namespace butlers::config_detail {

namespace {

/// One of Telegram's reaction emoji, exactly (a variant with U+FE0F is
/// named with its listed form).
check_fn reaction_emoji() {
  return [](const std::string& x) -> std::string {
    if (is_allowed_reaction(x))
      return {};
    auto listed = canonical_reaction(x);
    if (listed)
      return "'" + x + "' is not one of Telegram's reaction emoji as listed; "
             + "write '" + *listed + "' (without U+FE0F)";
    return "'" + x + "' is not one of Telegram's reaction emoji "
           + "(https://core.telegram.org/bots/api#reactiontypeemoji)";
  };
}

/// A Slack emoji name as reactions.add takes it ("eyes", not ":eyes:").
check_fn slack_emoji_name() {
  return [](const std::string& x) -> std::string {
    if (is_slack_emoji_name(x))
      return {};
    return "'" + x + "' is not a Slack emoji name (1..100 of a-z, 0-9, _, "
           + "+, -, ' without colons, e.g. \"eyes\")";
  };
}

} // namespace

const fields<reaction_config>& reaction_fields() {
  using c = reaction_config;
  static const fields<c> list{
    text("progress", &c::progress, "PROGRESS: processing started",
         reaction_emoji()),
    text("parsed", &c::parsed, "PARSED: every target succeeded",
         reaction_emoji()),
    text("errored", &c::errored, "ERRORED: a target or the processing failed",
         reaction_emoji()),
    text("queued", &c::queued, "waiting for a session slot", reaction_emoji()),
  };
  return list;
}

const fields<reaction_config>& slack_reaction_fields() {
  using c = reaction_config;
  static const fields<c> list{
    text("progress", &c::progress, "PROGRESS: processing started",
         slack_emoji_name()),
    text("parsed", &c::parsed, "PARSED: every target succeeded",
         slack_emoji_name()),
    text("errored", &c::errored, "ERRORED: a target or the processing failed",
         slack_emoji_name()),
    text("queued", &c::queued, "waiting for a session slot",
         slack_emoji_name()),
  };
  return list;
}

} // namespace butlers::config_detail
