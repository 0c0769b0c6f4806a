#pragma once

#include "actors/butler.hpp"
#include "runtime/config.hpp"

namespace butlers {

/// The messenger (spec 001 §10): the only outbound delivery path. It takes
/// route.v1 with a notify.v1 in input.context.notify_request, from the
/// switchboard only, and delivers it through its channel adapters
/// (`params.adapters`; none means one outbox). Its work items, leases,
/// admission and results are a butler's (`butler_with`); only how an item
/// runs differs: deliveries through adapters that never block (outboxes)
/// need no session actor, the others (webhooks) run as a delivery session
/// on a small pool of threads.
butler_actor::behavior_type messenger(butler_ptr self, butler_params params,
                                      inbox_writer_actor writer,
                                      node_context_ptr ctx);

/// The messenger's butler configuration from `[messenger]`.
butler_config messenger_butler(const messenger_config& m);

} // namespace butlers
