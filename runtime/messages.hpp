#pragma once

// Message types that cross actor boundaries (and, for remote actors, node
// boundaries): plain structs, so logic under runtime/ can build them without
// an actor system. Each has an inspect() and a type ID in
// actors/type_ids.hpp; test/unit/serialization_test.cpp round-trips every
// one of them through CAF's binary serializer.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "runtime/request_context.hpp"
#include "runtime/route.hpp"

namespace butlers {

/// Health of the database connection as the inbox writer sees it.
struct db_status {
  /// A connection is open and answered its last statement.
  bool connected = false;
  /// Every embedded migration is applied.
  bool migrated = false;
  /// The last connection or statement error, empty when healthy.
  std::string last_error;
  /// Transactions committed since start.
  uint64_t commits = 0;
  /// Rows written since start.
  uint64_t rows = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, db_status& x) {
  return f(caf::meta::type_name("db_status"), x.connected, x.migrated,
           x.last_error, x.commits, x.rows);
}

/// A validated ingest request on its way into `message_inbox`.
struct inbox_record {
  /// Context assigned at the ingest boundary (request_id is a UUIDv7).
  request_context context;
  /// The channel-aware dedupe key (spec 001 §10.2).
  std::string dedupe_key;
  /// The `ingest.v1` envelope as received (JSON text).
  std::string raw_payload;
  /// `payload.normalized_text`.
  std::string normalized_text;
  /// `policy_tier` of the envelope's control block.
  std::string policy_tier;
  /// Schema version of the stored payload (`ingest.v1`).
  std::string schema_version;
  /// `payload.attachments` as a JSON array of references
  /// (runtime/attachments.hpp), "" when the message has none.
  std::string attachments;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, inbox_record& x) {
  return f(caf::meta::type_name("inbox_record"), x.context, x.dedupe_key,
           x.raw_payload, x.normalized_text, x.policy_tier, x.schema_version,
           x.attachments);
}

/// The answer to appending an `inbox_record`: what is durable now.
struct append_result {
  /// The canonical request id: ours, or the original's for a duplicate.
  std::string request_id;
  /// True when the dedupe key was already stored (nothing new written).
  bool duplicate = false;
  /// In a batch reply only: a `butlers_errc` (0 = stored) and its message
  /// for a record that was not stored. A single append answers an error
  /// instead.
  uint8_t error_code = 0;
  std::string error_message;
  /// With a rate-limit refusal: seconds until the limit takes a message
  /// again (the HTTP answer's Retry-After); else 0.
  uint32_t retry_after_s = 0;
};

/// A stored (or deduplicated) record's result.
inline append_result stored_as(std::string request_id, bool duplicate) {
  append_result r;
  r.request_id = std::move(request_id);
  r.duplicate = duplicate;
  return r;
}

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, append_result& x) {
  return f(caf::meta::type_name("append_result"), x.request_id, x.duplicate,
           x.error_code, x.error_message, x.retry_after_s);
}

/// A reference to a stored inbox row: enough to find it in its partition.
struct inbox_ref {
  /// The canonical request id (UUIDv7 text).
  std::string request_id;
  /// `received_at` in Unix microseconds (the partition key).
  int64_t received_at_us = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, inbox_ref& x) {
  return f(caf::meta::type_name("inbox_ref"), x.request_id, x.received_at_us);
}

/// The answer to a claim: `accepted`/expired `progress` → `progress`.
struct claim_result {
  /// False when someone else holds the row or it is already terminal.
  bool claimed = false;
  /// The fencing token every later write for this claim must present.
  int64_t lease_token = 0;
  /// When claimed: the row's request context, normalized text and policy
  /// tier (raw_payload and dedupe_key are left empty).
  inbox_record record;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.claimed, x.lease_token,
           x.record);
}

/// A terminal transition of a claimed row: `parsed`, `errored` or
/// `cancelled`, applied only while the lease token still matches.
struct completion {
  inbox_ref ref;
  /// The token returned by the claim (fencing).
  int64_t lease_token = 0;
  /// `parsed`, `errored` or `cancelled`.
  std::string state;
  /// Error class of the taxonomy when `errored`, else empty.
  std::string error_class;
  /// Actionable message when `errored`, else empty.
  std::string error_message;
  /// What each subrequest came to (JSON array) and the response summary
  /// (JSON object), stored with the transition; empty: left as they are.
  std::string dispatch_outcomes;
  std::string response_summary;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion& x) {
  return f(caf::meta::type_name("completion"), x.ref, x.lease_token, x.state,
           x.error_class, x.error_message, x.dispatch_outcomes,
           x.response_summary);
}

/// A durable work item of a butler's route inbox (table `route_work`).
struct work_item {
  /// UUIDv7 of the item.
  std::string work_id;
  std::string butler;
  /// The root request (route.v1 request_context.request_id).
  std::string request_id;
  /// route.v1 subrequest.segment_id; "" when not decomposed.
  std::string segment_id;
  /// route.v1 subrequest.subrequest_id; "" when not decomposed.
  std::string subrequest_id;
  /// "route", "trigger", "schedule" or "switchboard".
  std::string trigger_source;
  /// Butler whose session asked for this work ("" when none).
  std::string origin_butler;
  /// The route.v1 envelope (JSON text).
  std::string envelope;
  /// Fencing token of the current lease.
  int64_t lease_token = 0;
  /// Sessions started for the item so far.
  int32_t attempts = 0;
  /// When it was accepted, Unix microseconds.
  int64_t created_at_us = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, work_item& x) {
  return f(caf::meta::type_name("work_item"), x.work_id, x.butler, x.request_id,
           x.segment_id, x.subrequest_id, x.trigger_source, x.origin_butler,
           x.envelope, x.lease_token, x.attempts, x.created_at_us);
}

/// What a `work_op` does to the route inbox.
enum class work_op_kind : uint8_t {
  /// Store `item` (leased to this node) or find its duplicate.
  append,
  /// A session starts on `item` (fenced by its token).
  start,
  /// Extend the lease of `item` (fenced).
  renew,
  /// Write the terminal `state` and `response` of `item` (fenced).
  finish,
  /// Recovery: lease up to `limit` open items of `item.butler` whose lease
  /// expired (and, with `own`, those this node held before a restart).
  lease,
};

/// Token use and cost a runtime reported for one session, cumulative over
/// its model calls (turns). Zero where the runtime reports nothing.
struct session_usage {
  /// The model that answered ("" when the runtime did not say).
  std::string model;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  /// Prompt-cache reads and writes (Anthropic, Claude Code, OpenAI
  /// `cached_tokens`); included in neither count above.
  uint64_t cache_read_tokens = 0;
  uint64_t cache_write_tokens = 0;
  /// US dollars when the runtime reports a cost (Claude Code's
  /// `total_cost_usd`), else 0 with `cost_known` false.
  double cost_usd = 0;
  bool cost_known = false;
  /// Model calls (HTTP requests, CLI turns) made so far.
  uint32_t calls = 0;

  /// Every token counted against a token budget.
  uint64_t total_tokens() const {
    return input_tokens + output_tokens + cache_read_tokens
           + cache_write_tokens;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_usage& x) {
  return f(caf::meta::type_name("session_usage"), x.model, x.input_tokens,
           x.output_tokens, x.cache_read_tokens, x.cache_write_tokens,
           x.cost_usd, x.cost_known, x.calls);
}

/// One write to the route inbox, batched with everything else the inbox
/// writer commits.
struct work_op {
  work_op_kind kind = work_op_kind::append;
  work_item item;
  /// Lease length for append, start, renew and lease.
  uint32_t lease_s = 30;
  /// finish: "ok", "error" or "cancelled".
  std::string state;
  /// finish: the route_response.v1 (JSON text).
  std::string response;
  /// finish: normalized error class, "" on success.
  std::string error_class;
  /// lease: most items to take.
  uint32_t limit = 0;
  /// append, lease: the holder the lease goes to ("NODE/INCARNATION").
  std::string owner;
  /// lease: also take items held by an earlier incarnation on this node
  /// (owner "NODE/..." other than `owner`), expired or not: that holder is
  /// gone, since this node restarted.
  bool own = false;
  /// append: the item's session starts as soon as it is stored (a slot is
  /// free): a new item is stored `running`, its first attempt counted, so
  /// no separate start write follows.
  bool start = false;
  /// finish: what the session's runtime reported, its prompt version (""
  /// for none), and the request's sender (the daily usage's key). Stored
  /// with the result when there is usage or a prompt version.
  session_usage usage;
  std::string prompt_version;
  std::string sender;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, work_op& x) {
  return f(caf::meta::type_name("work_op"), x.kind, x.item, x.lease_s, x.state,
           x.response, x.error_class, x.limit, x.own, x.start, x.usage,
           x.prompt_version, x.sender);
}

/// The outcome of a `work_op`.
struct work_result {
  /// append: stored or found; start, renew, finish: the token matched.
  bool ok = false;
  /// append: the item was already stored (`items[0]` is the original).
  bool duplicate = false;
  /// start: attempts so far.
  int32_t attempts = 0;
  /// append: the stored item; lease: the items now held.
  std::vector<work_item> items;
  /// append of a duplicate: the stored item's state and, when terminal,
  /// its route_response.v1 (JSON text).
  std::string state;
  std::string response;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, work_result& x) {
  return f(caf::meta::type_name("work_result"), x.ok, x.duplicate, x.attempts,
           x.items, x.state, x.response);
}

/// A named statement (`sql/queries/<query>.sql`) with text parameters: the
/// small tables of routing (plans, subrequest outcomes, dead letters, the
/// operator audit) are written with these, inside the writer's group
/// commit, and read with them through the reader. SQL maps '' to NULL with
/// NULLIF where a column is nullable.
struct named_statement {
  named_statement() = default;
  named_statement(std::string q, std::vector<std::string> ps,
                  std::string k = {})
    : query(std::move(q)), params(std::move(ps)), key(std::move(k)) {
    // nop
  }

  std::string query;
  std::vector<std::string> params;
  /// Orders the statement: the inbox writer commits statements (and other
  /// writes) with the same key in submission order. "" = the first
  /// parameter (the request id of every routing statement).
  std::string key;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, named_statement& x) {
  return f(caf::meta::type_name("named_statement"), x.query, x.params, x.key);
}

/// The rows a named statement returned, as text (NULL as "").
struct named_result {
  /// False when the statement failed on its own (isolated from the batch).
  bool ok = false;
  std::vector<std::vector<std::string>> rows;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, named_result& x) {
  return f(caf::meta::type_name("named_result"), x.ok, x.rows);
}

/// Everything one transaction of the inbox writes (a group commit).
struct write_batch {
  std::vector<inbox_record> appends;
  std::vector<inbox_ref> claims;
  std::vector<completion> completions;
  std::vector<work_op> work;
  std::vector<named_statement> named;
  size_t size() const {
    return appends.size() + claims.size() + completions.size() + work.size()
           + named.size();
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch& x) {
  return f(caf::meta::type_name("write_batch"), x.appends, x.claims,
           x.completions, x.work, x.named);
}

/// The outcome of each element of a `write_batch`, in the batch's order.
struct write_result {
  /// An empty request_id marks an element that failed on its own (a
  /// statement error isolated by retrying the batch element by element).
  std::vector<append_result> appends;
  /// Unclaimed where someone else holds the row, it is terminal, or the
  /// element failed.
  std::vector<claim_result> claims;
  /// False where the lease token no longer matched (lease lost).
  std::vector<bool> completions;
  /// `ok` false (and no items) where the element failed.
  std::vector<work_result> work;
  std::vector<named_result> named;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_result& x) {
  return f(caf::meta::type_name("write_result"), x.appends, x.claims,
           x.completions, x.work, x.named);
}

/// Writes one actor hands the inbox writer in one request (see
/// `actors/writer_client.hpp`); each goes where it would have gone alone.
struct write_request {
  std::vector<named_statement> named;
  std::vector<work_op> work;
  std::vector<completion> completions;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_request& x) {
  return f(caf::meta::type_name("write_request"), x.named, x.work,
           x.completions);
}

/// The answer to a `write_request`, once every write in it has committed or
/// failed: results in the request's order. `errors` has one code per write
/// (named first, then work, then completions): 0 where the write answered,
/// else the `butlers_errc` it failed with (its result is then default),
/// explained by the `error_messages` entry at the same place.
struct write_reply {
  std::vector<named_result> named;
  std::vector<work_result> work;
  std::vector<bool> completions;
  std::vector<uint8_t> errors;
  std::vector<std::string> error_messages;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_reply& x) {
  return f(caf::meta::type_name("write_reply"), x.named, x.work, x.completions,
           x.errors, x.error_messages);
}

/// What a runtime adapter produced for one session.
struct adapter_result {
  bool ok = false;
  /// ok: the final answer.
  std::string text;
  /// failure: taxonomy class, message, and whether a retry may help.
  std::string error_class;
  std::string message;
  bool retryable = false;
  /// What the runtime reported about tokens and cost, in either case.
  session_usage usage;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, adapter_result& x) {
  return f(caf::meta::type_name("adapter_result"), x.ok, x.text, x.error_class,
           x.message, x.retryable, x.usage);
}

/// How a session ended, reported to its butler.
struct session_outcome {
  std::string work_id;
  /// The lease token the session ran under (fencing).
  int64_t lease_token = 0;
  /// `ok` or `error` (the route_response.v1 of the work item).
  route_response response;
  /// "ok", "error" or "cancelled": the work item's terminal state.
  std::string state;
  /// What the user should see ("" for nothing): sent as notify.v1.
  std::string reply;
  /// Tokens and cost the session's runtime reported.
  session_usage usage;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_outcome& x) {
  return f(caf::meta::type_name("session_outcome"), x.work_id, x.lease_token,
           x.response, x.state, x.reply, x.usage);
}

/// A butler's pool and counters.
struct butler_status {
  std::string name;
  /// Sessions running, and the most allowed at once.
  uint32_t active = 0;
  uint32_t max_concurrent_sessions = 0;
  /// Work items waiting for a slot (including appends not yet committed),
  /// and the most allowed.
  uint32_t pending = 0;
  uint32_t max_pending = 0;
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  /// Writes refused because the lease had passed to another holder.
  uint64_t fenced = 0;
  /// Items taken over from a holder whose lease expired.
  uint64_t recovered = 0;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, butler_status& x) {
  return f(caf::meta::type_name("butler_status"), x.name, x.active,
           x.max_concurrent_sessions, x.pending, x.max_pending, x.accepted,
           x.rejected, x.succeeded, x.failed, x.fenced, x.recovered);
}

/// A butler as the registry lists it.
struct registry_entry {
  std::string name;
  std::string description;
  std::vector<std::string> triggers;
  std::vector<std::string> keywords;
  std::vector<std::string> capabilities;
  uint32_t max_concurrent_sessions = 1;
  /// Node hosting it.
  std::string node;
  /// "active", "stale" or "quarantined" (spec 001 §10.7).
  std::string status = "active";
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, registry_entry& x) {
  return f(caf::meta::type_name("registry_entry"), x.name, x.description,
           x.triggers, x.keywords, x.capabilities, x.max_concurrent_sessions,
           x.node, x.status);
}

/// What a node tells a peer about itself when they connect (and again
/// whenever its actor group restarts): its butlers and their handles, its
/// cluster actor (monitored for liveness) and, if it runs one, its
/// switchboard (where butler-only nodes send deliveries and outcomes).
struct cluster_hello {
  /// The node's name (`node.name`).
  std::string node;
  /// One entry per butler the node hosts, `handles` in the same order.
  std::vector<registry_entry> entries;
  std::vector<caf::actor> handles;
  /// The node's `cluster_actor`.
  caf::actor cluster;
  /// Its `switchboard_actor`; null on a butler-only node.
  caf::actor switchboard;
  /// Where it listens (`cluster.bind:cluster.port`); "" when it does not.
  /// Names the peer in log lines of the side that was dialled.
  std::string address;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_hello& x) {
  return f(caf::meta::type_name("cluster_hello"), x.node, x.entries, x.handles,
           x.cluster, x.switchboard, x.address);
}

} // namespace butlers
