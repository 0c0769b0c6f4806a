#include "runtime/budget.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace butlers {

namespace {

bool selects(const std::vector<std::string>& xs, std::string_view x) {
  return std::any_of(xs.begin(), xs.end(), [x](const std::string& s) {
    return s == "*" || s == x;
  });
}

/// The smaller limit, where 0 means none.
template<class T>
T tighter(T a, T b) {
  if (a == 0)
    return b;
  if (b == 0)
    return a;
  return std::min(a, b);
}

std::string dollars(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", x);
  std::string s = buf;
  // At least two decimals, no trailing zeros beyond them.
  while (s.size() > 1 && s.back() == '0' && s.size() - s.find('.') > 3)
    s.pop_back();
  return "$" + s;
}

std::string token_limit(uint64_t n, bool daily) {
  return std::string{daily ? "daily token budget of " : "token budget of "}
         + std::to_string(n)
         + (daily ? " per sender and butler" : " per request");
}

std::string cost_limit(double x, bool daily) {
  return std::string{daily ? "daily cost budget of " : "cost budget of "}
         + dollars(x) + (daily ? " per sender and butler" : " per request");
}

std::string refused(const std::string& limit, const std::string& detail) {
  return std::string{budget_message_prefix} + limit + " reached (" + detail
         + ")";
}

} // namespace

bool budget_matches(const budget_config& b, std::string_view butler,
                    std::string_view channel, std::string_view tier) {
  return selects(b.butlers, butler) && selects(b.channels, channel)
         && (tier.empty() || selects(b.tiers, tier));
}

std::vector<budget_config> budgets_for(const std::vector<budget_config>& all,
                                       std::string_view butler) {
  std::vector<budget_config> out;
  for (auto& b : all)
    if (selects(b.butlers, butler))
      out.push_back(b);
  return out;
}

budget_limits effective_limits(const std::vector<budget_config>& all,
                               std::string_view butler,
                               std::string_view channel,
                               std::string_view tier) {
  budget_limits out;
  for (auto& b : all) {
    if (!budget_matches(b, butler, channel, tier))
      continue;
    out.request_tokens = tighter(out.request_tokens, b.request_tokens);
    out.request_cost_usd = tighter(out.request_cost_usd, b.request_cost_usd);
    out.daily_tokens = tighter(out.daily_tokens, b.daily_tokens);
    out.daily_cost_usd = tighter(out.daily_cost_usd, b.daily_cost_usd);
  }
  return out;
}

budget_decision decide_budget(const budget_limits& limits,
                              const budget_spent& spent) {
  budget_decision d;
  auto& l = limits;
  if (l.request_tokens > 0 && spent.request_tokens >= l.request_tokens) {
    d.refusal = refused(token_limit(l.request_tokens, false),
                        "used " + std::to_string(spent.request_tokens));
    return d;
  }
  if (l.request_cost_usd > 0 && spent.request_cost_usd >= l.request_cost_usd) {
    d.refusal = refused(cost_limit(l.request_cost_usd, false),
                        "used " + dollars(spent.request_cost_usd));
    return d;
  }
  d.daily = true;
  if (l.daily_tokens > 0 && spent.daily_tokens >= l.daily_tokens) {
    d.refusal = refused(token_limit(l.daily_tokens, true),
                        "used " + std::to_string(spent.daily_tokens)
                          + " today, UTC");
    return d;
  }
  if (l.daily_cost_usd > 0 && spent.daily_cost_usd >= l.daily_cost_usd) {
    d.refusal = refused(cost_limit(l.daily_cost_usd, true),
                        "used " + dollars(spent.daily_cost_usd)
                          + " today, UTC");
    return d;
  }
  d.daily = false;
  // The room left: the smaller of what the request and the day leave.
  auto& run = d.run;
  auto room_tokens = [&](uint64_t limit, uint64_t used, bool daily) {
    if (limit == 0 || limit - used >= run.max_tokens)
      return;
    run.max_tokens = limit - used;
    run.tokens_limit = token_limit(limit, daily);
  };
  room_tokens(l.request_tokens, spent.request_tokens, false);
  room_tokens(l.daily_tokens, spent.daily_tokens, true);
  auto room_cost = [&](double limit, double used, bool daily) {
    if (limit == 0 || limit - used >= run.max_cost_usd)
      return;
    run.max_cost_usd = limit - used;
    run.cost_limit = cost_limit(limit, daily);
  };
  room_cost(l.request_cost_usd, spent.request_cost_usd, false);
  room_cost(l.daily_cost_usd, spent.daily_cost_usd, true);
  return d;
}

std::optional<std::string> budget_overrun(const run_budget& run,
                                          const session_usage& used) {
  if (!run.tokens_limit.empty() && used.total_tokens() > run.max_tokens)
    return refused(run.tokens_limit,
                   "this session used " + std::to_string(used.total_tokens())
                     + " of the " + std::to_string(run.max_tokens) + " left");
  if (!run.cost_limit.empty() && used.cost_known
      && used.cost_usd > run.max_cost_usd)
    return refused(run.cost_limit, "this session used " + dollars(used.cost_usd)
                                     + " of the " + dollars(run.max_cost_usd)
                                     + " left");
  return std::nullopt;
}

bool is_budget_message(std::string_view message) {
  return message.find(budget_message_prefix) != std::string_view::npos;
}

std::string budget_reply(std::string_view message) {
  auto at = message.find(budget_message_prefix);
  if (at == std::string_view::npos)
    return "This request was stopped: it reached a budget.";
  auto what = message.substr(at + budget_message_prefix.size());
  what = what.substr(0, what.find(" reached"));
  return "This request was stopped: it reached its " + std::string{what} + ".";
}

std::optional<budget_spent> parse_budget_row(
  const std::vector<std::string>& row) {
  if (row.size() < 5)
    return std::nullopt;
  budget_spent s;
  s.tier = row[0].empty() ? "default" : row[0];
  char* end = nullptr;
  auto tokens = [&](const std::string& x, uint64_t& out) {
    out = std::strtoull(x.c_str(), &end, 10);
    return !x.empty() && *end == '\0';
  };
  auto cost = [&](const std::string& x, double& out) {
    out = std::strtod(x.c_str(), &end);
    return !x.empty() && *end == '\0';
  };
  if (!tokens(row[1], s.request_tokens) || !cost(row[2], s.request_cost_usd)
      || !tokens(row[3], s.daily_tokens) || !cost(row[4], s.daily_cost_usd))
    return std::nullopt;
  return s;
}

} // namespace butlers
