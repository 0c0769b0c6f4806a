#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "actors/writer_client.hpp"
#include "runtime/approvals.hpp"
#include "runtime/blocking_pool.hpp"
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
  /// The node's Telegram connectors: whose bot puts approval questions to
  /// people who wrote through it (runtime/approvals.md).
  std::vector<connector_config> telegram;
  /// `from` of the node's first smtp adapter that delivers email: the
  /// domain of the Message-ID an approval question's mail gets ("" when
  /// there is none: questions to people who wrote by mail are answered
  /// through the API only).
  std::string mail_from;
};

/// An approval question waiting for its answer (runtime/approvals.md).
struct approval_wait {
  std::string approval_id;
  std::string run_id;
  std::string butler;
  std::string tool;
  std::string summary;
  /// Who may answer: the run's starter.
  std::string channel;
  std::string endpoint;
  std::string sender;
  std::string thread;
  /// Where the question was put ("telegram:<chat>:<message_id>",
  /// "email:<Message-ID>").
  std::string notice_ref;
  int64_t expires_ms = 0;
  /// The sessions waiting (a retried run may ask while its predecessor's
  /// request is still here).
  std::vector<caf::typed_response_promise<tool_result>> sessions;
};

/// The wait for question `id` from a row of approval_get, whose columns
/// start at `row[first]`.
approval_wait approval_wait_of(const std::string& id,
                               const std::vector<std::string>& row,
                               size_t first = 0);

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
  /// Approval questions sessions of this node wait for, by id; at most
  /// `max_approvals_waiting` (more are denied at once, logged).
  std::unordered_map<std::string, approval_wait> approvals;
  /// The thread that talks to the Bot API for approvals (blocking HTTP).
  std::shared_ptr<blocking_pool> approval_io;
  /// Ticks since the last sweep of expired questions.
  uint32_t approval_ticks = 0;
  counter* approvals_asked = nullptr;
  counter* approvals_answered = nullptr;
  counter* approvals_expired = nullptr;
  /// Answers refused: not the run's starter.
  counter* approvals_refused = nullptr;
  // -- metrics ----------------------------------------------------------------
  counter* refused = nullptr;
  counter* reminders_fired = nullptr;
  histogram* duration = nullptr;
};

using tool_server_ptr = tool_server_actor::stateful_pointer<tool_server_state>;

// -- approvals (actors/tool_server_approvals.cpp)
// ------------------------------

/// Questions waiting in one tool server at most.
constexpr size_t max_approvals_waiting = 1024;

/// Registers the approval metrics and starts the Bot API thread.
void init_approvals(tool_server_ptr self);

/// A session asks (see `approve_atom, tool_call`).
void approval_ask(tool_server_ptr self, tool_call call,
                  caf::typed_response_promise<tool_result> rp);

/// A person answers (see `approve_atom, std::string, ...`); `done` gets the
/// result on the actor's thread. `key`, when not empty, is the dedupe key
/// of the message that answers: stored with the answer, and the same
/// message again gets the answer it gave (ok) instead of a conflict.
void approval_answer(tool_server_ptr self, std::string approval_id,
                     std::string run_id, bool approve, std::string caller,
                     std::function<void(tool_result)> done,
                     std::string key = {});

// -- approvals by mail (actors/tool_server_approval_mail.cpp) --------------

/// The Message-ID (no brackets) of question `approval_id`'s mail for run
/// `run_id`, sent from `mail_from`; "" when `mail_from` is no address.
std::string approval_mail_message_id(const std::string& mail_from,
                                     const std::string& run_id,
                                     const std::string& approval_id);

/// Puts question `w` (its run came by mail) to its starter as a reply to
/// their mail, after recording its Message-ID as the notice_ref.
void approval_mail_question(tool_server_ptr self, const approval_wait& w);

/// A mail that may answer a question (see `approve_atom, approval_mail`):
/// `done` gets ok (answered, or this very mail answered it before),
/// not_found (it names no question), forbidden (not the starter),
/// conflict (decided already; the starter was told by mail) or
/// unavailable.
void approval_mail_answer(tool_server_ptr self, approval_mail m,
                          std::function<void(tool_result)> done);

/// A Telegram callback_query from bot `bot`.
void approval_callback(tool_server_ptr self, const std::string& bot,
                       const std::string& update_json);

/// The question went out as Telegram message `message_id`.
void approval_noticed(tool_server_ptr self, const std::string& approval_id,
                      int64_t message_id);

/// The question's expiry passed.
void approval_expire(tool_server_ptr self, const std::string& approval_id);

/// Every minute or so: expires questions nobody waits for any more.
void approval_sweep(tool_server_ptr self);

/// Claude Code's permission prompt (`--permission-prompt-tool`): may the
/// session of `scope` (and `token`) use `tool` with `input` (JSON)? The
/// butler's approval policy answers, or the run's starter is asked as for
/// any approval. `done` gets what Claude Code expects:
/// {"behavior":"allow","updatedInput":...} or
/// {"behavior":"deny","message":...}.
void approval_prompt(tool_server_ptr self, const tool_scope& scope,
                     std::string token, std::string tool, std::string input,
                     std::function<void(tool_result)> done);

/// The node's tool server (see `tool_server_actor`).
tool_server_actor::behavior_type tool_server(tool_server_ptr self,
                                             tool_server_params params,
                                             node_context_ptr ctx);

} // namespace butlers
