#include <gtest/gtest.h>

#include "runtime/error.hpp"
#include "runtime/operator_action.hpp"

using namespace butlers;

namespace {

operator_action action(operator_verb verb) {
  operator_action x;
  x.verb = verb;
  x.request_id = "r-1";
  x.who = "ops";
  x.why = "stuck";
  return x;
}

std::string refusal(const operator_action& x) {
  auto stmt = statement_for(x);
  EXPECT_FALSE(stmt);
  return stmt ? std::string{} : message_of(stmt.error());
}

} // namespace

TEST(OperatorAction, PathSegmentsNameTheVerbs) {
  EXPECT_EQ(parse_operator_verb("force-complete"),
            operator_verb::force_complete);
  EXPECT_EQ(parse_operator_verb("replay"), operator_verb::replay);
  EXPECT_FALSE(parse_operator_verb("force_complete"));
  EXPECT_FALSE(parse_operator_verb("delete"));
}

TEST(OperatorAction, EveryActionIsAuditedWithWhoAndWhy) {
  auto x = action(operator_verb::cancel);
  x.why.clear();
  EXPECT_NE(refusal(x).find("'who' and 'why' are required"), std::string::npos);
}

TEST(OperatorAction, EachVerbHasItsStatementWithTheAuditTrail) {
  auto replay = statement_for(action(operator_verb::replay));
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->query, "request_replay");
  EXPECT_EQ(replay->params, (std::vector<std::string>{"r-1", "ops", "stuck"}));
  auto x = action(operator_verb::reroute);
  x.segment_id = "seg-2";
  x.butler = "health";
  auto reroute = statement_for(x);
  ASSERT_TRUE(reroute);
  EXPECT_EQ(reroute->query, "request_reroute");
  EXPECT_EQ(reroute->params.back(), "health");
}

TEST(OperatorAction, ForceCompleteTakesOnlyATerminalState) {
  auto x = action(operator_verb::force_complete);
  x.state = "progress";
  EXPECT_NE(refusal(x).find("state must be 'parsed' or 'errored'"),
            std::string::npos);
  x.state = "errored";
  EXPECT_TRUE(statement_for(x));
}

TEST(OperatorAction, RerouteNeedsASegmentAndAButler) {
  auto x = action(operator_verb::reroute);
  x.segment_id = "seg-1";
  EXPECT_NE(refusal(x).find("reroute needs segment_id and butler"),
            std::string::npos);
}
