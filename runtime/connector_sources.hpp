#pragma once

// The one place that knows which source each connector type runs. Adding a
// polling connector type is a `connector_source` subclass in its own file
// and one case here.

#include <memory>

#include "runtime/config.hpp"
#include "runtime/connector_source.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// The source a connector of `cfg.type` (and `cfg.mode`) runs on its own
/// thread, or null for a connector the HTTP server feeds (a Telegram
/// webhook, an `http` connector). Sources with counters of their own
/// register them in `metrics`.
std::unique_ptr<connector_source> make_connector_source(
  const connector_config& cfg, metrics_registry& metrics);

} // namespace butlers
