#pragma once

// Token and cost budgets (spec 001 §15.7): which `[[budget]]` tables apply
// to a session, what they allow, whether what the request and its sender
// spent already leaves room to start, and when a running session has used
// up the room it had. Pure logic; the session actor carries it out.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/messages.hpp"

namespace butlers {

/// The limits that apply to one session: the smallest of each kind over
/// every matching budget (0 = no limit of that kind).
struct budget_limits {
  uint64_t request_tokens = 0;
  double request_cost_usd = 0;
  uint64_t daily_tokens = 0;
  double daily_cost_usd = 0;

  bool any() const {
    return request_tokens > 0 || request_cost_usd > 0 || daily_tokens > 0
           || daily_cost_usd > 0;
  }
};

/// What was spent before the session starts: by the request's earlier
/// sessions (every segment and attempt), and by the (sender, butler) on the
/// current UTC day. Read by `usage_budget_read`.
struct budget_spent {
  /// The request's policy tier ("default" when it has no inbox row).
  std::string tier = "default";
  uint64_t request_tokens = 0;
  double request_cost_usd = 0;
  uint64_t daily_tokens = 0;
  double daily_cost_usd = 0;
};

/// True when `b` applies to sessions of `butler` for requests from
/// `channel` in `tier` ("" matches any tier: the tier is not known yet).
bool budget_matches(const budget_config& b, std::string_view butler,
                    std::string_view channel, std::string_view tier);

/// The budgets of `all` that may apply to `butler` (any channel, any tier):
/// what its sessions carry.
std::vector<budget_config> budgets_for(const std::vector<budget_config>& all,
                                       std::string_view butler);

/// The limits of every budget in `all` that matches.
budget_limits effective_limits(const std::vector<budget_config>& all,
                               std::string_view butler,
                               std::string_view channel, std::string_view tier);

/// The room a running session has: the most tokens and dollars it may use
/// before it is stopped, and what to say when it crosses either.
struct run_budget {
  uint64_t max_tokens = std::numeric_limits<uint64_t>::max();
  double max_cost_usd = std::numeric_limits<double>::infinity();
  /// The limit that binds each, as the messages name it ("token budget of
  /// 100 per request").
  std::string tokens_limit;
  std::string cost_limit;

  bool bounded() const {
    return !tokens_limit.empty() || !cost_limit.empty();
  }
};

/// Starts every message of a budget refusal or stop, so that the reply to
/// the user can say what happened (`budget_reply`).
constexpr std::string_view budget_message_prefix = "budget exhausted: ";

/// A session may start, with room `run`, or it is refused with `refusal`
/// (a message starting with `budget_message_prefix`); `daily` says which
/// kind refused.
struct budget_decision {
  std::optional<std::string> refusal;
  bool daily = false;
  run_budget run;
};

/// Whether a session under `limits` may start after `spent`: refused when
/// the request or the (sender, butler) day is at or over a limit, else the
/// room left (the smaller of the request's and the day's).
budget_decision decide_budget(const budget_limits& limits,
                              const budget_spent& spent);

/// The message when `used` (the session's usage so far) went past its
/// room, or nullopt while it is within.
std::optional<std::string> budget_overrun(const run_budget& run,
                                          const session_usage& used);

/// True for an error message that `decide_budget` or `budget_overrun` made.
bool is_budget_message(std::string_view message);

/// What the user reads when a request was refused or stopped by a budget:
/// "This request was stopped: it reached its token budget of 100 per
/// request." (`message` as made by `decide_budget` or `budget_overrun`,
/// possibly after a "butler (segment): " prefix).
std::string budget_reply(std::string_view message);

/// Parses one row of `usage_budget_read` (tier, request tokens, request
/// cost, day tokens, day cost); nullopt when it is malformed.
std::optional<budget_spent> parse_budget_row(
  const std::vector<std::string>& row);

} // namespace butlers
