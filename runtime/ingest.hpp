#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/messages.hpp"
#include "runtime/schema.hpp"

namespace butlers {

/// The outcome of reading an `ingest.v1` body at the boundary.
struct ingest_parse_result {
  /// Set when the body is a valid envelope: the record to store, with a
  /// fresh UUIDv7 request id, the receive time and its dedupe key.
  std::optional<inbox_record> record;
  /// Why the body is not valid JSON (empty when it is).
  std::string parse_error;
  /// Every schema violation (JSON pointer + keyword + message).
  std::vector<violation> violations;
};

/// Parses and validates an ingest body and derives the canonical request
/// context (spec 001 §4) and dedupe key (§10.2). Pure CPU work, safe on any
/// thread: the HTTP threads run it before anything reaches an actor.
/// Beyond the schema, text fields that PostgreSQL cannot store (a NUL
/// character) are violations too.
ingest_parse_result parse_ingest(std::string_view body, size_t max_bytes,
                                 uint32_t dedupe_window_s, int64_t now_us);

} // namespace butlers
