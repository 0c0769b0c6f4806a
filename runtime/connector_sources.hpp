#pragma once

// The one place that knows which source each connector type runs. Adding a
// polling connector type is a `connector_source` subclass in its own file
// and one case here.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/config.hpp"
#include "runtime/connector_source.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// What every source is bound by beyond its own `[[connector]]` table.
struct connector_source_limits {
  /// `http.max_body_bytes`: the largest envelope (a longer JSONL line, a
  /// bigger mail is invalid).
  size_t max_envelope_bytes = size_t{1} << 20;
  /// telegram: where callback_query Updates go (a press on an approval
  /// question's button; runtime/approvals.md), as (bot, Update JSON text).
  /// Empty: they are ignored like other kinds.
  std::function<void(const std::string&, const std::string&)> on_callback;
  /// Where sources store the attachments they fetch ("" = none fetched)
  /// and their caps.
  std::string database_url;
  attachment_limits attachments;
};

/// The source a connector of `cfg.type` (and `cfg.mode`) runs on its own
/// thread, or null for a connector the HTTP server feeds (a Telegram
/// webhook, an `http` connector). Sources with counters of their own
/// register them in `metrics`.
std::unique_ptr<connector_source> make_connector_source(
  const connector_config& cfg, const connector_source_limits& limits,
  metrics_registry& metrics);

} // namespace butlers
