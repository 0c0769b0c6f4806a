#include <gtest/gtest.h>

#include "runtime/budget.hpp"
#include "runtime/scripted.hpp"
#include "runtime/usage.hpp"

namespace butlers {
namespace {

budget_config budget(uint64_t request_tokens, uint64_t daily_tokens = 0) {
  budget_config b;
  b.request_tokens = request_tokens;
  b.daily_tokens = daily_tokens;
  return b;
}

TEST(budget, selectors_match_butler_channel_and_tier) {
  budget_config b;
  b.butlers = {"finance"};
  b.channels = {"telegram", "api"};
  b.tiers = {"interactive"};
  EXPECT_TRUE(budget_matches(b, "finance", "api", "interactive"));
  EXPECT_FALSE(budget_matches(b, "health", "api", "interactive"));
  EXPECT_FALSE(budget_matches(b, "finance", "email", "interactive"));
  EXPECT_FALSE(budget_matches(b, "finance", "api", "default"));
  // The tier is not known before the database is read: any tier matches.
  EXPECT_TRUE(budget_matches(b, "finance", "api", ""));
  budget_config all;
  EXPECT_TRUE(budget_matches(all, "anyone", "mcp", "high_priority"));
}

TEST(budget, budgets_for_keeps_those_that_select_the_butler) {
  budget_config finance = budget(10);
  finance.butlers = {"finance"};
  budget_config everyone = budget(20);
  auto kept = budgets_for({finance, everyone}, "health");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].request_tokens, 20u);
  EXPECT_EQ(budgets_for({finance, everyone}, "finance").size(), 2u);
}

TEST(budget, the_smallest_limit_of_each_kind_wins_and_zero_is_none) {
  budget_config a = budget(100, 0);
  a.request_cost_usd = 2.0;
  budget_config b = budget(50, 1000);
  budget_config other_tier = budget(1);
  other_tier.tiers = {"high_priority"};
  auto l = effective_limits({a, b, other_tier}, "general", "api", "default");
  EXPECT_EQ(l.request_tokens, 50u);
  EXPECT_EQ(l.daily_tokens, 1000u);
  EXPECT_DOUBLE_EQ(l.request_cost_usd, 2.0);
  EXPECT_DOUBLE_EQ(l.daily_cost_usd, 0.0);
  EXPECT_TRUE(l.any());
  EXPECT_FALSE(
    effective_limits({other_tier}, "general", "api", "default").any());
}

TEST(budget, a_request_at_its_limit_is_refused_before_it_starts) {
  budget_limits l;
  l.request_tokens = 100;
  budget_spent spent;
  spent.request_tokens = 100;
  auto d = decide_budget(l, spent);
  ASSERT_TRUE(d.refusal);
  EXPECT_FALSE(d.daily);
  EXPECT_EQ(*d.refusal, "budget exhausted: token budget of 100 per request "
                        "reached (used 100)");
  EXPECT_TRUE(is_budget_message(*d.refusal));
}

TEST(budget, a_sender_over_the_daily_limit_is_refused) {
  budget_limits l;
  l.daily_cost_usd = 0.5;
  budget_spent spent;
  spent.daily_cost_usd = 0.75;
  auto d = decide_budget(l, spent);
  ASSERT_TRUE(d.refusal);
  EXPECT_TRUE(d.daily);
  EXPECT_EQ(*d.refusal, "budget exhausted: daily cost budget of $0.50 per "
                        "sender and butler reached (used $0.75 today, UTC)");
}

TEST(budget, the_room_left_is_the_smaller_of_request_and_day) {
  budget_limits l;
  l.request_tokens = 1000;
  l.daily_tokens = 500;
  budget_spent spent;
  spent.request_tokens = 100; // 900 left on the request
  spent.daily_tokens = 450;   // 50 left today
  auto d = decide_budget(l, spent);
  ASSERT_FALSE(d.refusal);
  EXPECT_EQ(d.run.max_tokens, 50u);
  EXPECT_EQ(d.run.tokens_limit, "daily token budget of 500 per sender and "
                                "butler");
  EXPECT_TRUE(d.run.bounded());
  EXPECT_TRUE(d.run.cost_limit.empty());
}

TEST(budget, without_limits_a_run_is_unbounded) {
  auto d = decide_budget({}, {});
  EXPECT_FALSE(d.refusal);
  EXPECT_FALSE(d.run.bounded());
  session_usage u;
  u.output_tokens = 1u << 30;
  EXPECT_FALSE(budget_overrun(d.run, u));
}

TEST(budget, a_run_is_over_once_it_goes_past_its_room) {
  budget_limits l;
  l.request_tokens = 120;
  auto run = decide_budget(l, {}).run;
  session_usage u;
  u.input_tokens = 20;
  u.output_tokens = 100; // 120: at the limit, not past it
  EXPECT_FALSE(budget_overrun(run, u));
  u.output_tokens = 101;
  auto over = budget_overrun(run, u);
  ASSERT_TRUE(over);
  EXPECT_EQ(*over, "budget exhausted: token budget of 120 per request "
                   "reached (this session used 121 of the 120 left)");
}

TEST(budget, cost_counts_only_when_the_runtime_reports_it) {
  budget_limits l;
  l.request_cost_usd = 0.1;
  auto run = decide_budget(l, {}).run;
  session_usage u;
  u.cost_usd = 5;
  EXPECT_FALSE(budget_overrun(run, u));
  u.cost_known = true;
  EXPECT_TRUE(budget_overrun(run, u));
}

TEST(budget, the_user_reads_which_budget_stopped_the_request) {
  EXPECT_EQ(budget_reply("finance (s1): budget exhausted: token budget of 100 "
                         "per request reached (used 150)"),
            "This request was stopped: it reached its token budget of 100 per "
            "request.");
  EXPECT_FALSE(is_budget_message("timed out"));
}

TEST(budget, rows_of_the_budget_read_parse) {
  auto s = parse_budget_row({"interactive", "150", "0.25", "1200", "3"});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tier, "interactive");
  EXPECT_EQ(s->request_tokens, 150u);
  EXPECT_DOUBLE_EQ(s->request_cost_usd, 0.25);
  EXPECT_EQ(s->daily_tokens, 1200u);
  EXPECT_DOUBLE_EQ(s->daily_cost_usd, 3.0);
  EXPECT_FALSE(parse_budget_row({"default", "x", "0", "0", "0"}));
  EXPECT_FALSE(parse_budget_row({"default", "1"}));
}

TEST(usage, prompt_versions_are_stable_and_follow_what_shapes_the_prompt) {
  runtime_config cli;
  cli.kind = runtime_kind::cli;
  cli.model = "sonnet";
  auto v = prompt_version_of(cli);
  EXPECT_EQ(v.size(), 16u);
  EXPECT_EQ(v, prompt_version_of(cli));
  auto slower = cli;
  slower.kill_grace_ms = 1; // does not shape the prompt
  EXPECT_EQ(prompt_version_of(slower), v);
  auto other = cli;
  other.model = "opus";
  EXPECT_NE(prompt_version_of(other), v);
  auto cmd = cli;
  cmd.command = {"claude", "-p"};
  EXPECT_NE(prompt_version_of(cmd), v);
}

TEST(usage, a_scripted_runtime_without_synthetic_usage_has_no_version) {
  runtime_config rt;
  EXPECT_EQ(prompt_version_of(rt), "");
  EXPECT_FALSE(scripted_reports_usage(rt));
  rt.tokens_per_turn = 5;
  EXPECT_TRUE(scripted_reports_usage(rt));
  EXPECT_EQ(prompt_version_of(rt).size(), 16u);
}

TEST(usage, model_labels_are_bounded_per_butler) {
  metrics_registry m;
  usage_meters meters{m, "general"};
  session_usage u;
  u.input_tokens = 10;
  u.output_tokens = 3;
  for (size_t i = 0; i < usage_meters::max_models + 3; ++i) {
    u.model = "model-" + std::to_string(i);
    meters.observe(u, 0.5);
  }
  auto text = m.render();
  EXPECT_NE(text.find("gen_ai_client_token_usage_count{butler=\"general\","
                      "gen_ai_response_model=\"model-0\","
                      "gen_ai_token_type=\"input\"} 1"),
            std::string::npos);
  // The models past the bound share "other".
  EXPECT_NE(text.find("gen_ai_response_model=\"other\","
                      "gen_ai_token_type=\"output\"} 3"),
            std::string::npos);
  EXPECT_EQ(text.find("model-" + std::to_string(usage_meters::max_models)),
            std::string::npos);
  EXPECT_NE(text.find("gen_ai_client_operation_duration_seconds_count"),
            std::string::npos);
}

TEST(scripted, split_reply_cuts_at_spaces_and_joins_back) {
  auto parts = split_reply("one two three four five", 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "one");
  EXPECT_EQ(parts[1], " two three");
  EXPECT_EQ(parts[2], " four five");
  auto few = split_reply("hi there", 4);
  ASSERT_EQ(few.size(), 4u);
  std::string joined;
  for (auto& p : few)
    joined += p;
  EXPECT_EQ(joined, "hi there");
  EXPECT_EQ(split_reply("whole", 1), std::vector<std::string>{"whole"});
}

std::string keys_of(const std::vector<config_error>& errors) {
  std::string out;
  for (auto& e : errors)
    out += e.key + ": " + e.message + "\n";
  return out;
}

TEST(budget_config, budget_tables_are_read_printed_and_read_back) {
  auto res = parse_config(R"(
[[budget]]
butlers = ["finance"]
channels = ["telegram"]
tiers = ["interactive"]
request_tokens = 5000
request_cost_usd = 0.25
daily_tokens = 100000
daily_cost_usd = 2.5

[[budget]]
daily_tokens = 7
)",
                          "budget.toml");
  ASSERT_TRUE(res.settings) << keys_of(res.errors);
  auto& s = *res.settings;
  ASSERT_EQ(s.budgets.size(), 2u);
  EXPECT_EQ(s.budgets[0].butlers, std::vector<std::string>{"finance"});
  EXPECT_EQ(s.budgets[0].channels, std::vector<std::string>{"telegram"});
  EXPECT_EQ(s.budgets[0].tiers, std::vector<std::string>{"interactive"});
  EXPECT_EQ(s.budgets[0].request_tokens, 5000u);
  EXPECT_DOUBLE_EQ(s.budgets[0].request_cost_usd, 0.25);
  EXPECT_EQ(s.budgets[0].daily_tokens, 100000u);
  EXPECT_DOUBLE_EQ(s.budgets[0].daily_cost_usd, 2.5);
  EXPECT_EQ(s.budgets[1].butlers, std::vector<std::string>{"*"});
  EXPECT_EQ(s.budgets[1].daily_tokens, 7u);
  EXPECT_TRUE(validate_settings(s).empty()) << keys_of(validate_settings(s));
  auto back = parse_config(to_toml(s), "out.toml");
  ASSERT_TRUE(back.settings) << keys_of(back.errors);
  EXPECT_EQ(*back.settings, s);
  auto other = s;
  other.budgets[1].tiers = {"default"};
  EXPECT_NE(other, s);
}

TEST(budget_config, a_budget_without_a_limit_or_selecting_nothing_is_refused) {
  auto res = parse_config(R"(
[[budget]]
channels = []
)",
                          "budget.toml");
  ASSERT_TRUE(res.settings) << keys_of(res.errors);
  auto errors = validate_settings(*res.settings);
  auto text = keys_of(errors);
  EXPECT_NE(text.find("budget[0]: sets no limit"), std::string::npos) << text;
  EXPECT_NE(text.find("budget[0].channels: selects nothing"), std::string::npos)
    << text;
}

TEST(budget_config, bad_selectors_and_limits_name_the_key) {
  auto res = parse_config(R"(
[[budget]]
butlers = ["Not A Name"]
channels = ["fax"]
tiers = ["urgent"]
request_tokens = -1
request_cost_usd = 2000000.0
)",
                          "budget.toml");
  auto text = keys_of(res.errors);
  for (auto key : {"budget[0].butlers", "budget[0].channels", "budget[0].tiers",
                   "budget[0].request_tokens", "budget[0].request_cost_usd"})
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
}

TEST(budget_config, scripted_usage_keys_are_read) {
  auto res = parse_config(R"(
[[butler]]
name = "general"
[butler.runtime]
model = "scripted-large"
input_tokens = 12
tokens_per_turn = 30
cost_per_turn_usd = 0.002
stream_reply = true
)",
                          "scripted.toml");
  ASSERT_TRUE(res.settings) << keys_of(res.errors);
  auto& rt = res.settings->butlers.at(0).runtime;
  EXPECT_EQ(rt.model, "scripted-large");
  EXPECT_EQ(rt.input_tokens, 12u);
  EXPECT_EQ(rt.tokens_per_turn, 30u);
  EXPECT_DOUBLE_EQ(rt.cost_per_turn_usd, 0.002);
  EXPECT_TRUE(rt.stream_reply);
}

} // namespace
} // namespace butlers
