#pragma once

// The `jsonl` connector (actors/README.md): replays a file of `ingest.v1`
// envelopes, one per line, then watches it for appended lines. Where it
// stopped (the line number and the byte offset after the last line whose
// commit it saw) is a checkpoint in PostgreSQL, stored after each commit,
// so a restart resumes there; lines committed after the last checkpoint
// are submitted again and deduplicated (each line's dedupe key, unless the
// envelope has an identity of its own, is its offset and content). A line
// that is not a valid envelope is counted, logged with its number and
// skipped, never retried. A line counts once its newline is written; a
// file shorter than the checkpoint was replaced or truncated and is read
// from the start.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/connector_source.hpp"

namespace butlers {

/// Where a JSONL connector is in its file.
struct jsonl_position {
  /// Lines consumed (the next line is number `line + 1`).
  uint64_t line = 0;
  /// Byte offset after them.
  uint64_t offset = 0;

  /// `{"line":N,"offset":B}`, the checkpoint's text.
  std::string to_json() const;
  /// Reads `to_json`'s text; nullopt for anything else.
  static std::optional<jsonl_position> from_json(const std::string& text);

  friend bool operator==(const jsonl_position& x, const jsonl_position& y) {
    return x.line == y.line && x.offset == y.offset;
  }
};

/// One complete line of the file.
struct jsonl_line {
  /// 1-based.
  uint64_t number = 0;
  /// Offset of its first byte.
  uint64_t offset = 0;
  /// Where the file stands after it (its newline included).
  jsonl_position next;
  /// Without the newline (and a CR before it).
  std::string text;
  /// Longer than the limit: `text` is empty, the line is skipped.
  bool too_long = false;
};

/// Reads complete lines from a position of a file, blocking on disk only.
class jsonl_reader {
 public:
  /// `max_line_bytes`: longer lines are reported `too_long` (their bytes
  /// are skipped, never held in memory whole).
  jsonl_reader(std::string path, size_t max_line_bytes);

  /// Up to `max_lines` complete lines from `from`, in order. Empty when the
  /// file is missing or has no complete line after `from`. Sets
  /// `truncated` when the file is shorter than `from.offset` (replaced or
  /// truncated: the caller starts over at 0).
  std::vector<jsonl_line> read(const jsonl_position& from, size_t max_lines,
                               bool& truncated) const;

 private:
  std::string path_;
  size_t max_line_bytes_;
};

/// The source (see the file comment).
class jsonl_source final : public connector_source {
 public:
  struct options {
    /// The connector's name, for logs.
    std::string name;
    std::string path;
    /// How often the file is looked at once everything is read.
    std::chrono::milliseconds poll{1000};
    /// Lines submitted at once (`max_in_flight`).
    size_t batch = 8;
    /// `http.max_body_bytes`: longer lines are invalid.
    size_t max_line_bytes = size_t{1} << 20;
    /// First pause after a failed submission or checkpoint read; doubles
    /// up to `max_backoff`.
    std::chrono::milliseconds backoff{200};
    std::chrono::milliseconds max_backoff{10000};
  };

  explicit jsonl_source(options opts);

  void run(connector_sink& sink) override;

 private:
  /// The stored checkpoint (retried until the database answers); false
  /// when stopped first.
  bool load(connector_sink& sink, jsonl_position& pos);

  /// Submits `lines` until each is settled or the sink stops, advancing
  /// `pos` and storing it after each commit; false when stopped first.
  bool submit(connector_sink& sink, std::vector<jsonl_line>& lines,
              jsonl_position& pos);

  options opts_;
  jsonl_reader reader_;
};

} // namespace butlers
