#pragma once

// An incremental parser of Server-Sent Events (the WHATWG HTML "event
// stream" interpretation): bytes go in as they arrive, in chunks split
// anywhere, and whole events come out. Lines end with CRLF, LF or CR;
// `:` starts a comment; `data` lines of one event are joined with LF;
// `event`, `id` and `retry` are kept; other fields are ignored; a leading
// UTF-8 BOM is skipped. Bounded: a line or an event bigger than the limit
// puts the parser into a failed state (the caller drops the stream).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace butlers {

/// One dispatched event.
struct sse_event {
  /// The `event` field; "" means the default type ("message").
  std::string type;
  /// The `data` lines joined with LF (without the last LF).
  std::string data;
  /// The last event id seen so far in the stream ("" when none).
  std::string id;
};

class sse_parser {
 public:
  using handler = std::function<void(sse_event&)>;

  /// `max_bytes` bounds one line and one event's data.
  explicit sse_parser(size_t max_bytes = size_t{1} << 20)
    : max_bytes_(max_bytes) {
    // nop
  }

  /// Parses `chunk`, calling `on_event` for every event it completes.
  /// False (and nothing more is parsed) once a line or an event exceeds
  /// the bound.
  bool feed(std::string_view chunk, const handler& on_event);

  /// True after a bound was exceeded.
  bool failed() const {
    return failed_;
  }

  /// The last `retry` field (milliseconds), when one was valid.
  std::optional<uint64_t> retry_ms() const {
    return retry_ms_;
  }

 private:
  void line(std::string_view l, const handler& on_event);

  size_t max_bytes_;
  /// The line read so far (no terminator yet).
  std::string line_;
  /// The chunk ended with CR: an LF at the start of the next one belongs
  /// to it.
  bool after_cr_ = false;
  /// The first bytes, held until it is clear whether they are a BOM.
  std::string head_;
  bool bom_done_ = false;
  bool failed_ = false;
  std::string type_;
  /// The data lines so far, each followed by LF.
  std::string data_;
  std::string last_id_;
  std::optional<uint64_t> retry_ms_;
};

} // namespace butlers
