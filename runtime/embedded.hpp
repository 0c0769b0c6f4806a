#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace butlers {

/// A file from `schemas/` or `sql/`, compiled into the binary at build time.
struct embedded_file {
  /// Path relative to the repository root, e.g. `schemas/ingest.v1.json`.
  const char* path;
  /// The file's bytes.
  std::string_view content;
};

/// A contiguous, sorted-by-path range of embedded files.
struct span_of_files {
  const embedded_file* first;
  size_t count;
  const embedded_file* begin() const {
    return first;
  }
  const embedded_file* end() const {
    return first + count;
  }
};

/// All embedded files, sorted by path (defined in the generated source).
span_of_files embedded_files();

/// Returns the content of the embedded file at `path`, if any.
inline std::optional<std::string_view> embedded(std::string_view path) {
  for (auto& f : embedded_files())
    if (path == f.path)
      return f.content;
  return std::nullopt;
}

/// The named statement `sql/queries/<name>.sql`; the name doubles as the
/// prepared-statement and log name. Throws std::logic_error if missing.
inline std::string named_query(std::string_view name) {
  auto path = "sql/queries/" + std::string{name} + ".sql";
  auto text = embedded(path);
  if (!text)
    throw std::logic_error("no embedded query " + path);
  return std::string{*text};
}

} // namespace butlers
