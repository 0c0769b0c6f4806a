// The `[retention]` settings and the plan of a retention pass
// (runtime/retention.hpp), without a database.

#include <chrono>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/embedded.hpp"
#include "runtime/retention.hpp"

namespace butlers {
namespace {

TEST(Retention, defaults_keep_content_a_month_and_attachments_alike) {
  auto res = parse_config("", "node.toml");
  ASSERT_TRUE(res.settings);
  auto& r = res.settings->retention;
  EXPECT_TRUE(r.enabled);
  EXPECT_EQ(r.content_days, 30u);
  EXPECT_EQ(r.audit_days, 90u);
  EXPECT_EQ(r.usage_days, 400u);
  EXPECT_EQ(r.ledger_days, 90u);
  EXPECT_EQ(r.attachment_days, 30u);
  EXPECT_EQ(r.state_days, 365u);
  EXPECT_EQ(r.interval_s, 3600u);
  EXPECT_EQ(r.batch_rows, 25u);
  EXPECT_EQ(r.pause_ms, 20u);
  EXPECT_EQ(r.duty_pct, 20u);
}

TEST(Retention, old_attachments_key_still_sets_the_attachment_days) {
  auto res = parse_config("[attachments]\nretention_days = 7\n", "node.toml");
  ASSERT_TRUE(res.settings);
  EXPECT_EQ(res.settings->retention.attachment_days, 7u);
  EXPECT_EQ(res.settings->attachments.retention_days, 7u);
}

TEST(Retention, new_attachment_days_key_sets_the_attachment_store_too) {
  auto res = parse_config("[retention]\nattachment_days = 9\n", "node.toml");
  ASSERT_TRUE(res.settings);
  EXPECT_EQ(res.settings->retention.attachment_days, 9u);
  EXPECT_EQ(res.settings->attachments.retention_days, 9u);
}

TEST(Retention, both_attachment_keys_must_agree) {
  auto res = parse_config("[attachments]\nretention_days = 7\n"
                          "[retention]\nattachment_days = 9\n",
                          "node.toml");
  ASSERT_EQ(res.errors.size(), 1u);
  EXPECT_EQ(res.errors[0].key, "retention.attachment_days");
  EXPECT_EQ(res.errors[0].line, 4u);
  EXPECT_NE(res.errors[0].message.find("attachments.retention_days"),
            std::string::npos);
  auto same = parse_config("[attachments]\nretention_days = 9\n"
                           "[retention]\nattachment_days = 9\n",
                           "node.toml");
  EXPECT_TRUE(same.errors.empty());
}

TEST(Retention, out_of_range_and_unknown_keys_are_errors_naming_the_key) {
  auto res = parse_config("[retention]\ncontent_days = 4000\n"
                          "interval_s = 0\nbatch_rows = 0\ncontent = 3\n"
                          "duty_pct = 0\n",
                          "node.toml");
  std::set<std::string> keys;
  for (auto& e : res.errors)
    keys.insert(e.key);
  EXPECT_EQ(keys,
            (std::set<std::string>{"retention.content_days",
                                   "retention.interval_s",
                                   "retention.batch_rows", "retention.content",
                                   "retention.duty_pct"}));
}

TEST(Retention, zero_content_days_is_allowed) {
  auto res = parse_config("[retention]\ncontent_days = 0\naudit_days = 0\n",
                          "node.toml");
  ASSERT_TRUE(res.settings);
  EXPECT_EQ(res.settings->retention.content_days, 0u);
}

TEST(Retention, settings_survive_printing_and_parsing_again) {
  auto res = parse_config("[retention]\ncontent_days = 3\nledger_days = 5\n"
                          "pause_ms = 0\n",
                          "node.toml");
  ASSERT_TRUE(res.settings);
  auto back = parse_config(to_toml(*res.settings), "out.toml");
  ASSERT_TRUE(back.settings);
  EXPECT_EQ(back.settings->retention, res.settings->retention);
}

TEST(Retention, every_step_has_its_statement_and_the_days_of_its_class) {
  retention_config cfg;
  cfg.content_days = 1;
  cfg.audit_days = 2;
  cfg.usage_days = 3;
  cfg.ledger_days = 4;
  cfg.attachment_days = 5;
  cfg.state_days = 6;
  for (auto& s : retention_steps()) {
    EXPECT_NO_THROW(named_query(s.query)) << s.query;
    EXPECT_EQ(retention_days(cfg, s.cls), static_cast<uint32_t>(s.cls) + 1u)
      << s.query;
  }
}

TEST(Retention, a_step_repeats_while_a_batch_is_full_then_moves_on) {
  retention_config cfg;
  cfg.batch_rows = 10;
  retention_pass pass{cfg};
  auto first = pass.next();
  ASSERT_TRUE(first);
  EXPECT_STREQ(first->first.query, retention_steps()[0].query);
  retention_counts full{{{"message_inbox", "redact"}, 10},
                        {{"fanout_plans", "redact"}, 3}};
  pass.record(full);
  EXPECT_STREQ(pass.next()->first.query, retention_steps()[0].query);
  pass.record({{{"message_inbox", "redact"}, 4}});
  EXPECT_STREQ(pass.next()->first.query, retention_steps()[1].query);
  EXPECT_EQ((pass.totals().at({"message_inbox", "redact"})), 14u);
  EXPECT_EQ(pass.batches(), 2u);
  while (pass.next())
    pass.record({});
  EXPECT_EQ(pass.batches(), retention_steps().size() + 1);
}

TEST(Retention, the_pause_grows_with_the_batch_to_keep_the_duty_cycle) {
  using std::chrono::milliseconds;
  retention_config cfg;
  cfg.pause_ms = 20;
  cfg.duty_pct = 20;
  // A fast batch: the least pause.
  EXPECT_EQ(retention_pause(cfg, 1.0), milliseconds{20});
  // A 10 ms batch at 20 %: 40 ms of pause, so batches fill a fifth.
  EXPECT_EQ(retention_pause(cfg, 10.0), milliseconds{40});
  EXPECT_EQ(retention_pause(cfg, 2.5), milliseconds{20});
  EXPECT_EQ(retention_pause(cfg, 7.25), milliseconds{29});
  // 100 %: pause_ms alone, whatever the batch took.
  cfg.duty_pct = 100;
  EXPECT_EQ(retention_pause(cfg, 500.0), milliseconds{20});
  // Never more than a minute, never negative.
  cfg.duty_pct = 1;
  EXPECT_EQ(retention_pause(cfg, 10000.0), milliseconds{60000});
  cfg.pause_ms = 0;
  EXPECT_EQ(retention_pause(cfg, -3.0), milliseconds{0});
}

TEST(Retention, an_abandoned_pass_is_over) {
  retention_pass pass{retention_config{}};
  pass.abandon();
  EXPECT_FALSE(pass.next());
}

TEST(Retention, catalogue_names_each_table_once) {
  std::set<std::string> seen;
  for (auto& t : people_tables())
    EXPECT_TRUE(seen.insert(t.table).second) << t.table;
  for (auto& [table, why] : system_tables())
    EXPECT_TRUE(seen.insert(table).second) << table;
}

} // namespace
} // namespace butlers
