#pragma once

// Operator actions on a request (spec 001 §15): replay, cancel, force a
// terminal state, or retarget a segment. Every action is audited (who, why).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "runtime/messages.hpp"

namespace butlers {

enum class operator_verb : uint8_t {
  replay,
  cancel,
  force_complete,
  reroute,
};

/// "replay", "cancel", "force_complete", "reroute".
const char* to_string(operator_verb x);

/// The verb of an HTTP path segment ("force-complete" for force_complete),
/// or none.
std::optional<operator_verb> parse_operator_verb(std::string_view path);

struct operator_action {
  operator_verb verb = operator_verb::replay;
  std::string request_id;
  /// The audit trail: required.
  std::string who;
  std::string why;
  /// force_complete: "parsed" or "errored".
  std::string state;
  /// reroute: the segment and its new butler.
  std::string segment_id;
  std::string butler;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, operator_action& x) {
  return f(caf::meta::type_name("operator_action"), x.verb, x.request_id, x.who,
           x.why, x.state, x.segment_id, x.butler);
}

/// The audited statement that carries out `x`, or a `validation_error`
/// naming what is missing.
caf::expected<named_statement> statement_for(const operator_action& x);

} // namespace butlers
