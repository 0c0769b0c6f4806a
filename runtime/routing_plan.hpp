#pragma once

// A routing plan: what a router (runtime/router.hpp, runtime/cli_router.hpp)
// makes of one request, and its router_plan.v1 form (spec 001 §6).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace butlers {

/// One part of a plan: a self-contained prompt for one butler.
struct plan_segment {
  /// "seg-1", "seg-2", ... (pattern ^[A-Za-z0-9][A-Za-z0-9_.:-]*$).
  std::string segment_id;
  /// A routable registry name, or "general".
  std::string butler;
  /// What the butler receives.
  std::string prompt;
  /// [start, end] sentence indices (of `split_sentences`), inclusive.
  std::vector<std::pair<uint32_t, uint32_t>> sentence_spans;
  /// [start, end) byte offsets into the text.
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  /// Why this part goes to this butler.
  std::string rationale;
};

/// A decomposition of one request.
struct routing_plan {
  /// Never empty.
  std::vector<plan_segment> segments;
  /// The whole request went to `general` because nothing matched, the
  /// confidence was under the threshold, the router failed, or policy.
  bool fallback = false;
  /// Why, when fallback: "no_match", "low_confidence",
  /// "router_parse_failure", "router_failure" or "policy", optionally
  /// followed by a colon and free text, e.g.
  /// "router_parse_failure: #/segments/0/butler unknown butler 'x'".
  std::string fallback_reason;
  /// Share of the text the router placed with confidence, 0..1.
  double confidence = 0;
  /// "rules" or "cli".
  std::string router;
};

/// Renders the plan as a valid router_plan.v1 document (JSON text), the form
/// the switchboard persists as the decomposition. The schema has no room for
/// `fallback`, `fallback_reason`, `confidence` or `router`: callers record
/// those beside it. Empty span and offset lists and an empty rationale are
/// left out. A plan is only valid if every prompt is non-empty, so a text
/// without a single byte must not be routed.
std::string to_json(const routing_plan& p);

} // namespace butlers
