#pragma once

// The one type-ID block of the project: every atom and message type, in one
// place, registered with the actor system by `register_types()`.

#include <caf/actor_system_config.hpp>
#include <caf/type_id.hpp>

#include "runtime/error.hpp"
#include "runtime/messages.hpp"

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
  CAF_ADD_ATOM(butlers, butlers, write_atom, "write")
  CAF_ADD_ATOM(butlers, butlers, link_atom, "linkstate")

  // -- message types
  // -----------------------------------------------------------

  CAF_ADD_TYPE_ID(butlers, (butlers::request_context))
  CAF_ADD_TYPE_ID(butlers, (butlers::db_status))
  CAF_ADD_TYPE_ID(butlers, (butlers::inbox_record))
  CAF_ADD_TYPE_ID(butlers, (butlers::append_result))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::inbox_record>))
  CAF_ADD_TYPE_ID(butlers, (butlers::inbox_ref))
  CAF_ADD_TYPE_ID(butlers, (std::vector<butlers::inbox_ref>))
  CAF_ADD_TYPE_ID(butlers, (butlers::claim_result))
  CAF_ADD_TYPE_ID(butlers, (butlers::completion))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_batch))
  CAF_ADD_TYPE_ID(butlers, (butlers::write_result))

CAF_END_TYPE_ID_BLOCK(butlers)

namespace butlers {

/// Registers every message type and the `butlers` error category with `cfg`.
/// Call once per actor_system_config, on every node.
void register_types(caf::actor_system_config& cfg);

} // namespace butlers
