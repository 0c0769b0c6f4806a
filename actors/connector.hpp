#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/connector_metrics.hpp"
#include "runtime/connector_source.hpp"

namespace butlers {

/// What a connector is started with.
struct connector_params {
  connector_config cfg;
  /// The switchboard of the connector's group: where every record goes.
  switchboard_actor switchboard;
  /// Checkpoints are written through the writer and read through the
  /// reader, like every other row.
  inbox_writer_actor writer;
  db_reader_actor reader;
  node_context_ptr ctx;
  /// `http.max_body_bytes`: the largest envelope a source may submit.
  size_t max_envelope_bytes = 1 << 20;
  /// `switchboard.dedupe_window_s`, for the dedupe keys of what sources
  /// submit.
  uint32_t dedupe_window_s = 300;
  /// Where the connector's heartbeats go (null: none are sent), every
  /// `heartbeat_s` seconds (`connectors.heartbeat_s`; 0: none).
  connector_stats_actor stats;
  uint32_t heartbeat_s = 30;
  /// Where a source stores the attachments it fetches (its own
  /// connection; "" = none are fetched) and their caps (`[attachments]`).
  std::string database_url;
  attachment_limits attachments;
};

struct connector_state {
  static inline const char* name = "connector";
  connector_config cfg;
  switchboard_actor switchboard;
  connector_metrics metrics;
  /// Records sent to the switchboard and not yet answered.
  uint32_t in_flight = 0;
  /// The stop signal of the source; raised when this actor ends.
  std::shared_ptr<connector_stop> stop;
  /// Test only (actors/README.md "Connectors", fault point): with
  /// `BUTLERS_FAULT=connector_after_commit` (or `...=N`) the process
  /// SIGKILLs itself right after the first (N-th) commit this connector
  /// sees, before the webhook or the source hears of it: the window between
  /// a commit and its acknowledgement. Read once at spawn; 0 = off.
  uint32_t kill_after_commits = 0;
  /// Commits seen, for `kill_after_commits`.
  uint32_t commits = 0;
  /// Heartbeats: where they go (null: none), how often, and the
  /// instance they report (a new one per spawn: counters start over).
  connector_stats_actor stats;
  uint32_t heartbeat_s = 0;
  std::string instance_id;
  std::chrono::steady_clock::time_point started;
};

/// Sends the connector's `connector.heartbeat.v1` (its counters, healthy
/// while its source runs) through the heartbeat queue, the same path as
/// POST /v1/connectors/heartbeat, and schedules the next one
/// (actors/connector_heartbeat.cpp).
void send_connector_heartbeat(
  connector_actor::stateful_pointer<connector_state> self);

/// The fault point of `connector_state::kill_after_commits` as
/// `BUTLERS_FAULT` (null: unset) says: 0 (off), 1 for
/// `connector_after_commit`, N for `connector_after_commit=N`.
uint32_t connector_fault_commits(const char* fault);

/// A connector (see `connector_actor`). Starts the source of its type, if
/// it has one (`make_connector_source`), on a `connector_runner`.
connector_actor::behavior_type connector(
  connector_actor::stateful_pointer<connector_state> self,
  connector_params params);

/// Runs `source` against `sink` until the sink's stop signal is raised or
/// the source gives up; an exception is logged and counted as an error,
/// and the source runs again after a backoff (1 s doubling to 60 s).
/// Spawn detached.
connector_runner_actor::behavior_type connector_runner(
  connector_runner_actor::pointer self, std::string name,
  std::shared_ptr<connector_source> source,
  std::shared_ptr<connector_sink> sink, connector_metrics metrics);

/// The sink a connector's source submits through: parses and checks each
/// envelope like POST /v1/ingest, then asks the connector (blocking the
/// source's thread, never an actor's). Exposed for tests.
std::shared_ptr<connector_sink> make_connector_sink(
  caf::actor_system& sys, connector_actor hdl, const connector_params& p,
  std::shared_ptr<connector_stop> stop);

} // namespace butlers
