#pragma once

// The protocol map: every typed actor interface of Butlers in one header, one
// short comment per handler, self-messages marked INTERNAL. Clients and tests
// include this without the implementations.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include "actors/type_ids.hpp"

namespace butlers {

/// The timeout of requests to actors of the same node (the writer, the
/// registry, the switchboard, the messenger): none. Each answers every
/// request, or CAF bounces it with `request_receiver_down` once the actor
/// is gone. A CAF timeout would cost its clock thread two wake-ups per
/// request (measured: about a fifth of the node's CPU at 2,000 messages/s,
/// with twenty such requests a message). Requests that may cross the
/// cluster (a butler on another node) keep a timeout.
constexpr auto local_call = caf::infinite;

// -- persistence
// ---------------------------------------------------------------

/// One database connection of the inbox writer. Runs detached (blocking
/// libpqxx): connects (applying migrations; connection 0 also maintains
/// partitions), reports up/down to its writer, reconnects with backoff, and
/// writes each batch it is given in one transaction.
using inbox_connection_actor = caf::typed_actor<
  /// Writes the batch in one transaction; `database_unavailable` when the
  /// connection broke (nothing of the batch was acknowledged).
  caf::replies_to<write_atom, write_batch>::with<write_result>,
  /// INTERNAL: (re)connects; re-armed with backoff on failure.
  caf::reacts_to<connect_atom>,
  /// INTERNAL: periodic health probe and partition maintenance.
  caf::reacts_to<caf::tick_atom>>;

/// The persistence actor: the only writer of inbox and lifecycle rows.
/// Cooperative and non-blocking itself, it owns `database.writer_connections`
/// connection actors and group-commits: requests accumulate while every
/// connection is busy, and the moment one is free it takes everything
/// pending (up to `database.max_batch`) as one transaction. Each caller is
/// answered only after the commit. With no connection up it answers
/// `database_unavailable` at once.
using inbox_writer_actor = caf::typed_actor<
  /// Reports connection and migration health.
  caf::replies_to<status_atom>::with<db_status>,
  /// Stores a validated request (or finds its duplicate); durable on reply.
  caf::replies_to<append_atom, inbox_record>::with<append_result>,
  /// The same for many records at once (the HTTP ingest path batches what
  /// one round of socket events parsed): one reply, in order, each record
  /// stored or carrying its error.
  caf::replies_to<append_atom,
                  std::vector<inbox_record>>::with<std::vector<append_result>>,
  /// Claims a row: `accepted` (or `progress` with an expired lease) →
  /// `progress` with a lease and a new fencing token.
  caf::replies_to<claim_atom, inbox_ref>::with<claim_result>,
  /// Moves a claimed row to a terminal state if its token still matches;
  /// replies false when the lease was lost.
  caf::replies_to<complete_atom, completion>::with<bool>,
  /// Writes to a butler's route inbox (append, start, renew, finish, lease),
  /// batched with the inbox writes; fenced ops answer `ok` false when the
  /// lease token no longer matches.
  caf::replies_to<work_atom, work_op>::with<work_result>,
  /// Runs a named statement (routing tables) in the next group commit.
  caf::replies_to<exec_atom, named_statement>::with<named_result>,
  /// Many of the writes above from one actor in one request, each placed
  /// as it would be alone; answered once all have committed or failed (see
  /// `actors/writer_client.hpp`).
  caf::replies_to<exec_atom, write_request>::with<write_reply>,
  /// INTERNAL: dispatches pending work (queued behind current messages).
  caf::reacts_to<flush_atom>,
  /// INTERNAL: connection `index` went up (true) or down (false, reason).
  caf::reacts_to<link_atom, uint32_t, bool, std::string>>;

/// Reads for inspection and operator endpoints, on a connection of its own
/// (detached: blocking libpqxx), never through the writer.
using db_reader_actor = caf::typed_actor<
  /// Runs a named read-only statement; `database_unavailable` when the
  /// connection is down.
  caf::replies_to<read_atom, named_statement>::with<named_result>>;

// -- switchboard
// ---------------------------------------------------------------

/// The cold path: every `scanner_interval_s` (and once at start) finds
/// `accepted` rows older than `scanner_grace_s` and `progress` rows whose
/// lease expired, and offers them to the switchboard. Reads only, detached,
/// with its own connection.
/// The retention of people's data (actors/retention.hpp,
/// runtime/retention.md): a pass at start, then one every `[retention]
/// interval_s`, batch by batch on a connection of its own.
using retention_actor = caf::typed_actor<
  /// INTERNAL: runs the next batch of the current pass, or starts a pass;
  /// a timer whose token is no longer the current one is ignored.
  caf::reacts_to<schedule_atom, uint64_t>>;

using inbox_scanner_actor = caf::typed_actor<
  /// INTERNAL: runs one sweep and schedules the next; a timer whose token
  /// is no longer the current one is ignored.
  caf::reacts_to<scan_atom, uint64_t>,
  /// From the switchboard: its queue overflowed and has drained; sweep now,
  /// from the oldest open row, without the grace period (what overflowed
  /// is stored and unclaimed).
  caf::reacts_to<refill_atom>>;

// -- shared sub-protocols
// -------------------------------------------------------

/// What a `route.execute` caller implements to hear a work item's outcome
/// (the `reply_to` of a `route_request`): the switchboard for its
/// subrequests, a thread for its runs, a butler for the delivery of its
/// session's reply, the tool server for a notify.
using route_listener_actor = caf::typed_actor<
  /// The butler's final route_response for a work item it accepted.
  caf::reacts_to<done_atom, route_response>>;

/// The ingest boundary: admission (`switchboard.max_in_flight`), durable
/// append through the writer, then the hot path: a bounded queue of
/// `switchboard.queue_capacity` drained by `switchboard.workers` concurrent
/// workers (the classification pool), each of which claims its row before
/// any work, plans it (router, policy), and sends its subrequests out under
/// the plan's fanout mode; outcomes come back as `done_atom`, and every
/// request ends parsed or errored (see actors/routing.cpp).
using switchboard_actor = caf::typed_actor<
  /// Accepts a validated request; replies once it is durable.
  caf::replies_to<ingest_atom, inbox_record>::with<append_result>,
  /// The same for a batch (one round of the HTTP server's socket events):
  /// one reply, in order, each record accepted, deduped or carrying its
  /// error (admission full, draining, database unavailable).
  caf::replies_to<ingest_atom,
                  std::vector<inbox_record>>::with<std::vector<append_result>>,
  /// Cold path: offers rows found by the scanner (context, text and tier);
  /// replies how many fit the queue, a prefix (the rest stay in the
  /// database for the next sweep).
  caf::replies_to<enqueue_atom, std::vector<inbox_record>>::with<uint32_t>,
  /// Delivery (spec 001 §10.1): hands a notify.v1 (JSON text) from a
  /// butler's session to the messenger as route.v1 with
  /// input.context.notify_request; answers the messenger's response.
  caf::replies_to<deliver_atom, std::string>::with<route_response>,
  /// Operator action on a request (replay | cancel | force_complete |
  /// reroute); answers a JSON result, or `conflict` when the request is not
  /// in a state that allows it. Every call is audited.
  caf::replies_to<operate_atom, operator_action>::with<std::string>,
  /// INTERNAL: a segment's backoff passed (request_id, segment_id).
  caf::reacts_to<retry_atom, std::string, std::string>,
  /// INTERNAL: every second, expires what is past its route timeout or
  /// wall-clock budget; every `lease_s / 3`, renews the inbox leases of
  /// requests in progress.
  /// Clean shutdown: releases the inbox leases of every request tracked
  /// here (fenced by token), renews none after; answers how many rows.
  caf::replies_to<drain_atom>::with<uint32_t>, caf::reacts_to<caf::tick_atom>,
  /// From the cluster: butler `name` has (true) or no longer has (false) a
  /// live host; without one its circuit is held open (fails fast) until a
  /// host returns.
  caf::reacts_to<circuit_atom, std::string, bool>,
  /// INTERNAL: the cold path introduces itself. When the hot queue has
  /// overflowed (backpressure, or a sweep it took only part of) and then
  /// drained, the switchboard sends it `refill` to sweep at once.
  caf::reacts_to<refill_atom,
                 inbox_scanner_actor>>::extend_with<route_listener_actor>;

// -- connectors
// ----------------------------------------------------------------

/// One per enabled `[[connector]]` on a node that runs the switchboard
/// (actors/README.md "Connectors"): the connector's in-flight limit
/// (`max_in_flight`), its metrics (`connector="<name>"`), and its way into
/// the canonical ingest path: every envelope it takes goes to the
/// switchboard's `ingest_atom`, the same admission, dedupe and "answer only
/// after the commit" as POST /v1/ingest. A polling source (Telegram
/// getUpdates, a JSONL file, a Maildir) runs beside it on a thread of its
/// own (`connector_runner_actor`); webhook and HTTP connectors are fed by
/// the HTTP server's connector routes.
using connector_actor = caf::typed_actor<
  /// Submits a validated record; answers once it is committed (or found
  /// to be a duplicate). `overload_rejected` when `max_in_flight` records
  /// of this connector wait for their commit already (counted `refused`);
  /// `database_unavailable`, `draining` or `target_unavailable` when
  /// nothing was stored (counted `errors`).
  caf::replies_to<ingest_atom, inbox_record>::with<append_result>,
  /// The same for a source's batch, in order (one request to the
  /// switchboard, so the batch keeps its order): records beyond
  /// `max_in_flight` carry `overload_rejected`, unstored ones their error.
  caf::replies_to<ingest_atom,
                  std::vector<inbox_record>>::with<std::vector<append_result>>,
  /// How many records of this connector wait for their commit.
  caf::replies_to<status_atom>::with<uint32_t>,
  /// INTERNAL: sends the connector's heartbeat (every
  /// `connectors.heartbeat_s`).
  caf::reacts_to<heartbeat_atom>>;

/// The thread a connector's source runs on (detached: it blocks). Started
/// by its connector, it runs the source until the connector stops (which
/// raises the source's stop signal) or the source gives up, then quits.
using connector_runner_actor = caf::typed_actor<
  /// INTERNAL: runs the source (sent once, to itself, at spawn).
  caf::reacts_to<run_atom>>;

// -- connector health and statistics
// -------------------------------------------------------------------

/// Connector heartbeats and statistics (actors/README.md "Connector health and
/// statistics"): the bounded queue between a heartbeat (POSTed, or sent by
/// an in-process connector) and its write through the inbox writer, and
/// the rollups, run by cron (hourly at minute 5, daily at 00:15 UTC) or on
/// request. One per switchboard node; never blocks (the writer does).
using connector_stats_actor = caf::typed_actor<
  /// Queues a heartbeat's `connector_heartbeat` statement for the writer:
  /// true once queued (not yet written), false when
  /// `connectors.heartbeat_queue` heartbeats wait already (counted
  /// dropped).
  caf::replies_to<heartbeat_atom, named_statement>::with<bool>,
  /// Runs the rollup `kind` (hourly, daily, fanout, retention) for the
  /// bucket containing `at` (RFC 3339); answers a JSON array of what each
  /// statement did once all committed (each also logged).
  caf::replies_to<rollup_atom, std::string, std::string>::with<std::string>,
  /// INTERNAL: the cron timer `token` fired.
  caf::reacts_to<schedule_atom, uint64_t>>;

// -- butlers
// -------------------------------------------------------------------

/// A butler (spec 000 §4.2, §4.4): accept-then-process `route.execute`, its
/// session pool (`max_concurrent_sessions`), a bounded pending queue
/// (`max_pending`) backed by leased rows of its route inbox, the self-trigger
/// guard, and its schedules. Nothing here is shared with other butlers, so
/// one busy butler never holds up another.
using butler_actor = caf::typed_actor<
  /// route.execute: validates the route.v1 envelope and the target tool,
  /// stores a work item and answers `accepted` once it is durable; or
  /// `error` with validation_error, overload_rejected (pending queue full,
  /// retryable; or a self-trigger while every slot is busy) or
  /// target_unavailable (database).
  caf::replies_to<route_atom, route_request>::with<route_response>,
  /// Cancels a work item: stops its session (a CLI's process group is
  /// killed) or drops it from the pending queue; true when it was here.
  caf::replies_to<cancel_atom, std::string>::with<bool>,
  /// Steer input for work item `work_id`: handed to its running session, or
  /// joined to its pending input while it waits for a slot; false when the
  /// item is not here.
  caf::replies_to<steer_atom, std::string, steer_input>::with<bool>,
  /// The pool and counters.
  caf::replies_to<status_atom>::with<butler_status>,
  /// INTERNAL: a session ended.
  caf::reacts_to<done_atom, session_outcome>,
  /// INTERNAL: renews held leases and recovers expired ones.
  caf::reacts_to<caf::tick_atom>,
  /// INTERNAL: reads back the result of work item `work_id`, whose write
  /// was in doubt.
  caf::reacts_to<caf::tick_atom, std::string>,
  /// INTERNAL: schedule `index` is due.
  caf::reacts_to<schedule_atom, uint32_t>,
  /// INTERNAL: the earliest running session's timeout may have passed.
  /// (Armed here, one at a time, not in each session: a delayed message
  /// keeps its receiver alive until it is due, and every timer wakes the
  /// clock thread.)
  caf::reacts_to<caf::timeout_atom>,
  /// A worker's recv (long poll), ack, nack or extend: external butlers
  /// only (actors/external_runner.hpp); others answer `conflict`.
  caf::replies_to<worker_atom, worker_call>::with<worker_reply>,
  /// INTERNAL: the external runner's timer (its generation; 0 = now).
  caf::reacts_to<worker_atom, uint64_t>,
  /// Clean shutdown: starts no more work and takes none, waits up to
  /// `wait` for running sessions, then releases every lease still held
  /// (waiting and running items) so that another holder takes them over
  /// at once; answers how many items were released.
  caf::replies_to<drain_atom, caf::timespan>::with<uint32_t>,
  /// INTERNAL: the drain's wait for running sessions is over.
  caf::reacts_to<drain_atom>>::extend_with<route_listener_actor>;

/// One running session: drives its runtime adapter turn by turn under the
/// session timeout and reports a `session_outcome` to its butler, then
/// quits. Blocking adapters (a CLI subprocess, a webhook) run on their own
/// thread and report back with `adapter_result`.
using session_actor = caf::typed_actor<
  /// Stops the run; the outcome is `cancelled`.
  caf::reacts_to<cancel_atom>,
  /// Steer input: kept in the session's inbox until the next safe boundary
  /// (before each runtime turn), where it is applied and reported to the
  /// session's observer (the thread) as `steer_applied`.
  caf::reacts_to<steer_atom, steer_input>,
  /// INTERNAL: the next scripted turn is due.
  caf::reacts_to<turn_atom>,
  /// From its butler: the session timeout passed.
  caf::reacts_to<caf::timeout_atom>,
  /// INTERNAL: a blocking adapter finished.
  caf::reacts_to<done_atom, adapter_result>,
  /// INTERNAL, from the adapter's thread: text the model has written so
  /// far (a delta). Coalesced and passed to the observer as `delta`.
  caf::reacts_to<delta_atom, std::string>,
  /// INTERNAL: the coalesced deltas are due to the observer.
  caf::reacts_to<flush_atom>,
  /// INTERNAL, from the adapter's thread: tokens and cost so far
  /// (cumulative), checked against the session's budget.
  caf::reacts_to<usage_atom, session_usage>,
  /// INTERNAL, from the adapter's thread: it applied steer inputs at a
  /// boundary (passed to the observer).
  caf::reacts_to<steer_atom, steer_applied>,
  /// INTERNAL, from the adapter's thread: the model wants tool `tool` with
  /// arguments `summary`, which needs a yes (key, tool, summary): decided
  /// by the butler's approval policy or put to the run's starter through
  /// the tool server; the answer goes to the adapter (`on_approval`).
  caf::reacts_to<approve_atom, std::string, std::string, std::string>>;

/// One run of the cli router, spawned detached per request (its process
/// wait blocks).
using cli_router_actor = caf::typed_actor<
  /// Waits for the CLI and answers what it said (once).
  caf::replies_to<caf::get_atom>::with<adapter_result>>;

/// The node's butler registry: name → the hosts of that butler (this node
/// and, with the cluster, remote nodes), each `active`, `stale` or
/// `quarantined` (spec 001 §10.7), with the entries routers read.
using registry_actor = caf::typed_actor<
  /// A live host of the butler named so (this node's first, else round
  /// robin); `target_unavailable` when there is none.
  caf::replies_to<lookup_atom, std::string>::with<butler_actor>,
  /// The same, passing over the given handle (a host whose transport just
  /// failed) while the butler has another live host: a retry goes
  /// elsewhere before the cluster has noticed a lost node.
  caf::replies_to<lookup_atom, std::string, butler_actor>::with<butler_actor>,
  /// Every butler, one entry per name: `node` lists its hosts, `status` is
  /// the best of theirs (routers read this).
  caf::replies_to<list_atom>::with<std::vector<registry_entry>>,
  /// Every host of every butler: one entry per (butler, node).
  caf::replies_to<hosts_atom>::with<std::vector<registry_entry>>,
  /// Adds or replaces a local butler.
  caf::reacts_to<register_atom, registry_entry, butler_actor>,
  /// Replaces every butler of remote node `node` (entries and handles in
  /// the same order, all `active`); answers the butlers whose routability
  /// changed (merged entries, as `list` shows them).
  caf::replies_to<register_atom, std::string, std::vector<registry_entry>,
                  std::vector<butler_actor>>::with<std::vector<registry_entry>>,
  /// Sets the status of every butler of node `node` (`active`, `stale`,
  /// `quarantined`); answers the butlers whose routability changed.
  caf::replies_to<mark_atom, std::string,
                  std::string>::with<std::vector<registry_entry>>>;

/// One per node with the cluster on (`[cluster]` port or peers): published
/// on the cluster port; dials every peer with exponential backoff; trades a
/// `cluster_hello` with each connected peer so that its butlers join the
/// local registry; monitors the peer and on loss marks its butlers `stale`,
/// then `quarantined` after `quarantine_after_ms`, holds open the circuits
/// of butlers left without a live host, and restores all on return. Every
/// transition is logged and counted.
using cluster_peer_actor = caf::typed_actor<
  /// A peer introduces itself; answers with this node's introduction.
  caf::replies_to<hello_atom, cluster_hello>::with<cluster_hello>>;

/// The cluster actor as its own node sees it: the peer protocol plus what
/// the supervisor and its own timers send.
using cluster_actor = cluster_peer_actor::extend<
  /// From the supervisor: the local group (re)started; this node's
  /// introduction and its new registry.
  caf::reacts_to<local_atom, cluster_hello, registry_actor>,
  /// INTERNAL: dial the peer at "host:port".
  caf::reacts_to<connect_atom, std::string>,
  /// INTERNAL: a dial finished: the peer, its cluster actor (null on
  /// failure) and what went wrong.
  caf::reacts_to<peer_atom, std::string, cluster_peer_actor, std::string>,
  /// INTERNAL: the quarantine TTL of a lost node (name, loss epoch) passed.
  caf::reacts_to<expire_atom, std::string, uint64_t>>;

// -- tools
// ---------------------------------------------------------------------

/// The node's tool server (runtime/tools.md): carries out
/// the tool calls of this node's sessions, whether they come over MCP
/// (actors/mcp_api.hpp), from an HTTP model's tool calling or from the
/// scripted runtime. Every call names its capability token; the scope
/// behind it decides what the call may touch. State and reminders go
/// through the writer and the reader, `notify` to the messenger (the call
/// answers once the delivery ended or `[tools] notify_wait_ms` passed),
/// `route_to` to the named butler. Also fires due reminders of this
/// node's butlers, each exactly once across the cluster.
using tool_server_actor = caf::typed_actor<
  /// Runs one tool call; never fails (errors are results).
  caf::replies_to<tool_atom, tool_call>::with<tool_result>,
  /// INTERNAL: sweeps due reminders, then re-arms.
  caf::reacts_to<caf::tick_atom>,
  /// INTERNAL: a notify's wait for its delivery is over (its work id).
  caf::reacts_to<timeout_atom, std::string>,
  /// A session asks for a yes (runtime/approvals.md): token, tool name and
  /// arguments `{"summary","timeout_s"}`. Stored, put to the run's
  /// starter, answered once decided: `text` is approved, denied or
  /// expired (a retried run finds its earlier question and its answer).
  caf::replies_to<approve_atom, tool_call>::with<tool_result>,
  /// A person answers (approval_id, run_id or "" for any, approve, caller
  /// identity "<channel>:<sender>"): ok with `{"approval_id","status"}`,
  /// else the reason not_found, forbidden (not the run's starter) or
  /// conflict (answered or expired already).
  caf::replies_to<approve_atom, std::string, std::string, bool,
                  std::string>::with<tool_result>,
  /// A mail that replies to a question's mail with `approve` or `deny`
  /// (the maildir connector's): ok when it answered (now or, the same
  /// mail, before), else the reason not_found (it names no question: an
  /// ordinary message), forbidden, conflict (decided already) or
  /// unavailable.
  caf::replies_to<approve_atom, approval_mail>::with<tool_result>,
  /// A Telegram callback_query Update (bot, Update JSON) from a connector:
  /// a press on a question's button; answered with answerCallbackQuery.
  caf::reacts_to<approve_atom, std::string, std::string>,
  /// INTERNAL: the question `approval_id` went out as Telegram message
  /// `message_id`.
  caf::reacts_to<approve_atom, std::string, int64_t>,
  /// INTERNAL: question `approval_id` reached its expiry.
  caf::reacts_to<expire_atom, std::string>>::extend_with<route_listener_actor>;

// -- threads
// -------------------------------------------------------------------

/// One conversation thread (spec 003): serializes its turns, keeps at most
/// one active run per butler, starts, steers, queues, interrupts, collects
/// (collect mode) and cancels runs, persists every user turn before it
/// applies it, and publishes thread and summary events. Created on demand by
/// the directory, retired by it when idle; everything it must remember is in
/// the database.
using thread_actor = caf::typed_actor<
  /// A user turn: start-or-steer (or queue, interrupt, reject, collect).
  caf::replies_to<turn_atom, thread_turn>::with<turn_result>,
  /// Cancels run `run_id`, or every active, queued and collecting run when
  /// ""; answers how many runs it cancelled.
  caf::replies_to<cancel_atom, std::string>::with<uint32_t>,
  /// Unix ms since which the thread has been idle (no run, queue or write);
  /// -1 when busy.
  caf::replies_to<idle_atom>::with<int64_t>,
  /// The directory removed this thread: quit.
  caf::reacts_to<retire_atom>,
  /// Its runs as they are now and its undecided turns (GET
  /// /v1/threads/{id}).
  caf::replies_to<snapshot_atom>::with<thread_live>,
  /// A run's session applied steer inputs at a boundary.
  caf::reacts_to<steer_atom, steer_applied>,
  /// Text a run's session streamed (work id, coalesced delta): published
  /// as a `delta` event.
  caf::reacts_to<delta_atom, std::string, std::string>,
  /// INTERNAL: the timer of the collect window of run `run_id` (at most
  /// one out per window).
  caf::reacts_to<timeout_atom, std::string>>::extend_with<route_listener_actor>;

/// Maps thread id → thread actor: spawns threads on demand, forwards to
/// them in arrival order, knows which thread runs which active run, and
/// retires idle threads (`threads.idle_timeout_s`) with a handshake that
/// never loses a turn: a thread is removed only when it reports idle and
/// nothing was forwarded to it since it was asked.
using thread_directory_actor = caf::typed_actor<
  /// Forwards a turn to its thread (spawned when absent).
  caf::replies_to<turn_atom, thread_turn>::with<turn_result>,
  /// Cancel: (thread_id, "") cancels a thread's runs; ("", run_id) the
  /// active run with that id. Answers how many runs were cancelled;
  /// `not_found` for a run no live thread holds.
  caf::replies_to<cancel_atom, std::string, std::string>::with<uint32_t>,
  /// Makes sure the thread exists (spawning it idle); answers the number of
  /// live threads.
  caf::replies_to<touch_atom, std::string>::with<uint64_t>,
  /// The number of live thread actors.
  caf::replies_to<status_atom>::with<uint64_t>,
  /// What the live actor of thread `id` knows (`not_found` when the thread
  /// has no actor on this node; none is spawned to answer).
  caf::replies_to<snapshot_atom, std::string>::with<thread_live>,
  /// A thread's run became active (true) or ended (false):
  /// (run_id, thread_id, active).
  caf::reacts_to<run_atom, std::string, std::string, bool>,
  /// INTERNAL: the idle sweep.
  caf::reacts_to<caf::tick_atom>,
  /// INTERNAL: wakes threads with runs left open (retried until the
  /// database answered).
  caf::reacts_to<resume_atom>>;

// -- lifecycle
// -----------------------------------------------------------------

/// Starts the node's long-lived actors as one group (writer, switchboard,
/// scanner), and restarts the group after any abnormal exit with jittered
/// exponential backoff. Children are linked: an exit sent to the supervisor
/// takes them down with it (the node's shutdown path).
using supervisor_actor = caf::typed_actor<
  /// INTERNAL: restarts the group after its backoff.
  caf::reacts_to<restart_atom>,
  /// Clean shutdown: drains every local butler (each waits up to `wait`
  /// for its running sessions), then has the switchboard release its
  /// inbox leases; answers how many leases were released.
  caf::replies_to<drain_atom, caf::timespan>::with<uint32_t>>;

} // namespace butlers
