#pragma once

// The one place that knows which source each connector type runs. Adding a
// polling connector type is a `connector_source` subclass in its own file
// and one case here.

#include <memory>

#include "runtime/config.hpp"
#include "runtime/connector_source.hpp"

namespace butlers {

/// The source a connector of `cfg.type` (and `cfg.mode`) runs on its own
/// thread, or null for a connector the HTTP server feeds (a Telegram
/// webhook, an `http` connector).
std::unique_ptr<connector_source> make_connector_source(
  const connector_config& cfg);

} // namespace butlers
