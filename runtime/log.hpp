#pragma once

#include <string>

namespace butlers {

/// Installs the process-wide logger: one JSON object per line on stderr,
/// `{"ts":"...","level":"info","node":"...","msg":"..."}`, the message
/// JSON-escaped so that user text can never break the framing. `level` is
/// one of trace|debug|info|warn|error.
void init_logging(const std::string& level, const std::string& node_name);

} // namespace butlers
