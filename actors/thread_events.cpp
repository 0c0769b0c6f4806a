#include "actors/thread_events.hpp"

#include "runtime/json.hpp"
#include "runtime/threads.hpp"

namespace butlers::thread_events {

thread_live live_of(thread_ptr self) {
  thread_live out;
  auto& st = self->state;
  if (!st.act)
    return out;
  auto& act = *st.act;
  for (auto& r : act.runs)
    out.active.push_back(
      {r.run_id, r.butler, r.work_id.empty() ? "accepted" : "running"});
  for (auto& r : act.stopping)
    out.active.push_back({r.run_id, r.butler, "cancelling"});
  for (auto& w : act.collecting)
    out.queued.push_back({w.run_id(), w.butler(), "collecting"});
  for (auto& q : act.queued)
    out.queued.push_back({q.run_id, q.butler, "queued"});
  out.pending_turns = static_cast<uint32_t>(act.turns.size());
  return out;
}

void publish_summary(thread_ptr self) {
  auto& st = self->state;
  auto& hub = st.env->hub;
  if (!hub || !hub->wants_summary())
    return;
  auto live = live_of(self);
  std::string active = "[";
  for (auto& r : live.active) {
    if (r.state == "cancelling")
      continue;
    if (active.size() > 1)
      active += ',';
    active += json::quote(r.run_id);
  }
  active += ']';
  size_t queued = st.act ? st.act->queued.size() : 0;
  std::string body = R"({"thread_id":)" + json::quote(st.id) + ","
                     + digest_members(st.digest,
                                      run_status_of(live, st.digest.run_state))
                     + R"(,"active_run_ids":)" + active + R"(,"queued_runs":)"
                     + std::to_string(queued) + R"(,"updated_at_unix_ms":)"
                     + std::to_string(unix_now_ms()) + "}";
  hub->publish_summary(st.id, sse_frame("summary", body));
}

void publish(thread_ptr self, const char* type, const std::string& body,
             std::string_view id) {
  auto& st = self->state;
  auto& hub = st.env->hub;
  if (!hub || !hub->wants_thread(st.id))
    return;
  hub->publish_thread(st.id, sse_frame(type, body, id));
}

void publish_message(thread_ptr self, int64_t cursor,
                     const std::string& message_id, const char* role,
                     const std::string& kind, const std::string& run_id,
                     const std::string& butler, const std::string& body) {
  auto& st = self->state;
  if (!st.env->hub || !st.env->hub->wants_thread(st.id))
    return;
  auto c = std::to_string(cursor);
  publish(self, "transcript",
          R"({"thread_id":)" + json::quote(st.id) + R"(,"cursor":)" + c
            + R"(,"message_id":)" + json::quote(message_id) + R"(,"role":")"
            + role + R"(","kind":)" + json::quote(kind) + R"(,"run_id":)"
            + json::quote(run_id) + R"(,"butler":)" + json::quote(butler)
            + R"(,"body":)" + json::quote(body) + "}",
          c);
}

void publish_run(thread_ptr self, const std::string& run_id,
                 const std::string& butler, const std::string& state,
                 const std::string& error) {
  auto& st = self->state;
  if (st.env->hub && st.env->hub->wants_thread(st.id)) {
    std::string body = R"({"thread_id":)" + json::quote(st.id) + R"(,"run_id":)"
                       + json::quote(run_id) + R"(,"butler":)"
                       + json::quote(butler) + R"(,"state":)"
                       + json::quote(state);
    if (!error.empty())
      body += R"(,"error":)" + json::quote(error);
    publish(self, "run", body + "}");
  }
  publish_summary(self);
}

} // namespace butlers::thread_events
