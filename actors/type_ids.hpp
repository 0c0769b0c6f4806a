#pragma once

// The one type-ID block of the project: every atom and message type, in one
// place, registered with the actor system by `register_types()`.

#include <caf/actor_system_config.hpp>
#include <caf/type_id.hpp>

#include "runtime/approvals.hpp"
#include "runtime/error.hpp"
#include "runtime/messages.hpp"
#include "runtime/operator_action.hpp"
#include "runtime/thread_list.hpp"
#include "runtime/threads.hpp"
#include "runtime/tools.hpp"
#include "runtime/worker_wire.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(butlers, caf::first_custom_type_id)

  // -- atoms (text: at most 10 characters) ------------------------------------

  CAF_ADD_ATOM(butlers, butlers, status_atom, "status")
  CAF_ADD_ATOM(butlers, butlers, append_atom, "append")
  CAF_ADD_ATOM(butlers, butlers, flush_atom, "flush")
  CAF_ADD_ATOM(butlers, butlers, connect_atom, "connect")
  CAF_ADD_ATOM(butlers, butlers, restart_atom, "restart")
  CAF_ADD_ATOM(butlers, butlers, ingest_atom, "ingest")
  CAF_ADD_ATOM(butlers, butlers, claim_atom, "claim")
  CAF_ADD_ATOM(butlers, butlers, complete_atom, "complete")
  CAF_ADD_ATOM(butlers, butlers, enqueue_atom, "enqueue")
  CAF_ADD_ATOM(butlers, butlers, scan_atom, "scan")
  CAF_ADD_ATOM(butlers, butlers, refill_atom, "refill")
  CAF_ADD_ATOM(butlers, butlers, write_atom, "write")
  CAF_ADD_ATOM(butlers, butlers, link_atom, "linkstate")
  CAF_ADD_ATOM(butlers, butlers, work_atom, "work")
  CAF_ADD_ATOM(butlers, butlers, route_atom, "route")
  CAF_ADD_ATOM(butlers, butlers, cancel_atom, "cancel")
  CAF_ADD_ATOM(butlers, butlers, done_atom, "done")
  CAF_ADD_ATOM(butlers, butlers, turn_atom, "turn")
  CAF_ADD_ATOM(butlers, butlers, timeout_atom, "timeout")
  CAF_ADD_ATOM(butlers, butlers, schedule_atom, "schedule")
  CAF_ADD_ATOM(butlers, butlers, deliver_atom, "deliver")
  CAF_ADD_ATOM(butlers, butlers, lookup_atom, "lookup")
  CAF_ADD_ATOM(butlers, butlers, list_atom, "list")
  CAF_ADD_ATOM(butlers, butlers, register_atom, "register")
  CAF_ADD_ATOM(butlers, butlers, exec_atom, "exec")
  CAF_ADD_ATOM(butlers, butlers, read_atom, "read")
  CAF_ADD_ATOM(butlers, butlers, retry_atom, "retry")
  CAF_ADD_ATOM(butlers, butlers, expire_atom, "expire")
  CAF_ADD_ATOM(butlers, butlers, replay_atom, "replay")
  CAF_ADD_ATOM(butlers, butlers, operate_atom, "operate")
  CAF_ADD_ATOM(butlers, butlers, hello_atom, "hello")
  CAF_ADD_ATOM(butlers, butlers, mark_atom, "mark")
  CAF_ADD_ATOM(butlers, butlers, circuit_atom, "circuit")
  CAF_ADD_ATOM(butlers, butlers, peer_atom, "peer")
  CAF_ADD_ATOM(butlers, butlers, local_atom, "local")
  CAF_ADD_ATOM(butlers, butlers, hosts_atom, "hosts")
  CAF_ADD_ATOM(butlers, butlers, steer_atom, "steer")
  CAF_ADD_ATOM(butlers, butlers, idle_atom, "idle")
  CAF_ADD_ATOM(butlers, butlers, retire_atom, "retire")
  CAF_ADD_ATOM(butlers, butlers, touch_atom, "touch")
  CAF_ADD_ATOM(butlers, butlers, run_atom, "run")
  CAF_ADD_ATOM(butlers, butlers, resume_atom, "resume")
  CAF_ADD_ATOM(butlers, butlers, delta_atom, "delta")
  CAF_ADD_ATOM(butlers, butlers, usage_atom, "usage")
  CAF_ADD_ATOM(butlers, butlers, worker_atom, "worker")
  CAF_ADD_ATOM(butlers, butlers, drain_atom, "drain")
  // connector health and statistics
  CAF_ADD_ATOM(butlers, butlers, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(butlers, butlers, rollup_atom, "rollup")
  CAF_ADD_ATOM(butlers, butlers, tool_atom, "tool")
  CAF_ADD_ATOM(butlers, butlers, snapshot_atom, "snapshot")
  CAF_ADD_ATOM(butlers, butlers, approve_atom, "approve")

  // -- message types
  // -----------------------------------------------------------

  CAF_ADD_TYPE_ID(butlers, (butlers::request_context))
  CAF_ADD_TYPE_ID(butlers, (butlers::db_status))
  CAF_ADD_TYPE_ID(butlers, (butlers::operator_action))
  CAF_ADD_TYPE_ID(butlers, (butlers::inbox_record))
  CAF_ADD_TYPE_ID(butlers, (butlers::append_result))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::append_result>))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::inbox_record>))
  CAF_ADD_TYPE_ID(butlers, (butlers::inbox_ref))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::inbox_ref>))
  CAF_ADD_TYPE_ID(butlers, (butlers::claim_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::completion))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_batch))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::work_item))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::work_item>))
  CAF_ADD_TYPE_ID(butlers, (butlers::work_op))
  CAF_ADD_TYPE_ID(butlers, (butlers::work_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::route_request))
  CAF_ADD_TYPE_ID(butlers, (butlers::route_response))
  CAF_ADD_TYPE_ID(butlers, (butlers::session_usage))
  CAF_ADD_TYPE_ID(butlers, (butlers::adapter_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::session_outcome))
  CAF_ADD_TYPE_ID(butlers, (butlers::butler_status))
  CAF_ADD_TYPE_ID(butlers, (butlers::registry_entry))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::registry_entry>))
  CAF_ADD_TYPE_ID(butlers, (butlers::named_statement))
  CAF_ADD_TYPE_ID(butlers, (butlers::named_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_request))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_reply))
  CAF_ADD_TYPE_ID(butlers, (butlers::cluster_hello))
  CAF_ADD_TYPE_ID(butlers, (std::vector<uint64_t>))
  CAF_ADD_TYPE_ID(butlers, (butlers::thread_turn))
  CAF_ADD_TYPE_ID(butlers, (butlers::turn_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::steer_input))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::steer_input>))
  CAF_ADD_TYPE_ID(butlers, (butlers::steer_applied))
  CAF_ADD_TYPE_ID(butlers, (butlers::worker_call))
  CAF_ADD_TYPE_ID(butlers, (butlers::worker_reply))
  CAF_ADD_TYPE_ID(butlers, (butlers::tool_call))
  CAF_ADD_TYPE_ID(butlers, (butlers::tool_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::thread_live))
  CAF_ADD_TYPE_ID(butlers, (butlers::approval_mail))

CAF_END_TYPE_ID_BLOCK(butlers)

namespace butlers {

/// Registers every message type and the `butlers` error category with `cfg`.
/// Call once per actor_system_config, on every node.
void register_types(caf::actor_system_config& cfg);

} // namespace butlers
