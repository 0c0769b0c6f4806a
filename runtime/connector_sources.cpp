#include "runtime/connector_sources.hpp"

#include <spdlog/spdlog.h>

#include "runtime/attachment_store.hpp"
#include "runtime/jsonl_source.hpp"
#include "runtime/maildir_source.hpp"
#include "runtime/telegram_poll.hpp"

namespace butlers {

std::unique_ptr<connector_source> make_connector_source(
  const connector_config& cfg, const connector_source_limits& limits,
  metrics_registry& metrics) {
  switch (cfg.type) {
    case connector_type::http:
    case connector_type::slack: return nullptr;
    case connector_type::telegram: {
      if (cfg.mode == connector_mode::webhook)
        return nullptr;
      telegram_poll_source::options o;
      o.name = cfg.name;
      o.api_base = cfg.api_base;
      o.token = cfg.token;
      o.endpoint_identity = cfg.endpoint_identity;
      o.poll_timeout_s = cfg.poll_timeout_s;
      o.batch = cfg.max_in_flight;
      o.on_callback = limits.on_callback;
      o.attachment_caps = limits.attachments;
      // One connection of its own: a photo never waits in the writer's
      // group commit, and the source fetches one file at a time.
      if (!limits.database_url.empty())
        o.attachments = std::make_shared<attachment_store>(limits.database_url,
                                                           limits.attachments,
                                                           1);
      return std::make_unique<telegram_poll_source>(std::move(o));
    }
    case connector_type::jsonl: {
      jsonl_source::options o;
      o.name = cfg.name;
      o.path = cfg.path;
      o.poll = std::chrono::milliseconds{cfg.poll_ms};
      o.batch = cfg.max_in_flight;
      o.max_line_bytes = limits.max_envelope_bytes;
      return std::make_unique<jsonl_source>(std::move(o));
    }
    case connector_type::maildir: {
      // Like a Telegram source's: a connection of its own, one mail's files
      // at a time.
      std::shared_ptr<attachment_store> store;
      if (!limits.database_url.empty())
        store = std::make_shared<attachment_store>(limits.database_url,
                                                   limits.attachments, 1);
      return std::make_unique<maildir_source>(cfg,
                                              register_maildir_metrics(metrics,
                                                                       cfg
                                                                         .name),
                                              std::move(store));
    }
  }
  spdlog::error("connector {}: {} sources are not part of this build", cfg.name,
                to_string(cfg.type));
  return nullptr;
}

} // namespace butlers
