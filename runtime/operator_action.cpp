#include "runtime/operator_action.hpp"

#include "runtime/error.hpp"

namespace butlers {

const char* to_string(operator_verb x) {
  switch (x) {
    case operator_verb::replay: return "replay";
    case operator_verb::cancel: return "cancel";
    case operator_verb::force_complete: return "force_complete";
    case operator_verb::reroute: return "reroute";
  }
  return "?";
}

std::optional<operator_verb> parse_operator_verb(std::string_view path) {
  if (path == "replay")
    return operator_verb::replay;
  if (path == "cancel")
    return operator_verb::cancel;
  if (path == "force-complete")
    return operator_verb::force_complete;
  if (path == "reroute")
    return operator_verb::reroute;
  return std::nullopt;
}

caf::expected<named_statement> statement_for(const operator_action& x) {
  auto invalid = [](const char* what) {
    return caf::error{butlers_errc::validation_error, std::string{what}};
  };
  if (x.who.empty() || x.why.empty())
    return invalid("'who' and 'why' are required (audit)");
  auto& id = x.request_id;
  switch (x.verb) {
    case operator_verb::replay:
      return named_statement{"request_replay", {id, x.who, x.why}};
    case operator_verb::cancel:
      return named_statement{"request_cancel", {id, x.who, x.why}};
    case operator_verb::force_complete:
      if (x.state != "parsed" && x.state != "errored")
        return invalid("state must be 'parsed' or 'errored'");
      return named_statement{"request_force_complete",
                             {id, x.who, x.why, x.state}};
    case operator_verb::reroute:
      if (x.segment_id.empty() || x.butler.empty())
        return invalid("reroute needs segment_id and butler");
      return named_statement{"request_reroute",
                             {id, x.who, x.why, x.segment_id, x.butler}};
  }
  return invalid("unknown action");
}

} // namespace butlers
