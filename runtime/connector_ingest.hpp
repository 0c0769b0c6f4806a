#pragma once

// The canonical ingest boundary as a connector passes it: the very checks
// of POST /v1/ingest (`parse_ingest`), plus what a connector adds of its
// own: its endpoint identity and, for envelopes without an identity of
// their own, the dedupe key of where they came from.

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/ingest.hpp"

namespace butlers {

/// What a connector checks its envelopes against.
struct connector_ingest_rules {
  /// The connector's name (scopes its dedupe hints).
  std::string connector;
  /// When not empty, every envelope's `source.endpoint_identity` must be
  /// exactly this (a violation of keyword `const` otherwise).
  std::string endpoint_identity;
  /// `http.max_body_bytes`.
  size_t max_bytes = 1 << 20;
  /// `switchboard.dedupe_window_s`.
  uint32_t dedupe_window_s = 300;
};

/// `parse_ingest`, then the connector's own checks. `dedupe_hint`, when
/// not empty, replaces the time-bucketed content hash (the key of an
/// envelope with neither a Telegram or email event id nor an idempotency
/// key) with `src:<connector>:<hint>`: deterministic, so replaying the
/// same input after a restart is deduplicated however late it comes.
ingest_parse_result parse_connector_envelope(std::string_view body,
                                             const connector_ingest_rules& r,
                                             std::string_view dedupe_hint,
                                             int64_t now_us);

/// The dedupe key of `hint` for connector `connector`.
std::string connector_dedupe_key(std::string_view connector,
                                 std::string_view hint);

/// One line for logs and answers: the parse error, or the violations.
std::string describe_rejection(const ingest_parse_result& r);

} // namespace butlers
