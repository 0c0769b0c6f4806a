#pragma once

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

} // namespace butlers
