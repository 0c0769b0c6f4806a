#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace butlers {

/// Appends `line` + '\n' to `path` atomically with respect to other writers
/// of the same file (open O_APPEND|O_CREAT|O_CLOEXEC, 0640; one write() of the
/// whole line, so concurrent appends never interleave on a local file
/// system) and fsync()s it before returning; the call that creates the file
/// also fsyncs its directory. A line that is empty or contains '\n' is
/// rejected: either would break the one-record-per-line format.
/// Returns "" on success, else the error (path + strerror). An error from
/// fsync or later leaves the line possibly written, so readers must
/// tolerate duplicates (and a torn last line after a crash).
std::string append_outbox_line(const std::string& path, std::string_view line);

/// Why `line` cannot be an outbox record ("" when it can): empty, or
/// containing '\n'.
std::string outbox_line_error(const std::string& path, std::string_view line);

/// Most lines waiting for one file's writer; `append_outbox_line_async`
/// refuses more.
constexpr size_t outbox_max_queued = 8192;

/// What `append_outbox_line_async` did with a line.
enum class outbox_post {
  /// Queued; `done` will be called once, on the file's writer thread.
  queued,
  /// Refused: `outbox_max_queued` lines already wait; `done` is not called.
  full,
  /// Refused by `outbox_line_error`; `done` is not called.
  invalid,
};

/// The same append without blocking the caller: each file has one writer
/// thread (started with the file's first line, living as long as the
/// process), which takes every line queued so far, writes them with one
/// write() and one fsync(), and then calls each line's `done` with "" or
/// the error. Under load one sync covers many lines, and the callers never
/// wait on a lock or a disk. `append_outbox_line` is this plus a wait.
outbox_post append_outbox_line_async(const std::string& path, std::string line,
                                     std::function<void(std::string)> done);

} // namespace butlers
