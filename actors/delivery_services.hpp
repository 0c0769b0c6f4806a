#pragma once

#include <memory>

#include <caf/actor_system.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/delivery_services.hpp"
#include "runtime/reaction_gate.hpp"

namespace butlers {

/// The messenger's `delivery_services` (runtime/delivery_services.hpp):
/// source messages read through the node's database reader
/// (`inbox_source_payload`), the outbound ledger written through the inbox
/// writer (`outbound_ledger_*`, ordered per request like every routing
/// statement). Each call is a blocking request from the calling thread (a
/// `caf::scoped_actor`): call it only from the messenger's delivery
/// threads, never from an actor. Counts every ledger decision in the node's
/// metrics: `butlers_messenger_sends_total{adapter,kind,outcome}` and
/// `butlers_messenger_redelivered_total`.
/// `gate` (may be null) orders the lifecycle reactions; the services own
/// the messenger's chat action ticker (counted in
/// `butlers_messenger_chat_actions_total{outcome}`).
std::shared_ptr<delivery_services> make_db_delivery_services(
  caf::actor_system& sys, inbox_writer_actor writer, node_context_ptr ctx,
  std::shared_ptr<reaction_gate> gate = nullptr);

} // namespace butlers
