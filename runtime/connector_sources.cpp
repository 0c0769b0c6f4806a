#include "runtime/connector_sources.hpp"

#include <spdlog/spdlog.h>

#include "runtime/maildir_source.hpp"

namespace butlers {

std::unique_ptr<connector_source> make_connector_source(
  const connector_config& cfg, metrics_registry& metrics) {
  switch (cfg.type) {
    case connector_type::http: return nullptr;
    case connector_type::telegram:
      if (cfg.mode == connector_mode::webhook)
        return nullptr;
      break;
    case connector_type::jsonl: break;
    case connector_type::maildir:
      return std::make_unique<
        maildir_source>(cfg, register_maildir_metrics(metrics, cfg.name));
  }
  spdlog::error("connector {}: {} sources are not part of this build", cfg.name,
                to_string(cfg.type));
  return nullptr;
}

} // namespace butlers
