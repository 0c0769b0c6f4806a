#pragma once

// How a request becomes a stored plan (spec 001 §6): the rules router's plan
// (an empty message goes to general whole), hard policy, and the statement
// that stores the plan with the dispatches that start its fanout.

#include <string>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/messages.hpp"
#include "runtime/router.hpp"

namespace butlers {

/// The rules router's plan for `text` (general takes an empty message
/// whole: ingest.v1 allows an empty text, and there is nothing to split).
routing_plan rules_plan(const std::string& text,
                        const std::vector<registry_entry>& entries,
                        double confidence_threshold);

/// Applies hard policy (`[[router.rule]]`) to `plan`, numbers its segments
/// ("seg-1", ...: a CLI router's own ids could collide with the attempt
/// suffix) and makes the statement that stores it with the dispatches that
/// start the fanout (or finds the stored plan). Returns the segments the
/// policy retargeted.
size_t make_plan_statement(const inbox_ref& ref, const inbox_record& record,
                           const std::vector<routing_rule_config>& rules,
                           const std::string& fanout_mode, routing_plan& plan,
                           named_statement& out);

} // namespace butlers
