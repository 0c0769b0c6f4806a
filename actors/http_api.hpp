#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/http_render.hpp"
#include "runtime/http_router.hpp"

namespace butlers {

class attachment_store;
class blocking_pool;
class counter;
struct thread_turn;

/// One request as an API handler sees it: what the HTTP server parsed. The
/// views live as long as the handler runs.
struct http_call {
  /// The method's name as sent ("GET", "DELETE", ...).
  std::string_view method;
  std::string_view path;
  /// The part after `?`.
  std::string_view query;
  std::optional<std::string_view> content_type;
  std::string_view body;
  /// Any request header by name (case-insensitive); unset where a caller
  /// has none to offer (tests), which reads as absent.
  std::function<std::optional<std::string_view>(std::string_view)> header;

  /// Header `name`, if the request has it.
  std::optional<std::string_view> header_value(std::string_view name) const {
    return header ? header(name) : std::nullopt;
  }
};

/// How an API handler answers its request.
class http_responder {
 public:
  virtual ~http_responder() = default;

  /// Answers at once, on the HTTP thread.
  virtual void now(http_reply r) = 0;

  /// Puts the request in flight (a drain waits for it) and returns what
  /// answers it, once, from any thread.
  virtual std::function<void(http_reply)> later() = 0;
};

/// The endpoints of the API that answer through an actor's request/response
/// (operator, butler, thread and run endpoints): checks, then one round
/// trip through the bridge (see http_bridge.hpp). The HTTP server routes to
/// them (see its table); nothing here knows restinio, so they run in tests
/// over fake actors.
class http_api {
 public:
  /// `settings` and `ctx` outlive this.
  http_api(caf::actor_system& sys, const node_settings& settings,
           node_context_ptr ctx);

  // -- the actors behind the API (null while their group restarts) ---------

  switchboard_actor switchboard() const;
  registry_actor registry() const;
  thread_directory_actor directory() const;
  db_reader_actor reader() const;

  // -- requests (operator API) ----------------------------------------------

  /// GET /v1/requests/{id}: the request reconstructed (received, plan,
  /// subrequests, work items, transitions, dead letters, operator actions).
  void request_inspect(const http_call& call, http_responder& out,
                       const path_params& p);

  /// POST /v1/requests/{id}/{action} with action replay | cancel |
  /// force-complete | reroute: an audited operator action (409 when the
  /// request's state does not allow it).
  void request_operate(const http_call& call, http_responder& out,
                       const path_params& p);

  /// Anything else under /v1/requests/ (`rest`): a bad id is named before
  /// the route.
  void request_other(const http_call& call, http_responder& out,
                     const path_params& p);

  /// POST /v1/operator/forget `{"sender","who","why","batch"?}`: erases
  /// everything the sender wrote (runtime/forget.md), on a thread of its
  /// own; 200 with the report, 400 naming the bad field, 429 while another
  /// forget runs, 503 without a database or when it failed midway.
  void operator_forget(const http_call& call, http_responder& out,
                       const path_params& p);

  // -- butlers --------------------------------------------------------------

  /// GET /v1/butlers: the registry, one entry per (butler, node), so with
  /// the cluster each host's liveness shows (spec 001 §10.7).
  void butlers_list(const http_call& call, http_responder& out,
                    const path_params& p);

  /// POST /v1/butlers/{name}/route: route.execute with a route.v1 body (202
  /// + route_response.v1 `accepted`, or the error response with the status
  /// of its class).
  void butler_route(const http_call& call, http_responder& out,
                    const path_params& p);

  /// POST /v1/butlers/{name}/work/{work_id}/cancel: cancels a work item.
  void butler_work_cancel(const http_call& call, http_responder& out,
                          const path_params& p);

  /// Anything else on /v1/butlers or under it (`rest`): without a registry
  /// that is what the answer says.
  void butlers_other(const http_call& call, http_responder& out,
                     const path_params& p);

  // -- threads (spec 003) and runs ------------------------------------------

  /// POST /v1/threads/{id}/turns: start-or-steer.
  void thread_turn_post(const http_call& call, http_responder& out,
                        const path_params& p);

  /// POST /v1/threads/{id}/cancel: the thread's active and queued runs.
  void thread_cancel(const http_call& call, http_responder& out,
                     const path_params& p);

  /// GET /v1/threads?limit=N&cursor=C: a page of threads, newest first by
  /// their last message (read through the node's reader).
  void threads_list(const http_call& call, http_responder& out,
                    const path_params& p);

  /// GET /v1/threads/{id}: the thread's digest, its runs (from its live
  /// actor on this node, else from the database) and its last cursor.
  void thread_get(const http_call& call, http_responder& out,
                  const path_params& p);

  /// GET /v1/threads/{id}/transcript?after=CURSOR&limit=N: gap backfill.
  void thread_transcript(const http_call& call, http_responder& out,
                         const path_params& p);

  /// POST /v1/runs/{run_id}/cancel: an active or queued run.
  void run_cancel(const http_call& call, http_responder& out,
                  const path_params& p);

  /// POST /v1/runs/{run_id}/approvals/{approval_id}: the run's starter answers
  /// an approval question (runtime/approvals.md).
  void approval_post(const http_call& call, http_responder& out,
                     const path_params& p);

 private:
  /// Answers 200 with what `stmt` reads through the node's reader: the
  /// first column of its first row, a JSON document built in SQL. No row
  /// (or a failed read) is answered `missing_code` with `missing`.
  void read(http_responder& out, named_statement stmt,
            butlers_errc missing_code, std::string missing);

  std::chrono::milliseconds timeout() const;

  /// Stores the files of thread turns (`attachments[]`) before the turn
  /// goes to its thread; fills `turn.attachments`. Blocks (libpq) on the
  /// HTTP thread, bounded by the body limit and the store's connections.
  /// An error reply when they are refused or not stored.
  std::optional<http_reply> store_turn_files(const http_call& call,
                                             thread_turn& turn);

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
  /// Where turns' files go (null without a database).
  std::shared_ptr<attachment_store> attachments_;
  /// Turns refused for a file over a cap.
  counter* attachments_refused_ = nullptr;
  /// Where forgets run: one at a time, off the HTTP threads and the
  /// scheduler (a forget blocks on its own connection for as long as the
  /// sender's data takes).
  std::shared_ptr<blocking_pool> forget_pool_;
};

} // namespace butlers
