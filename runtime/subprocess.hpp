#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace butlers {

/// How to start one child process and what to allow it.
struct subprocess_options {
  /// Program and arguments; `argv[0]` is looked up in PATH (the PATH of the
  /// child's environment, i.e. after `env` is applied) unless it has a '/'.
  std::vector<std::string> argv;
  /// Written to the child's stdin, after which stdin is closed (unless
  /// `keep_stdin_open`); empty means the child sees EOF at once.
  std::string stdin_data;
  /// Interactive mode: stdin stays open after `stdin_data` until
  /// `subprocess::close_stdin()`; more input goes in with
  /// `subprocess::write_stdin()`.
  bool keep_stdin_open = false;
  /// Cap on the bytes queued by `write_stdin()` and not yet taken by the
  /// child; a write that would exceed it fails with `stdin_write::full`.
  size_t max_stdin_queue_bytes = 4 << 20;
  /// When set, stdout is streamed instead of collected: this runs on the
  /// thread in `wait()` for every complete line (without its '\n'; a last
  /// line without one is passed at EOF), and `subprocess_result::out` stays
  /// empty. `max_output_bytes` then caps the total streamed; a line longer
  /// than `max_line_bytes` is dropped whole and counted in
  /// `subprocess_result::lines_dropped`. It may call `write_stdin()` and
  /// `close_stdin()`; it must not throw and should not block for long.
  std::function<void(std::string_view)> on_stdout_line;
  /// Cap on one line for `on_stdout_line`.
  size_t max_line_bytes = 1 << 20;
  /// Variables added to, or overriding, the parent's environment.
  std::vector<std::pair<std::string, std::string>> env;
  /// Wall-clock limit, counted from the spawn (the constructor).
  std::chrono::milliseconds timeout{600000};
  /// Cap on stdout; a child that writes more is killed (`output_limit`) and
  /// `out` holds exactly the first `max_output_bytes` bytes.
  size_t max_output_bytes = 1 << 20;
  /// Cap on stderr; only the last `max_stderr_bytes` bytes (the tail, where
  /// the final error message is) are kept. Never kills the child.
  size_t max_stderr_bytes = 64 << 10;
  /// Time between SIGTERM and SIGKILL to the process group.
  std::chrono::milliseconds kill_grace{2000};
  /// Working directory of the child; empty inherits the parent's.
  std::string working_dir;
};

/// How a child process ended.
enum class subprocess_outcome {
  /// It exited by itself; see `exit_code`.
  exited,
  /// A signal that we did not send ended it; see `signal`.
  signaled,
  /// It ran past `timeout` and was killed.
  timed_out,
  /// It wrote more than `max_output_bytes` to stdout and was killed.
  output_limit,
  /// `cancel()` was called and it was killed.
  cancelled,
  /// It never ran: fork, PATH lookup, chdir or exec failed; see `error`.
  spawn_failed,
};

/// The enumerator's name, e.g. "timed_out".
const char* to_string(subprocess_outcome x);

/// What `subprocess::write_stdin()` did with the data.
enum class stdin_write {
  /// Queued; the thread in `wait()` writes it.
  queued,
  /// Stdin is closed: the child stopped reading (closed its end or exited),
  /// `close_stdin()` was called, the child is being killed, `wait()` has
  /// returned, the spawn failed, or `keep_stdin_open` is off.
  closed,
  /// The child is not reading fast enough: the queue would exceed
  /// `max_stdin_queue_bytes`. Nothing was queued.
  full,
};

/// The enumerator's name, e.g. "full".
const char* to_string(stdin_write x);

/// Everything `subprocess::wait()` learned about the child.
struct subprocess_result {
  /// How it ended. When we killed it (timed_out, output_limit, cancelled),
  /// `exit_code` and `signal` still tell how the leader died.
  subprocess_outcome outcome = subprocess_outcome::spawn_failed;
  /// Exit status when it exited, -1 otherwise.
  int exit_code = -1;
  /// Terminating signal when it was killed by one, 0 otherwise.
  int signal = 0;
  /// Stdout, at most `max_output_bytes`; empty with `on_stdout_line`.
  std::string out;
  /// With `on_stdout_line`: lines longer than `max_line_bytes`, not passed.
  size_t lines_dropped = 0;
  /// The tail of stderr, at most `max_stderr_bytes`.
  std::string err;
  /// Why the spawn failed, e.g. "exec /bin/nope: No such file or directory".
  std::string error;
  /// Process ID (also the process group ID) of the child, -1 if none.
  pid_t pid = -1;
  /// From spawn to reap.
  std::chrono::milliseconds duration{0};
};

/// One child process in its own process group, with piped stdio.
///
/// The constructor spawns; `wait()` blocks the calling thread until the child
/// is reaped, so call it from a dedicated thread or a detached actor, never
/// on the scheduler. `cancel()` may be called from any thread (or a signal
/// handler) to end a running `wait()` early.
///
/// The child owns its process group: whenever the leader ends (by itself or
/// killed), whatever else still runs in the group (a CLI's tool processes,
/// MCP servers, ...) is killed with SIGKILL, so nothing outlives the
/// session. On timeout, output limit or cancel the group gets SIGTERM, then
/// SIGKILL after `kill_grace`.
class subprocess {
 public:
  /// Forks and execs `opts.argv` in a new process group, with a default
  /// signal mask and default signal dispositions, stdin/stdout/stderr on
  /// pipes and every other descriptor closed. Never throws for a program
  /// that cannot be run: `wait()` then reports `spawn_failed`.
  explicit subprocess(subprocess_options opts);

  /// Kills the group and reaps the child if `wait()` never did.
  ~subprocess();

  subprocess(const subprocess&) = delete;
  subprocess& operator=(const subprocess&) = delete;

  /// The child's process ID (and process group ID), -1 if the spawn failed.
  pid_t pid() const;

  /// Feeds stdin, collects stdout and stderr, enforces the timeout and the
  /// output cap and honors `cancel()`; returns once the child is reaped.
  /// Call at most once.
  subprocess_result wait();

  /// Makes a running or later `wait()` kill the group and return
  /// `cancelled`. Thread-safe, async-signal-safe and idempotent; a no-op
  /// once `wait()` has returned.
  void cancel();

  /// Interactive mode (`keep_stdin_open`): queues `data` for the child's
  /// stdin; the thread in `wait()` writes it, in the order of the calls.
  /// Thread-safe; may be called before `wait()` runs.
  stdin_write write_stdin(std::string data);

  /// Interactive mode: closes stdin once everything queued is written, so
  /// the child sees EOF. Thread-safe and idempotent.
  void close_stdin();

 private:
  /// One run of `wait()`: the poll loop and what it has decided so far.
  class waiter;

  void spawn();
  void close_fds();
  void wake_stdin();

  subprocess_options opts_;
  subprocess_result result_;
  std::chrono::steady_clock::time_point started_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  /// eventfd that `cancel()` writes to and `wait()` polls.
  int cancel_fd_ = -1;
  /// eventfd that `write_stdin()` and `close_stdin()` write to and `wait()`
  /// polls (and reads back to zero).
  int stdin_wake_fd_ = -1;
  /// Guards the three below, shared with other threads.
  std::mutex stdin_mutex_;
  /// Written by `write_stdin()`, not yet taken by `wait()`.
  std::string stdin_queue_;
  bool stdin_close_requested_ = false;
  /// No more input is accepted.
  bool stdin_closed_ = true;
  std::atomic<bool> cancelled_{false};
  /// Whether the child has been reaped (or never existed).
  bool reaped_ = true;
  bool waited_ = false;
};

} // namespace butlers
