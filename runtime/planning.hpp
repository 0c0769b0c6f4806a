#pragma once

// How a request becomes a stored plan (spec 001 §6): the rules router's plan
// (an empty message goes to general whole), hard policy, and the statement
// that stores the plan with the dispatches that start its fanout.

#include <optional>
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

/// A claim and a plan store sent to the writer together (one commit when
/// they share a batch), answered in either order: the fanout starts once
/// both are in, and every other end is reported once.
class claim_and_plan {
 public:
  enum class outcome {
    /// Not everything needed has answered yet.
    waiting,
    /// Not ours (or the claim failed): the row stays `accepted` or with its
    /// holder; the cold path or the holder takes it.
    not_ours,
    /// Claimed but not planned: the lease expires and the cold path plans
    /// it again.
    plan_failed,
    /// Claimed and planned: start the fanout.
    ready,
  };

  /// The claim's answer: the claim when it was granted, else none.
  void claimed(std::optional<claim_result> claim) {
    claim_known_ = true;
    claim_ = std::move(claim);
  }

  /// The claim was refused or failed. (Not `claimed(std::nullopt)`: GCC 12
  /// at -O1 takes the empty optional's payload for uninitialized.)
  void unclaimed() {
    claim_known_ = true;
    claim_.reset();
  }

  void planned(named_result rows) {
    rows_ = std::move(rows);
  }

  void plan_failed(std::string error) {
    plan_error_ = error.empty() ? "storage error" : std::move(error);
  }

  /// What to do now (anything but `waiting` only once).
  outcome settle();

  claim_result& claim() {
    return *claim_;
  }

  const named_result& rows() const {
    return *rows_;
  }

  const std::string& plan_error() const {
    return plan_error_;
  }

 private:
  bool over_ = false;
  bool claim_known_ = false;
  std::optional<claim_result> claim_;
  std::optional<named_result> rows_;
  std::string plan_error_;
};

} // namespace butlers
