// A session's approval requests (runtime/approvals.md): the adapter's
// thread asks (approve_atom); the butler's policy answers at once, or the
// tool server puts the question to the run's starter and answers when they
// do or when it expires. The session never blocks meanwhile.

#include <spdlog/spdlog.h>

#include "actors/session.hpp"
#include "runtime/json.hpp"

namespace butlers {

void ask_approval(session_ptr self, std::string key, std::string tool,
                  std::string summary) {
  auto& st = self->state;
  if (st.finished)
    return;
  auto answer = [self](const std::string& key, bool yes) {
    auto& st = self->state;
    if (!st.finished && st.adapter)
      st.adapter->on_approval(key, yes);
  };
  auto& policy = st.params.approvals;
  auto mode = policy.decide(tool);
  if (mode == approval_mode::ask
      && (st.token.empty() || !st.params.tool_server)) {
    spdlog::warn("session {}: {} needs a yes but the session has no tools "
                 "to ask with (max_tool_calls 0); denied",
                 st.item.work_id, tool);
    mode = approval_mode::deny;
  }
  if (mode != approval_mode::ask) {
    spdlog::info("session {}: {} {} by the butler's policy", st.item.work_id,
                 tool, mode == approval_mode::allow ? "approved" : "denied");
    answer(key, mode == approval_mode::allow);
    return;
  }
  tool_call call;
  call.token = st.token;
  call.name = std::move(tool);
  call.arguments = R"({"summary":)" + json::quote(approval_summary(summary))
                   + R"(,"timeout_s":)" + std::to_string(policy.timeout_s)
                   + "}";
  // The tool server answers by the question's expiry at the latest.
  self
    ->request(st.params.tool_server, caf::infinite, approve_atom_v,
              std::move(call))
    .then(
      [answer, key](const tool_result& r) {
        answer(key, r.status == tool_status::ok && approval_granted(r.text));
      },
      [self, answer, key](const caf::error& err) {
        spdlog::warn("session {}: the approval request failed ({}); denied",
                     self->state.item.work_id, to_string(err));
        answer(key, false);
      });
}

} // namespace butlers
