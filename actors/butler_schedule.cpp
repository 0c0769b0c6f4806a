#include <chrono>
#include <optional>

#include <spdlog/spdlog.h>

#include "actors/butler.hpp"
#include "runtime/route.hpp"
#include "runtime/tools.hpp"

// The schedules of a butler (`[[butler.schedule]]`): fire times the same on
// every node, one work item per (butler, schedule, fire time), catch-up.

namespace butlers {

namespace {

/// The first fire time of schedule `i` after `t` (every_s: the next
/// multiple of the period since the epoch, the same on every node);
/// nullopt when it never fires.
std::optional<std::chrono::system_clock::time_point> fire_after(
  butler_ptr self, uint32_t i, std::chrono::system_clock::time_point t) {
  auto& st = self->state;
  auto& sch = st.params.cfg.schedules[i];
  if (sch.every_s > 0) {
    using namespace std::chrono;
    auto period = seconds{sch.every_s};
    auto since = duration_cast<seconds>(t.time_since_epoch());
    return system_clock::time_point{(since / period + 1) * period};
  }
  if (!st.crons[i])
    return std::nullopt;
  return st.crons[i]->next_after(t);
}

/// Arms schedule `i` for its next run.
void arm(butler_ptr self, uint32_t i) {
  auto& st = self->state;
  auto now = std::chrono::system_clock::now();
  auto next = fire_after(self, i, now);
  if (!next) {
    if (st.crons[i])
      spdlog::warn("butler {}: schedule {} never fires again",
                   st.params.cfg.name, st.params.cfg.schedules[i].name);
    return;
  }
  st.next_fire[i] = *next;
  self->delayed_send(self, *next - now, schedule_atom_v, i);
}

/// Starts schedule `i`'s session for fire time `at` through the same pool
/// as routed work. The request id derives from (butler, schedule, `at`):
/// every node hosting the butler fires, and the route inbox's unique key
/// keeps one work item.
void fire_at(butler_ptr self, uint32_t i,
             std::chrono::system_clock::time_point at) {
  auto& st = self->state;
  auto& cfg = st.params.cfg;
  auto& sch = cfg.schedules[i];
  auto at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                 at.time_since_epoch())
                 .count();
  route_envelope env;
  env.request_id = derived_uuid(cfg.name + "/" + sch.name + "@"
                                  + std::to_string(at_ms),
                                at_ms);
  env.received_at = rfc3339_utc(at_ms * 1000);
  if (sch.notify_to.empty()) {
    env.source_channel = "api";
    env.source_sender_identity = cfg.name + "/" + sch.name;
  } else {
    // The reply (and a notify without a recipient) goes to the target.
    auto colon = sch.notify_to.find(':');
    env.source_channel = sch.notify_to.substr(0, colon);
    env.source_sender_identity = sch.notify_to.substr(colon + 1);
  }
  env.source_endpoint_identity = "schedule";
  env.subrequest_id = env.request_id;
  env.segment_id = "schedule:" + sch.name;
  env.butler = cfg.name;
  env.tool = "route.execute";
  env.prompt = sch.prompt;
  route_request req{make_route_json(env), "schedule", cfg.name, {}};
  auto name = sch.name;
  auto log = [self, name](const route_response& r) {
    if (r.status == "error")
      spdlog::warn("butler {}: schedule {} skipped: {}: {}",
                   self->state.params.cfg.name, name, r.error_class,
                   r.error_message);
    else if (r.duplicate)
      spdlog::debug("butler {}: schedule {} already fired elsewhere",
                    self->state.params.cfg.name, name);
  };
  route_envelope parsed;
  if (auto rejected = admit(self, req, parsed))
    log(*rejected);
  else
    store(self, req, std::move(parsed), log);
}

/// `catch_up = "once"`: fires the latest fire time before now once (a
/// duplicate when it ran already).
void catch_up(butler_ptr self, uint32_t i) {
  auto now = std::chrono::system_clock::now();
  // Look back at most 8 days (a weekly cron), bounded in steps.
  auto t = now - std::chrono::hours{24 * 8};
  std::optional<std::chrono::system_clock::time_point> last;
  for (int steps = 0; steps < 20000; ++steps) {
    auto next = fire_after(self, i, t);
    if (!next || *next > now)
      break;
    last = next;
    t = *next;
  }
  if (last)
    fire_at(self, i, *last);
}
} // namespace

void fire(butler_ptr self, uint32_t i) {
  fire_at(self, i, self->state.next_fire[i]);
  arm(self, i);
}

/// The catch-ups of every schedule with `catch_up = "once"`, run once the
/// database answered (the first recovery): a fire stored before the writer
/// is connected would be lost until the next one.
void catch_up_all(butler_ptr self) {
  auto& schedules = self->state.params.cfg.schedules;
  for (uint32_t i = 0; i < schedules.size(); ++i)
    if (schedules[i].catch_up == "once")
      catch_up(self, i);
}

/// Parses the cron schedules (a bad one is logged and never fires) and
/// arms every schedule.
void init_schedules(butler_ptr self) {
  auto& st = self->state;
  auto& cfg = st.params.cfg;
  for (auto& sch : cfg.schedules) {
    if (sch.cron.empty()) {
      st.crons.emplace_back();
      continue;
    }
    std::string error;
    st.crons.push_back(cron_schedule::parse(sch.cron, &error));
    if (!st.crons.back())
      spdlog::error("butler {}: schedule {}: {}", cfg.name, sch.name, error);
  }
  st.next_fire.resize(cfg.schedules.size());
  for (uint32_t i = 0; i < cfg.schedules.size(); ++i)
    arm(self, i);
}

} // namespace butlers
