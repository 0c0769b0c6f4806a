#pragma once

// The events a conversation thread publishes (spec 003 §7): its summary
// (endpoint scope) and its thread-scope events (transcript messages, run
// states, steer and delta frames), as server-sent event frames to the
// node's event hub. Each does nothing when nobody subscribed.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/thread.hpp"

namespace butlers::thread_events {

using thread_ptr = thread_actor::stateful_pointer<thread_state>;

/// The thread's runs as they are now and its undecided turns.
thread_live live_of(thread_ptr self);

/// The thread's summary: its digest (title, preview, last message time,
/// run status and error), active run ids, queued runs.
void publish_summary(thread_ptr self);

/// A thread-scope event of `type` with JSON `body` (and SSE `id`).
void publish(thread_ptr self, const char* type, const std::string& body,
             std::string_view id = {});

/// A transcript message stored at `cursor`.
void publish_message(thread_ptr self, int64_t cursor,
                     const std::string& message_id, const char* role,
                     const std::string& kind, const std::string& run_id,
                     const std::string& butler, const std::string& body);

/// A run's state (and error), then the summary.
void publish_run(thread_ptr self, const std::string& run_id,
                 const std::string& butler, const std::string& state,
                 const std::string& error = {});

} // namespace butlers::thread_events
