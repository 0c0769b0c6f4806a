#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/interfaces.hpp"
#include "actors/node_context.hpp"
#include "actors/thread.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// A live thread as the directory knows it.
struct directory_entry {
  thread_actor hdl;
  /// Messages forwarded to it; a retire handshake succeeds only if this did
  /// not change while the thread was asked.
  uint64_t seq = 0;
  /// Unix ms of the last forward (or of the idle time the thread reported).
  int64_t last_ms = 0;
  /// An idle question to the thread is out.
  bool asking = false;
};

struct thread_directory_state {
  static inline const char* name = "thread_directory";
  /// What every thread of the node shares (its metrics and this
  /// directory's handle filled in).
  std::shared_ptr<thread_env> env;
  /// Thread id → live thread actor.
  std::unordered_map<std::string, directory_entry> threads;
  /// Run id → thread id, for active and queued runs.
  std::unordered_map<std::string, std::string> runs;
  /// Threads left with open runs were woken (done once, at start).
  bool resumed = false;
  node_context_ptr ctx;
  gauge* live = nullptr;
  counter* spawned = nullptr;
  counter* retired = nullptr;
};

/// The thread directory (see `thread_directory_actor`). `env.directory` is
/// filled in with the directory's own handle, and the metrics of `env`
/// with counters of `ctx->metrics`.
thread_directory_actor::behavior_type thread_directory(
  thread_directory_actor::stateful_pointer<thread_directory_state> self,
  thread_env env, node_context_ptr ctx);

} // namespace butlers
