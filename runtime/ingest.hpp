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
/// Most bodies take a fast path, one streaming pass that checks the
/// schema's constraints as it reads; whatever it cannot vouch for takes
/// the full path (parse, then the generic schema check, which names every
/// violation). Both give the same record.
ingest_parse_result parse_ingest(std::string_view body, size_t max_bytes,
                                 uint32_t dedupe_window_s, int64_t now_us);

namespace detail {

/// The fast path alone: the record, or `std::nullopt` for anything it does
/// not accept (invalid, or merely unusual, such as a repeated key). What it
/// accepts, the full path accepts too, with the same fields. It mirrors
/// `schemas/ingest.v1.json` by hand: change the two together.
std::optional<inbox_record> parse_ingest_fast(std::string_view body,
                                              size_t max_bytes,
                                              uint32_t dedupe_window_s,
                                              int64_t now_us);

/// The full path alone: DOM parse, generic schema check, NUL checks.
ingest_parse_result parse_ingest_full(std::string_view body, size_t max_bytes,
                                      uint32_t dedupe_window_s, int64_t now_us);

} // namespace detail

} // namespace butlers
