#pragma once

// The work runner of external butlers (`[butler.runtime] kind =
// "external"`): the butler admits, stores and leases work items as always,
// but starts no session; the items wait for workers outside the node,
// which take them over HTTP (recv with a visibility timeout; ack, nack and
// extend under the token of their delivery). See runtime/worker_queue.hpp
// for the rules and actors/README.md "Writing a butler in any language".

#include <memory>

#include "actors/butler.hpp"

namespace butlers {

/// A runner that hands `cfg`'s items to external workers.
std::unique_ptr<work_runner> make_external_runner(const butler_config& cfg);

} // namespace butlers
