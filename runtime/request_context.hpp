#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace butlers {

/// The canonical request context of spec 001 §4, assigned at the ingest
/// boundary before any routing decision and carried unchanged to every
/// downstream sub-request. Empty optional fields are rendered as null.
struct request_context {
  /// UUIDv7 in canonical text form.
  std::string request_id;
  /// When the switchboard received the request (Unix microseconds, UTC).
  int64_t received_at_us = 0;
  /// `telegram`, `email`, `api`, ...
  std::string source_channel;
  /// The ingress identity that received the message (bot, mailbox, client).
  std::string source_endpoint_identity;
  /// The actor who sent the message.
  std::string source_sender_identity;
  /// The conversation or thread, empty when the channel has none.
  std::string source_thread_identity;
  /// W3C trace context (`traceparent`), empty when absent.
  std::string trace_parent;
  /// W3C `tracestate` sent with it, empty when absent or not usable.
  std::string trace_state;
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_context& x) {
  return f(caf::meta::type_name("request_context"), x.request_id,
           x.received_at_us, x.source_channel, x.source_endpoint_identity,
           x.source_sender_identity, x.source_thread_identity, x.trace_parent,
           x.trace_state);
}

inline bool operator==(const request_context& x, const request_context& y) {
  return x.request_id == y.request_id && x.received_at_us == y.received_at_us
         && x.source_channel == y.source_channel
         && x.source_endpoint_identity == y.source_endpoint_identity
         && x.source_sender_identity == y.source_sender_identity
         && x.source_thread_identity == y.source_thread_identity
         && x.trace_parent == y.trace_parent && x.trace_state == y.trace_state;
}

} // namespace butlers
