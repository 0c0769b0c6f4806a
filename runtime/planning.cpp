#include "runtime/planning.hpp"

#include <cstdio>

#include "runtime/fanout.hpp"
#include "runtime/json.hpp"

namespace butlers {

using json::quote;

routing_plan rules_plan(const std::string& text,
                        const std::vector<registry_entry>& entries,
                        double confidence_threshold) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    routing_plan plan;
    plan.router = "rules";
    plan.fallback = true;
    plan.fallback_reason = "no_match: the message has no text";
    plan_segment seg;
    seg.segment_id = "seg-1";
    seg.butler = "general";
    seg.prompt = "(the message has no text)";
    seg.rationale = "empty message";
    plan.segments.push_back(std::move(seg));
    return plan;
  }
  return route_by_rules(text, entries, confidence_threshold);
}

size_t make_plan_statement(const inbox_ref& ref, const inbox_record& record,
                           const std::vector<routing_rule_config>& rules,
                           const std::string& fanout_mode, routing_plan& plan,
                           named_statement& out) {
  std::vector<routing_rule> policy;
  policy.reserve(rules.size());
  for (auto& r : rules)
    policy.push_back(routing_rule{r.channels, r.allow, r.deny});
  auto rerouted = apply_policy(plan, record.context.source_channel, policy);
  for (size_t i = 0; i < plan.segments.size(); ++i)
    plan.segments[i].segment_id = "seg-" + std::to_string(i + 1);
  fanout f;
  f.mode = fanout_mode;
  f.segments.resize(plan.segments.size());
  // The dispatches that start the fanout are stored with the plan.
  std::vector<bool> first(plan.segments.size(), false);
  for (auto i : f.first_dispatches())
    first[i] = true;
  std::string segments = "[";
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    auto& s = plan.segments[i];
    segments += (i ? "," : "");
    segments += R"({"segment_id":)" + quote(s.segment_id) + R"(,"ordinal":)"
                + std::to_string(i) + R"(,"butler":)" + quote(s.butler)
                + R"(,"prompt":)" + quote(s.prompt) + R"(,"dispatched":)"
                + (first[i] ? "true" : "false") + "}";
  }
  segments += "]";
  char conf[32];
  std::snprintf(conf, sizeof(conf), "%.4f", plan.confidence);
  out = named_statement{"fanout_plan_store",
                        {ref.request_id, std::to_string(ref.received_at_us),
                         plan.router, plan.fallback ? "true" : "false",
                         plan.fallback_reason, conf, f.mode, "all",
                         f.abort_policy(), record.policy_tier, to_json(plan),
                         segments}};
  return rerouted;
}

claim_and_plan::outcome claim_and_plan::settle() {
  if (over_ || !claim_known_)
    return outcome::waiting;
  if (!claim_) {
    over_ = true;
    return outcome::not_ours;
  }
  if (!plan_error_.empty()) {
    over_ = true;
    return outcome::plan_failed;
  }
  if (!rows_)
    return outcome::waiting;
  over_ = true;
  return outcome::ready;
}

} // namespace butlers
