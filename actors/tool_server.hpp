#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "actors/writer_client.hpp"
#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "runtime/tools.hpp"

namespace butlers {

/// What the tool server is made from.
struct tool_server_params {
  tool_settings cfg;
  /// This node's butlers (not the messenger): whose reminders it fires.
  std::vector<std::string> butlers;
  inbox_writer_actor writer;
  db_reader_actor reader;
  registry_actor registry;
};

struct tool_call_ctx;

/// A notify waiting for its delivery to end.
struct pending_notify {
  std::shared_ptr<tool_call_ctx> call;
  std::string delivery_id;
  std::string channel;
  std::string recipient;
  std::string intent;
  uint32_t sequence = 0;
};

struct tool_server_state {
  static inline const char* name = "tool_server";
  tool_server_params params;
  node_context_ptr ctx;
  tool_limits limits;
  /// Writes go out through this (few requests, batched).
  writer_client writes;
  /// Notifies whose delivery has not ended yet, by delivery (work) id.
  std::unordered_map<std::string, std::vector<pending_notify>> waiting;
  /// Tool calls under way (answered or not), bounded by
  /// `[tools] max_in_flight`.
  size_t in_flight = 0;
  /// A reminder sweep is out: one at a time.
  bool sweeping = false;
  // -- metrics ----------------------------------------------------------------
  counter* refused = nullptr;
  counter* reminders_fired = nullptr;
  histogram* duration = nullptr;
};

using tool_server_ptr = tool_server_actor::stateful_pointer<tool_server_state>;

/// The node's tool server (see `tool_server_actor`).
tool_server_actor::behavior_type tool_server(tool_server_ptr self,
                                             tool_server_params params,
                                             node_context_ptr ctx);

} // namespace butlers
