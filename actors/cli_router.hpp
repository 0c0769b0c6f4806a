#pragma once

// The cli router (spec 001 §6.2): one CLI run per request, on a detached
// actor of its own (its process wait blocks), answering once with what the
// CLI said.

#include <memory>
#include <string>
#include <vector>

#include <caf/local_actor.hpp>

#include "actors/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/router.hpp"
#include "runtime/subprocess.hpp"

namespace butlers {

/// A started run: ask `runner` (`get_atom`) for the answer; cancel `proc`
/// when no answer comes in time.
struct cli_router_run {
  cli_router_actor runner;
  std::shared_ptr<subprocess> proc;
};

/// Starts the router CLI of `rc` on `text` for the butlers `entries`.
cli_router_run start_cli_router(caf::local_actor* parent,
                                const router_config& rc,
                                const std::string& text,
                                const std::vector<registry_entry>& entries);

/// The plan for what the CLI answered (or that it did not answer: `a` is
/// null): validated strictly; anything wrong routes the request whole to
/// general.
routing_plan plan_of_cli_run(const adapter_result* a, const std::string& text,
                             const std::vector<registry_entry>& entries);

} // namespace butlers
