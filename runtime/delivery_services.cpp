#include "runtime/delivery_services.hpp"

namespace butlers {

const char* to_string(outbound_kind x) {
  switch (x) {
    case outbound_kind::message: return "message";
    case outbound_kind::reaction: return "reaction";
    case outbound_kind::mail: return "mail";
  }
  return "message";
}

const char* to_string(ledger_state x) {
  switch (x) {
    case ledger_state::none: return "";
    case ledger_state::sending: return "sending";
    case ledger_state::sent: return "sent";
    case ledger_state::skipped: return "skipped";
    case ledger_state::dead: return "dead";
  }
  return "";
}

ledger_state ledger_state_of(std::string_view text) {
  for (auto x : {ledger_state::sending, ledger_state::sent,
                 ledger_state::skipped, ledger_state::dead})
    if (text == to_string(x))
      return x;
  return ledger_state::none;
}

const char* to_string(send_decision x) {
  switch (x) {
    case send_decision::send: return "send";
    case send_decision::resend: return "resend";
    case send_decision::skip: return "skip";
    case send_decision::supersede: return "supersede";
  }
  return "send";
}

send_decision decide_send(outbound_kind kind, ledger_state prior, int64_t rank,
                          int64_t top_rank) {
  if (prior == ledger_state::sent || prior == ledger_state::skipped)
    return send_decision::skip;
  // A later state of the same message is recorded: whoever sends it sets
  // the message's reaction; this one would only flicker (or, arriving last,
  // replace it).
  if (kind == outbound_kind::reaction && top_rank > rank)
    return send_decision::supersede;
  if (prior == ledger_state::sending)
    return send_decision::resend;
  return send_decision::send;
}

delivery_services::~delivery_services() = default;

reaction_gate* delivery_services::reaction_order() {
  return nullptr;
}

typing_ticker* delivery_services::typing() {
  return nullptr;
}

void delivery_services::count_overtaken(const std::string&) {
  // Nothing to count into.
}

} // namespace butlers
