#pragma once

// route.v1, route_response.v1 and notify.v1 as the butlers read and write
// them: parsing a dispatched envelope into a typed view, rendering typed
// responses, and building the envelopes the node itself originates
// (scheduled work, deliveries to the messenger). Pure logic, no actors.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/meta/type_name.hpp>

#include "runtime/schema.hpp"

namespace butlers {

struct route_envelope;

/// The dynamically typed handle of a typed handle or of an actor's `self`:
/// what a `route_request`'s `reply_to`, a session's slot and the cluster's
/// introduction carry. The one place outside the cluster that casts so.
template<class T>
caf::actor untyped(const T& x) {
  return caf::actor_cast<caf::actor>(x);
}

/// A route.execute call (spec 001 §6.2): one route.v1 envelope for one
/// butler, plus who sent it.
struct route_request {
  /// The route.v1 envelope (JSON text).
  std::string envelope;
  /// "route" (the switchboard's dispatch), "trigger" (a session's),
  /// "schedule" or "switchboard" (a delivery to the messenger).
  std::string trigger_source = "route";
  /// The butler whose session sent it; "" when none.
  std::string origin_butler;
  /// Gets `done_atom, route_response` once the work item's result is
  /// durable (the dispatching switchboard); may be null.
  caf::actor reply_to;
  /// `envelope` as its author built it, when that author is the switchboard
  /// of the receiving butler's own node, which made `envelope` from parts it
  /// had checked (the ingest record, a plan valid under router_plan.v1, a
  /// notify valid under notify.v1): the butler takes it instead of parsing
  /// and validating `envelope` again. Never serialized, so whatever arrives
  /// from another node or over HTTP is parsed and validated in full.
  std::shared_ptr<const route_envelope> parsed{};
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, route_request& x) {
  return f(caf::meta::type_name("route_request"), x.envelope, x.trigger_source,
           x.origin_butler, x.reply_to);
}

/// route_response.v1 in typed form: `accepted` from route.execute, `ok` or
/// `error` when the work is done.
struct route_response {
  /// "accepted", "ok" or "error".
  std::string status;
  /// Echo of the dispatched lineage.
  std::string request_id;
  std::string subrequest_id;
  std::string segment_id;
  /// The butler's work item ("" when nothing was stored).
  std::string work_id;
  /// accepted: the item was already stored by an earlier dispatch.
  bool duplicate = false;
  /// error: class of the taxonomy, message, and whether a retry may help.
  std::string error_class;
  std::string error_message;
  bool retryable = false;
  /// Time the butler spent, in milliseconds.
  double duration_ms = 0;
  /// ok: the butler's result object (JSON text); "" renders as {}.
  std::string result;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, route_response& x) {
  return f(caf::meta::type_name("route_response"), x.status, x.request_id,
           x.subrequest_id, x.segment_id, x.work_id, x.duplicate, x.error_class,
           x.error_message, x.retryable, x.duration_ms, x.result);
}

/// An error response of class `cls` (a taxonomy name).
route_response make_error_response(std::string request_id, std::string cls,
                                   std::string message, bool retryable);

/// Renders a valid route_response.v1 document.
std::string to_json(const route_response& x);

/// Reads a route_response.v1 document (spec 001 §6.3): an unknown schema
/// version or a missing or invalid field is a `validation_error` whose
/// message names every violation.
std::optional<route_response> parse_route_response(std::string_view text,
                                                   std::string* error);

/// The parts of a route.v1 envelope the butlers act on.
struct route_envelope {
  std::string request_id;
  std::string received_at;
  std::string source_channel;
  std::string source_endpoint_identity;
  std::string source_sender_identity;
  /// "" when the request has no thread.
  std::string source_thread_identity;
  std::string subrequest_id;
  std::string segment_id;
  std::string fanout_mode;
  std::string butler;
  std::string tool;
  std::string prompt;
  /// input.context.notify_request as JSON text, "" when absent.
  std::string notify_request;
  /// input.context.attachments (references, runtime/attachments.hpp) as
  /// JSON text, "" when the request has none.
  std::string attachments;
  /// W3C traceparent, carried as trace_context.traceparent ("" = none).
  std::string trace_parent;
  /// W3C tracestate, carried as trace_context.tracestate ("" = none).
  std::string trace_state;
  /// input.context.run_options: the model the session's runtime uses
  /// instead of its configured one ("" = the butler's) and the most steps
  /// (model calls, scripted turns) it may take (0 = the butler's limit).
  /// A thread turn's `model` and `options.max_steps`.
  std::string run_model;
  uint32_t run_max_steps = 0;
};

/// Why an envelope was refused: a taxonomy class and a message naming the
/// problem (every schema violation, or the contract rule broken).
struct route_rejection {
  std::string error_class;
  std::string message;
};

/// Parses and validates a route.v1 envelope (schema, then the notify.v1
/// carried in input.context.notify_request, if any).
std::optional<route_rejection> parse_route(std::string_view text,
                                           route_envelope& out);

/// Builds a route.v1 envelope (JSON text) from its parts; `notify_request`
/// (a notify.v1 document, JSON text) goes to input.context when not empty.
std::string make_route_json(const route_envelope& x);

/// Builds the notify.v1 reply of `origin_butler` to the request of `route`
/// with `message`; `idempotency_key` lets the messenger drop duplicates of an
/// at-least-once delivery.
std::string make_notify_json(const route_envelope& route,
                             std::string_view origin_butler,
                             std::string_view message,
                             std::string_view idempotency_key);

/// The fields of a notify.v1 the messenger delivers with.
struct notify_view {
  std::string origin_butler;
  std::string intent;
  std::string channel;
  std::string recipient;
  /// delivery.subject ("" when absent): the subject of a mail.
  std::string subject;
  std::string message;
  /// intent "react": delivery.reaction's state ("progress", "queued",
  /// "parsed", "errored") and at_us ("" and 0 otherwise).
  std::string reaction_state;
  int64_t reaction_at_us = 0;
  std::string idempotency_key;
  /// request_context, when the notify carries one ("" otherwise).
  std::string request_id;
  std::string received_at;
  std::string source_channel;
  std::string source_endpoint_identity;
  std::string source_sender_identity;
  std::string source_thread_identity;
};

/// Validates a notify.v1 document and wraps it for the messenger: a route.v1
/// envelope (JSON text) with the notify in input.context.notify_request,
/// the answered request's context (or, for a `send`, a fresh one), and
/// segment "notify:<idempotency_key>" so a repeated delivery of the same
/// notify is one work item. `fresh_id` is used for the request id when the
/// notify has no context, and for the subrequest id. With `parsed`, the
/// envelope's typed form is left there as well.
std::optional<route_rejection> make_delivery_route(
  std::string_view notify, std::string_view fresh_id, int64_t now_us,
  std::string& out, route_envelope* parsed = nullptr);

/// Reads a notify.v1 document validated before (parse_route did).
std::optional<notify_view> read_notify(std::string_view text);

/// RFC 3339 UTC text of Unix microseconds, e.g. 2026-11-23T04:00:00.123456Z.
std::string rfc3339_utc(int64_t unix_us);

} // namespace butlers
