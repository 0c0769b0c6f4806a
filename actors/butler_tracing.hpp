#pragma once

#include "actors/butler.hpp"

namespace butlers {

/// Records the butler-side trace of a finished run (runtime/butler_trace.hpp)
/// with the node's tracer: nothing when tracing is off or the run is not
/// sampled. `ended` is the slot the run held, `out` how it ended.
void trace_work_run(butler_ptr self, const running_session& ended,
                    const session_outcome& out);

} // namespace butlers
