// An in-process connector's heartbeat (actors/README.md "Connector health and
// statistics"): the envelope an out-of-process connector would POST, checked
// by the same parser and queued on the same actor.

#include <spdlog/spdlog.h>

#include "actors/connector.hpp"
#include "runtime/connector_stats.hpp"
#include "runtime/uuid.hpp"

namespace butlers {

namespace {

int64_t unix_us_now() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

heartbeat_report report_of(const connector_state& st) {
  heartbeat_report r;
  auto& m = st.metrics;
  r.connector_type = to_string(st.cfg.type);
  r.endpoint_identity = st.cfg.endpoint_identity.empty()
                          ? st.cfg.name
                          : st.cfg.endpoint_identity;
  r.instance_id = st.instance_id;
  bool up = m.up->value() != 0;
  r.state = up ? "healthy" : "error";
  if (!up)
    r.error_message = "the connector's source stopped (see the node's log)";
  r.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                             - st.started)
                 .count();
  r.counters = {{"messages_ingested", m.accepted->value()},
                {"messages_failed", m.errors->value() + m.invalid->value()},
                {"dedupe_accepted", m.deduped->value()},
                {"messages_received", m.received->value()},
                {"messages_refused", m.refused->value()},
                {"messages_ignored", m.ignored->value()}};
  r.sent_us = unix_us_now();
  return r;
}

} // namespace

void send_connector_heartbeat(
  connector_actor::stateful_pointer<connector_state> self) {
  auto& st = self->state;
  if (!st.stats || st.heartbeat_s == 0)
    return;
  if (st.instance_id.empty())
    st.instance_id = make_uuid_v7().to_string();
  auto parsed = parse_heartbeat(heartbeat_json(report_of(st)), unix_us_now());
  if (parsed.stmt) {
    auto name = st.cfg.name;
    self
      ->request(st.stats, local_call, heartbeat_atom_v, std::move(*parsed.stmt))
      .then(
        [name](bool queued) {
          if (!queued)
            spdlog::warn("connector {}: heartbeat dropped (queue full)", name);
        },
        [](const caf::error&) {});
  } else {
    spdlog::error("connector {}: its heartbeat is not valid: {}", st.cfg.name,
                  parsed.refusal.body);
  }
  self->delayed_send(self, std::chrono::seconds{st.heartbeat_s},
                     heartbeat_atom_v);
}

} // namespace butlers
