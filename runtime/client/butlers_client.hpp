#pragma once

// butlers_client: feeding a node from your own program (spec 004).
//
// Three classes of operation:
// - ordered: `submit` of an `ingest.v1` envelope (POST /v1/ingest) or a
//   thread turn (POST /v1/threads/{id}/turns). Each goes into the shard
//   queue its key hashes to (FNV-1a % shards); one worker per shard sends
//   them one at a time, so operations of one key reach the node in
//   submission order (FIFO per key) while keys of other shards proceed in
//   parallel. `submit` answers at once with an `enqueue_ack` or a typed
//   error; what happens later is reported through `on_failure`, to
//   `await_consistency` and by `close`.
// - direct reads: `inspect_request`, `transcript`, `butlers` (unordered).
//
// An acknowledgement says what is durable and where failures surface:
// without a spool, "enqueued in this process"; with a spool, "fsynced to
// the spool file on this machine" (a restart replays it). A failed or
// undelivered operation is never dropped silently: it goes to `on_failure`
// and to the next `await_consistency` of its key, and `close` lists what it
// could not deliver.
//
// No CAF, no node headers: links libcurl and RapidJSON only.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace butlers::client {

using steady_time = std::chrono::steady_clock::time_point;

// -- transport ------------------------------------------------------------------

/// One HTTP exchange with the node, relative to its base URL.
struct request {
  std::string method = "POST";
  /// "/v1/ingest", "/v1/requests/ID", ...
  std::string path;
  /// JSON; empty for GET.
  std::string body;
};

/// What came back.
struct response {
  /// No complete answer (connect refused, timeout, reset, cancelled);
  /// `status` is 0 then.
  bool transport_error = false;
  /// A transport error that a retry cannot fix (a malformed URL).
  bool permanent = false;
  int status = 0;
  std::string body;
  /// The `Retry-After` header (delta seconds), when the node sent one.
  std::optional<std::chrono::milliseconds> retry_after;
  /// The transport's description of a transport error.
  std::string error;
};

/// The typed boundary between the client and the network; unit tests
/// implement it in memory.
class transport {
 public:
  virtual ~transport() = default;
  /// Blocking; called from the client's worker threads and from direct
  /// reads, concurrently. Must return soon after `cancel` becomes true
  /// (with transport_error).
  virtual response perform(const request& req, const std::atomic<bool>& cancel)
    = 0;
};

/// How the HTTP transport reaches the node.
struct http_options {
  /// Base URL, e.g. "http://127.0.0.1:8470".
  std::string url = "http://127.0.0.1:8470";
  /// Bearer token (the node's `http.token`); "" sends none.
  std::string token;
  /// Bound on one exchange.
  std::chrono::milliseconds timeout{30000};
  std::chrono::milliseconds connect_timeout{5000};
  /// Extra CA bundle (PEM) for https; "" = the system's.
  std::string ca_file;
  /// Idle connections kept for reuse.
  size_t max_idle_connections = 16;
};

/// The libcurl transport.
std::shared_ptr<transport> make_http_transport(http_options o);

// -- operations -----------------------------------------------------------------

enum class op_kind : uint8_t { ingest = 0, thread_turn = 1 };

/// One ordered operation, as queued and spooled.
struct operation {
  op_kind kind = op_kind::ingest;
  /// The ordering key.
  std::string key;
  /// Where it goes ("/v1/ingest", "/v1/threads/{id}/turns").
  std::string path;
  /// The JSON body, with its dedupe identity in place.
  std::string body;
  /// The dedupe identity the node deduplicates a resend by: the
  /// envelope's `control.idempotency_key` (or Telegram update / email
  /// Message-ID), a turn's `message_id`.
  std::string identity;
};

/// An `ingest.v1` envelope as an operation. The key is `key` when not
/// empty, else the conversation (`event.external_thread_id`), else the
/// sender (`sender.identity`). The envelope keeps its own dedupe identity
/// (telegram `external_event_id`, email Message-ID, `control.
/// idempotency_key`); for other channels without an idempotency key one is
/// added, `"evt:" + event.external_event_id`, so that a resend or a spool
/// replay is deduplicated by the node. Nullopt (and `error`) when the text
/// is not a JSON object with `event.external_event_id`.
std::optional<operation> ingest_operation(std::string_view envelope,
                                          std::string key, std::string* error);

/// A thread turn (POST /v1/threads/{thread_id}/turns).
struct turn {
  std::string thread_id;
  std::string text;
  /// The turn's identity; a random UUID when empty.
  std::string message_id;
  /// "steer" (the node's default), "queue", "interrupt", "reject"; "" omits.
  std::string mode;
  std::string butler;
  std::string expected_run_id;
};

/// A turn as an operation; the key is `key` when not empty, else the thread.
operation turn_operation(const turn& t, std::string key = {});

// -- results --------------------------------------------------------------------

/// `submit`'s acknowledgement: the operation is queued (and spooled, with a
/// spool) under `sequence`, unique and increasing within one client (and
/// across restarts on one spool).
struct enqueue_ack {
  std::string key;
  uint64_t sequence = 0;
  std::string status = "enqueued";
};

enum class submit_errc {
  /// The key's shard holds `queue_size` operations; nothing was queued.
  queue_full,
  /// `close` was called; nothing was queued.
  closed,
  /// Not a usable operation (no key, no path, a bad envelope).
  invalid,
  /// The spool could not be written; nothing was queued.
  spool,
};

const char* to_string(submit_errc e);

struct submit_result {
  std::optional<enqueue_ack> ack;
  /// Meaningful when `ack` is empty.
  submit_errc error = submit_errc::invalid;
  std::string message;
  explicit operator bool() const {
    return ack.has_value();
  }
};

enum class failure_reason {
  /// A non-retryable answer (4xx other than 429, 500, ...).
  rejected,
  /// Retryable answers (429, 503, 504, transport) `max_attempts` times.
  exhausted,
  /// `close` (or the destructor) ended it before an answer; with a spool it
  /// is replayed at the next start. The node may have stored it (an
  /// interrupted exchange): a replay is deduplicated.
  undelivered,
};

const char* to_string(failure_reason r);

/// An operation that did not become durable on the node.
struct op_failure {
  std::string key;
  uint64_t sequence = 0;
  std::string identity;
  failure_reason reason = failure_reason::rejected;
  /// The last answer's status, 0 for a transport error or none.
  int status = 0;
  int attempts = 0;
  /// The node's error body, or the transport's text.
  std::string message;
  /// True when it stays in the spool and is replayed at the next start.
  bool spooled = false;
};

/// `await_consistency`'s answer.
struct consistency {
  /// Every operation of the key submitted before the call has finished
  /// (durable or failed). False: the deadline came first.
  bool reached = false;
  /// The last sequence of the key at the call (0: none).
  uint64_t through = 0;
  /// The key's failures up to `through` not reported by an earlier call.
  std::vector<op_failure> failed;
};

/// `close`'s answer.
struct close_report {
  /// Every queued operation finished before the deadline.
  bool drained = false;
  /// What ended undelivered (also passed to `on_failure`).
  std::vector<op_failure> undelivered;
};

// -- options --------------------------------------------------------------------

/// Full-jitter exponential backoff: before retry n (n = 1 after the first
/// attempt) wait uniform[0, min(cap, base * 2^(n-1))], and at least the
/// node's `Retry-After` (itself bounded by `cap`).
struct retry_policy {
  std::chrono::milliseconds base{100};
  std::chrono::milliseconds cap{20000};
  /// Attempts in all, the first included (1 = no retry).
  int max_attempts = 8;
};

/// Called from the client's threads; keep them cheap and non-blocking.
struct metrics_hooks {
  /// An operation entered shard `shard`.
  std::function<void(size_t shard)> submitted;
  /// A submit was refused: the shard was full.
  std::function<void(size_t shard)> queue_full;
  /// An operation finished on `shard` after `took` (all attempts).
  std::function<void(size_t shard, std::chrono::nanoseconds took, bool ok)>
    run_duration;
  /// The shard's depth (queued + running) after each change.
  std::function<void(size_t shard, size_t depth)> queue_depth;
};

enum class log_level { debug, info, warn, error };

const char* to_string(log_level l);

/// One structured log event ("retry", "failed", "undelivered",
/// "spool_replayed", "close", ...). Views are valid during the call.
struct log_record {
  log_level level = log_level::info;
  std::string_view event;
  std::string_view key;
  uint64_t sequence = 0;
  int attempt = 0;
  int status = 0;
  std::chrono::milliseconds delay{0};
  std::string_view message;
};

struct options {
  /// Worker threads, one per shard queue.
  size_t shards = 4;
  /// Operations per shard (queued + running) before `queue_full`.
  size_t queue_size = 1000;
  retry_policy retry;
  /// Append-only spool file; "" = none. Opened (and replayed) by the
  /// constructor.
  std::string spool_path;
  /// Every failed or undelivered operation, once.
  std::function<void(const op_failure&)> on_failure;
  /// Every operation that became durable: its ack, the status (200/202)
  /// and the node's body.
  std::function<void(const enqueue_ack&, int status, const std::string& body)>
    on_delivered;
  metrics_hooks metrics;
  std::function<void(const log_record&)> log;
  /// Replaces the backoff wait (tests); the default waits on a condition
  /// that `close`'s deadline interrupts.
  std::function<void(std::chrono::milliseconds)> sleep_for;
  /// Seed of the jitter; 0 = random.
  uint64_t seed = 0;
};

// -- the client -----------------------------------------------------------------

class client {
 public:
  /// Starts the shard workers; with a spool, opens it (creating it), cuts a
  /// torn tail, and queues the operations it holds without a completion
  /// record, in order. Throws std::runtime_error when the spool cannot be
  /// opened or is corrupt before its tail.
  client(std::shared_ptr<transport> t, options o = {});
  /// `close` with a deadline of now: what is still queued is reported
  /// undelivered (and stays spooled).
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Queues `op` (FIFO behind earlier operations of its key); with a spool,
  /// after its record is fsynced. Never blocks on the network.
  submit_result submit(operation op);
  /// `ingest_operation` + `submit`.
  submit_result submit_ingest(std::string_view envelope, std::string key = {});
  /// `turn_operation` + `submit`.
  submit_result submit_turn(const turn& t, std::string key = {});

  /// Waits until every operation of `key` submitted before this call has
  /// finished, or `deadline`. Thread-safe; does not stop other submits.
  consistency await_consistency(const std::string& key, steady_time deadline);

  /// Refuses new submits, lets the workers drain until `deadline`, then
  /// interrupts what is left (an exchange in progress is cancelled) and
  /// reports it undelivered. Idempotent: later calls return an empty report.
  close_report close(steady_time deadline);

  /// GET /v1/requests/{id} (unordered, not retried).
  response inspect_request(const std::string& request_id);
  /// GET /v1/threads/{id}/transcript?after=&limit= (limit 0: the node's).
  response transcript(const std::string& thread_id,
                      const std::string& after = {}, int limit = 0);
  /// GET /v1/butlers.
  response butlers();

  /// The shard `key` goes to.
  size_t shard_of(std::string_view key) const;
  /// Queued + running operations of `shard`.
  size_t depth(size_t shard) const;
  /// Operations the spool gave back at start.
  size_t recovered() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace butlers::client
