#include "runtime/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

extern char** environ;

namespace butlers {

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Read and write in pieces of this size, so that one busy pipe cannot
/// starve the others or the timeout checks.
constexpr size_t chunk_size = 64 << 10;

/// How long to wait for EOF on stdout and stderr after the whole group got
/// SIGKILL; only a process that left the group (setsid) and kept our pipes
/// can make this expire.
constexpr milliseconds final_drain_limit{200};

/// Without a pidfd, how often to look whether the leader exited.
constexpr milliseconds exit_poll_interval{20};

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r: returns a pointer to the message, maybe not into buf.
  return ::strerror_r(err, buf, sizeof(buf));
}

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

/// A close-on-exec pipe whose ends are both >= 3, so that the child's
/// dup2() onto 0, 1 and 2 never overwrites another pipe end.
bool make_pipe(int (&fds)[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return false;
  for (auto& fd : fds) {
    if (fd >= 3)
      continue;
    int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int saved = errno;
    ::close(fd);
    fd = moved;
    if (moved < 0) {
      close_fd(fds[0]);
      close_fd(fds[1]);
      errno = saved;
      return false;
    }
  }
  return true;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/// Finds `name` the way execvp() does, but before the fork and in the PATH
/// of the child's environment. Returns the path to exec, or an empty string
/// with `err` set (EACCES if only non-executable candidates were found).
std::string find_program(const std::string& name, const char* path, int& err) {
  err = ENOENT;
  if (name.empty())
    return {};
  if (name.find('/') != std::string::npos)
    return name;
  // glibc's execvp() searches this when PATH is unset.
  std::string_view rest = path != nullptr ? path : "/bin:/usr/bin";
  for (;;) {
    auto colon = rest.find(':');
    auto dir = rest.substr(0, colon);
    auto candidate = dir.empty() ? name : std::string{dir} + '/' + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0)
        return candidate;
      err = EACCES;
    }
    if (colon == std::string_view::npos)
      return {};
    rest.remove_prefix(colon + 1);
  }
}

// -- the child, between fork() and exec() -----------------------------------

/// What went wrong in the child, reported through the close-on-exec pipe.
enum child_stage : int { stage_dup = 1, stage_chdir, stage_exec };

/// Everything the child needs, prepared before the fork: after it, only
/// async-signal-safe calls, so no allocation.
struct child_setup {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* working_dir; ///< nullptr inherits
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int report_fd;
  int max_fd; ///< for the fallback when close_range() is unavailable
};

[[noreturn]] void child_fail(int report_fd, int stage) {
  int msg[2] = {stage, errno};
  auto ignored = ::write(report_fd, msg, sizeof(msg));
  static_cast<void>(ignored);
  ::_exit(127);
}

[[noreturn]] void run_child(const child_setup& s) {
  ::setpgid(0, 0);
  // The node blocks SIGINT and SIGTERM for sigwait() and may ignore or
  // handle others; the CLI must start from the defaults.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &dfl, nullptr); // EINVAL for KILL, STOP, glibc's own
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(s.stdin_fd, 0) < 0 || ::dup2(s.stdout_fd, 1) < 0
      || ::dup2(s.stderr_fd, 2) < 0)
    child_fail(s.report_fd, stage_dup);
  // Keep the report pipe at 3 and close everything above it: descriptors
  // that other threads opened without O_CLOEXEC must not leak into the CLI.
  int report = s.report_fd;
  if (report != 3) {
    if (::dup3(report, 3, O_CLOEXEC) < 0)
      child_fail(report, stage_dup);
    report = 3;
  }
  if (::close_range(4, ~0U, 0) != 0)
    for (int fd = 4; fd < s.max_fd; ++fd)
      ::close(fd);
  if (s.working_dir != nullptr && ::chdir(s.working_dir) != 0)
    child_fail(report, stage_chdir);
  ::execve(s.program, s.argv, s.envp);
  child_fail(report, stage_exec);
}

// -- the parent -------------------------------------------------------------

/// Blocks SIGPIPE in the calling thread for its lifetime and swallows the
/// SIGPIPE that writing to a child that closed its stdin raises. Neither the
/// process-wide disposition nor other threads are touched, as befits a
/// library.
class sigpipe_guard {
 public:
  sigpipe_guard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }

  ~sigpipe_guard() {
    int saved = errno;
    if (raised_ && !was_pending_) {
      timespec zero{0, 0};
      while (::sigtimedwait(&set_, nullptr, &zero) < 0 && errno == EINTR) {
        // retry
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved;
  }

  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

  /// A write failed with EPIPE, so a SIGPIPE is pending for this thread.
  void raised() {
    raised_ = true;
  }

 private:
  sigset_t set_;
  sigset_t old_;
  bool was_pending_ = false;
  bool raised_ = false;
};

/// A descriptor that polls readable once `pid` exits, or -1 where the
/// kernel or a seccomp filter says no (then we poll waitid() instead).
/// glibc 2.36's <sys/pidfd.h> lacks extern "C", hence the raw syscall.
int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

/// `t + d`, saturating, so that a huge timeout means "never".
clock_type::time_point after(clock_type::time_point t, milliseconds d) {
  auto room = std::chrono::duration_cast<milliseconds>(
    clock_type::time_point::max() - t);
  return d >= room ? clock_type::time_point::max() : t + d;
}

/// A poll() timeout until `deadline`: rounded up, so that poll() does not
/// wake a hair early and spin, and at most an hour, so that it fits.
int remaining_ms(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline
                                                       - clock_type::now())
                .count();
  return static_cast<int>(std::clamp<decltype(left)>(left + 1, 0, 3600000));
}

/// Reads once from `fd` into `sink`; closes `fd` at EOF or on an error.
template<class Sink>
void read_once(int& fd, char* buf, Sink&& sink) {
  auto n = ::read(fd, buf, chunk_size);
  if (n > 0)
    sink(buf, static_cast<size_t>(n));
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    close_fd(fd);
}

/// The child's environment: ours, with the `overrides` (the last one of a
/// name wins).
std::vector<std::string> child_environment(
  const std::vector<std::pair<std::string, std::string>>& overrides) {
  auto overridden = [&](std::string_view entry) {
    auto key = entry.substr(0, entry.find('='));
    return std::any_of(overrides.begin(), overrides.end(),
                       [key](const auto& kv) {
                         return kv.first == key;
                       });
  };
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (!overridden(*e))
      out.emplace_back(*e);
  for (size_t i = 0; i < overrides.size(); ++i) {
    auto& kv = overrides[i];
    bool later = std::any_of(overrides.begin() + i + 1, overrides.end(),
                             [&](const auto& other) {
                               return other.first == kv.first;
                             });
    if (!later)
      out.push_back(kv.first + '=' + kv.second);
  }
  return out;
}

/// The value of the last PATH in `env`, or nullptr.
const char* path_in(const std::vector<std::string>& env) {
  const char* path = nullptr;
  for (auto& s : env)
    if (s.compare(0, 5, "PATH=") == 0)
      path = s.c_str() + 5;
  return path;
}

/// `xs` as the null-terminated array of C strings that execve() takes.
std::vector<char*> null_terminated(std::vector<std::string>& xs) {
  std::vector<char*> out;
  out.reserve(xs.size() + 1);
  for (auto& s : xs)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// The descriptor limit for the child's close loop when close_range() is
/// unavailable.
int max_descriptor() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    return static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 16));
  return 1024;
}

/// The child's stdio pipes and the pipe on which it reports a failed
/// exec; [0] is the read end.
struct child_pipes {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int report[2] = {-1, -1};

  /// False (with errno set) if one could not be made.
  bool open() {
    return make_pipe(in) && make_pipe(out) && make_pipe(err)
           && make_pipe(report);
  }

  /// After the fork: the ends that are the child's.
  void close_child_ends() {
    close_fd(in[0]);
    close_fd(out[1]);
    close_fd(err[1]);
    close_fd(report[1]);
  }

  void close_all() {
    for (int* p : {in, out, err, report}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  }
};

/// Waits for the child's exec and closes `fd`: EOF means it succeeded
/// (the exec closed the pipe); a message is the stage that failed and its
/// errno.
std::optional<std::pair<int, int>> exec_failure(int& fd) {
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(fd, msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close_fd(fd);
  if (n != static_cast<ssize_t>(sizeof(msg)))
    return std::nullopt;
  return std::make_pair(msg[0], msg[1]);
}

} // namespace

const char* to_string(subprocess_outcome x) {
  switch (x) {
    case subprocess_outcome::exited: return "exited";
    case subprocess_outcome::signaled: return "signaled";
    case subprocess_outcome::timed_out: return "timed_out";
    case subprocess_outcome::output_limit: return "output_limit";
    case subprocess_outcome::cancelled: return "cancelled";
    case subprocess_outcome::spawn_failed: return "spawn_failed";
  }
  return "unknown";
}

const char* to_string(stdin_write x) {
  switch (x) {
    case stdin_write::queued: return "queued";
    case stdin_write::closed: return "closed";
    case stdin_write::full: return "full";
  }
  return "unknown";
}

subprocess::subprocess(subprocess_options opts) : opts_(std::move(opts)) {
  spawn();
}

subprocess::~subprocess() {
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      // retry
    }
  }
  close_fds();
  close_fd(cancel_fd_);
  close_fd(stdin_wake_fd_);
}

pid_t subprocess::pid() const {
  return pid_;
}

void subprocess::cancel() {
  cancelled_.store(true);
  if (cancel_fd_ >= 0) {
    uint64_t one = 1;
    auto ignored = ::write(cancel_fd_, &one, sizeof(one));
    static_cast<void>(ignored);
  }
}

stdin_write subprocess::write_stdin(std::string data) {
  {
    std::lock_guard<std::mutex> guard{stdin_mutex_};
    if (stdin_closed_ || stdin_close_requested_)
      return stdin_write::closed;
    if (data.size() > opts_.max_stdin_queue_bytes - stdin_queue_.size())
      return stdin_write::full;
    stdin_queue_ += data;
  }
  wake_stdin();
  return stdin_write::queued;
}

void subprocess::close_stdin() {
  {
    std::lock_guard<std::mutex> guard{stdin_mutex_};
    if (stdin_closed_ || stdin_close_requested_)
      return;
    stdin_close_requested_ = true;
  }
  wake_stdin();
}

void subprocess::wake_stdin() {
  if (stdin_wake_fd_ >= 0) {
    uint64_t one = 1;
    auto ignored = ::write(stdin_wake_fd_, &one, sizeof(one));
    static_cast<void>(ignored);
  }
}

void subprocess::close_fds() {
  close_fd(stdin_fd_);
  close_fd(stdout_fd_);
  close_fd(stderr_fd_);
}

void subprocess::spawn() {
  started_ = clock_type::now();
  result_.outcome = subprocess_outcome::spawn_failed;
  auto fail = [this](std::string what) {
    result_.error = std::move(what);
    result_.duration = std::chrono::duration_cast<milliseconds>(
      clock_type::now() - started_);
  };
  cancel_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  stdin_wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (cancel_fd_ < 0 || stdin_wake_fd_ < 0)
    return fail("eventfd: " + errno_text(errno));
  if (opts_.argv.empty())
    return fail("no program given (empty argv)");
  auto env_strings = child_environment(opts_.env);
  auto envp = null_terminated(env_strings);
  int err = 0;
  auto program = find_program(opts_.argv[0], path_in(env_strings), err);
  if (program.empty())
    return fail("exec " + opts_.argv[0] + ": " + errno_text(err)
                + " (searched PATH)");
  auto argv = null_terminated(opts_.argv);
  child_pipes pipes;
  if (!pipes.open()) {
    auto what = "pipe: " + errno_text(errno);
    pipes.close_all();
    return fail(std::move(what));
  }
  child_setup setup{program.c_str(),
                    argv.data(),
                    envp.data(),
                    opts_.working_dir.empty() ? nullptr
                                              : opts_.working_dir.c_str(),
                    pipes.in[0],
                    pipes.out[1],
                    pipes.err[1],
                    pipes.report[1],
                    max_descriptor()};
  auto pid = ::fork();
  if (pid == 0)
    run_child(setup);
  if (pid < 0) {
    auto what = "fork: " + errno_text(errno);
    pipes.close_all();
    return fail(std::move(what));
  }
  // Also from this side, so the group exists whichever of us runs first
  // (EACCES once the child has exec'd is fine).
  ::setpgid(pid, pid);
  pipes.close_child_ends();
  if (auto failed = exec_failure(pipes.report[0])) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      // retry
    }
    pipes.close_all();
    auto [stage, code] = *failed;
    switch (stage) {
      case stage_chdir:
        return fail("chdir " + opts_.working_dir + ": " + errno_text(code));
      case stage_exec: return fail("exec " + program + ": " + errno_text(code));
      default: return fail("setting up the child's stdio: " + errno_text(code));
    }
  }
  pid_ = pid;
  reaped_ = false;
  result_.pid = pid;
  stdin_fd_ = pipes.in[1];
  stdout_fd_ = pipes.out[0];
  stderr_fd_ = pipes.err[0];
  set_nonblocking(stdin_fd_);
  set_nonblocking(stdout_fd_);
  set_nonblocking(stderr_fd_);
  if (opts_.keep_stdin_open) {
    std::lock_guard<std::mutex> guard{stdin_mutex_};
    stdin_closed_ = false;
  } else if (opts_.stdin_data.empty()) {
    close_fd(stdin_fd_);
  }
}

class subprocess::waiter {
 public:
  explicit waiter(subprocess& p)
    : p_(p), pidfd_(open_pidfd(p.pid_)),
      deadline_(after(p.started_, p.opts_.timeout)),
      pending_(std::move(p.opts_.stdin_data)), buf_(chunk_size) {
    // nop
  }

  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;

  /// Feeds stdin and reads stdout and stderr until the leader exits,
  /// sending SIGTERM and then SIGKILL to the group once there is a reason.
  void run() {
    while (!leader_exited_) {
      escalate(clock_type::now());
      poll_once();
      check_leader();
    }
  }

  /// The leader is gone: ends the rest of its group. What it left behind
  /// gets SIGTERM (unless it already did) and, once the pipes close or the
  /// grace runs out, SIGKILL. Well-behaved CLIs leave nothing, and then the
  /// pipes are at EOF at once.
  void end_group() {
    close_stdin_fd();
    if (!term_sent_) {
      signal_group(SIGTERM);
      kill_at_ = after(clock_type::now(), p_.opts_.kill_grace);
    }
    if (!kill_sent_)
      drain(kill_at_);
    signal_group(SIGKILL);
    drain(clock_type::now() + final_drain_limit);
    p_.close_fds();
    close_fd(pidfd_);
    auto& err = p_.result_.err;
    if (err.size() > p_.opts_.max_stderr_bytes)
      err.erase(0, err.size() - p_.opts_.max_stderr_bytes);
  }

  /// Why we killed the child, if we did.
  std::optional<subprocess_outcome> reason() const {
    return reason_;
  }

  /// The leader was reaped by someone else (or SIGCHLD is ignored): its
  /// exit status is lost.
  bool reaped_elsewhere() const {
    return reaped_elsewhere_;
  }

 private:
  /// Decides whether to kill (cancel, timeout) and sends SIGTERM, then
  /// SIGKILL after the grace.
  void escalate(clock_type::time_point now) {
    if (!reason_) {
      if (p_.cancelled_.load())
        reason_ = subprocess_outcome::cancelled;
      else if (now >= deadline_)
        reason_ = subprocess_outcome::timed_out;
    }
    if (reason_ && !term_sent_) {
      signal_group(SIGTERM);
      term_sent_ = true;
      kill_at_ = after(now, p_.opts_.kill_grace);
      close_stdin_fd();
    }
    if (term_sent_ && !kill_sent_ && now >= kill_at_) {
      signal_group(SIGKILL);
      kill_sent_ = true;
    }
  }

  /// One poll() over the pipes, the pidfd and the cancel eventfd, until the
  /// next deadline; then serves the pipes that are ready.
  void poll_once() {
    pollfd fds[6];
    nfds_t nfds = 0;
    auto add = [&](int fd, short events) {
      if (fd >= 0)
        fds[nfds++] = pollfd{fd, events, 0};
    };
    // With nothing to write, still watch for POLLERR: the child closed its
    // end of stdin.
    add(p_.stdin_fd_, stdin_off_ < pending_.size() ? POLLOUT : 0);
    if (p_.stdin_fd_ >= 0 && p_.opts_.keep_stdin_open)
      add(p_.stdin_wake_fd_, POLLIN);
    add(p_.stdout_fd_, POLLIN);
    add(p_.stderr_fd_, POLLIN);
    add(pidfd_, POLLIN);
    if (!reason_)
      add(p_.cancel_fd_, POLLIN); // stays readable once written
    int rc = ::poll(fds, nfds, poll_timeout());
    if (rc < 0 && errno != EINTR) {
      // Cannot wait any more: treat it like a timeout.
      if (!reason_)
        reason_ = subprocess_outcome::timed_out;
    }
    if (rc <= 0)
      return;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (fds[i].revents == 0)
        continue;
      if (fds[i].fd == p_.stdin_fd_)
        write_stdin();
      else if (fds[i].fd == p_.stdin_wake_fd_)
        take_stdin_queue();
      else if (fds[i].fd == p_.stdout_fd_)
        read_stdout();
      else if (fds[i].fd == p_.stderr_fd_)
        read_stderr();
    }
  }

  /// Milliseconds until the next deadline, SIGKILL or exit check; -1: none.
  int poll_timeout() const {
    int timeout = -1;
    auto earlier = [&](int ms) {
      timeout = timeout < 0 ? ms : std::min(timeout, ms);
    };
    if (!reason_)
      earlier(remaining_ms(deadline_));
    if (term_sent_ && !kill_sent_)
      earlier(remaining_ms(kill_at_));
    if (pidfd_ < 0)
      earlier(static_cast<int>(exit_poll_interval.count()));
    return timeout;
  }

  void read_stdout() {
    if (p_.opts_.on_stdout_line) {
      stream_stdout();
      return;
    }
    read_once(p_.stdout_fd_, buf_.data(), [this](const char* p, size_t n) {
      auto& out = p_.result_.out;
      auto room = p_.opts_.max_output_bytes - out.size();
      if (n > room) {
        out.append(p, room);
        if (!reason_)
          reason_ = subprocess_outcome::output_limit;
      } else {
        out.append(p, n);
      }
    });
  }

  void read_stderr() {
    read_once(p_.stderr_fd_, buf_.data(), [this](const char* p, size_t n) {
      auto& err = p_.result_.err;
      err.append(p, n);
      // Trim rarely: only once the tail is twice the cap.
      if (err.size() > 2 * p_.opts_.max_stderr_bytes)
        err.erase(0, err.size() - p_.opts_.max_stderr_bytes);
    });
  }

  /// Line mode: reads once and passes every complete line on, enforcing
  /// the total and the per-line cap; at EOF also a last unterminated line.
  void stream_stdout() {
    read_once(p_.stdout_fd_, buf_.data(), [this](const char* p, size_t n) {
      auto room = p_.opts_.max_output_bytes - streamed_;
      if (n > room) {
        n = room;
        if (!reason_)
          reason_ = subprocess_outcome::output_limit;
      }
      streamed_ += n;
      split_lines(std::string_view{p, n});
    });
    if (p_.stdout_fd_ < 0 && !line_.empty()) {
      if (!skipping_line_)
        p_.opts_.on_stdout_line(line_);
      line_.clear();
    }
  }

  void split_lines(std::string_view chunk) {
    while (!chunk.empty()) {
      auto nl = chunk.find('\n');
      auto piece = chunk.substr(0, nl);
      if (!skipping_line_) {
        if (line_.size() + piece.size() > p_.opts_.max_line_bytes) {
          skipping_line_ = true;
          ++p_.result_.lines_dropped;
          line_.clear();
        } else {
          line_.append(piece.data(), piece.size());
        }
      }
      if (nl == std::string_view::npos)
        return;
      if (!skipping_line_)
        p_.opts_.on_stdout_line(line_);
      line_.clear();
      skipping_line_ = false;
      chunk.remove_prefix(nl + 1);
    }
  }

  void write_stdin() {
    if (stdin_off_ >= pending_.size()) {
      // Only POLLERR or POLLHUP: the child closed its end.
      close_stdin_fd();
      return;
    }
    auto left = pending_.size() - stdin_off_;
    auto n = ::write(p_.stdin_fd_, pending_.data() + stdin_off_,
                     std::min(left, chunk_size));
    if (n >= 0) {
      stdin_off_ += static_cast<size_t>(n);
      if (stdin_off_ == pending_.size())
        take_stdin_queue();
    } else if (errno == EPIPE) {
      guard_.raised();
      close_stdin_fd(); // it stopped reading; not an error of ours
    } else if (errno != EAGAIN && errno != EINTR) {
      close_stdin_fd();
    }
  }

  /// Once everything pending is written: takes what `write_stdin()` queued,
  /// or closes stdin when nothing is queued and that was asked for (or
  /// this is not interactive mode).
  void take_stdin_queue() {
    if (p_.opts_.keep_stdin_open) {
      uint64_t ignored_count = 0;
      auto ignored = ::read(p_.stdin_wake_fd_, &ignored_count,
                            sizeof(ignored_count));
      static_cast<void>(ignored);
    }
    if (p_.stdin_fd_ < 0 || stdin_off_ < pending_.size())
      return;
    pending_.clear();
    stdin_off_ = 0;
    bool close = !p_.opts_.keep_stdin_open;
    if (!close) {
      std::lock_guard<std::mutex> guard{p_.stdin_mutex_};
      pending_.swap(p_.stdin_queue_);
      close = pending_.empty() && p_.stdin_close_requested_;
    }
    if (close)
      close_stdin_fd();
  }

  /// Closes our end of stdin for good; later writes report `closed`.
  void close_stdin_fd() {
    close_fd(p_.stdin_fd_);
    pending_.clear();
    stdin_off_ = 0;
    std::lock_guard<std::mutex> guard{p_.stdin_mutex_};
    p_.stdin_closed_ = true;
    p_.stdin_queue_.clear();
  }

  void check_leader() {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    // WNOWAIT leaves it a zombie: its pid, which is the group's id, cannot
    // be reused while we still signal the group.
    if (::waitid(P_PID, static_cast<id_t>(p_.pid_), &info,
                 WEXITED | WNOHANG | WNOWAIT)
        == 0) {
      leader_exited_ = info.si_pid == p_.pid_;
    } else if (errno == ECHILD) {
      leader_exited_ = true; // SIGCHLD ignored, or someone else reaped it
      reaped_elsewhere_ = true;
    }
  }

  void signal_group(int sig) {
    if (!reaped_elsewhere_)
      ::kill(-p_.pid_, sig);
  }

  /// Reads stdout and stderr until both are at EOF or `until` has passed.
  void drain(clock_type::time_point until) {
    while (p_.stdout_fd_ >= 0 || p_.stderr_fd_ >= 0) {
      pollfd fds[2];
      nfds_t nfds = 0;
      for (int fd : {p_.stdout_fd_, p_.stderr_fd_})
        if (fd >= 0)
          fds[nfds++] = pollfd{fd, POLLIN, 0};
      int rc = ::poll(fds, nfds, remaining_ms(until));
      if (rc < 0 && errno != EINTR)
        break;
      if (rc == 0 && clock_type::now() >= until)
        break;
      if (p_.stdout_fd_ >= 0)
        read_stdout();
      if (p_.stderr_fd_ >= 0)
        read_stderr();
    }
  }

  subprocess& p_;
  /// For the whole wait: writing to a child that closed stdin raises
  /// SIGPIPE.
  sigpipe_guard guard_;
  /// Readable once the leader exits; -1 where unavailable (then we poll).
  int pidfd_;
  /// When the timeout expires.
  clock_type::time_point deadline_;
  /// Why we kill the child, once we decided to.
  std::optional<subprocess_outcome> reason_;
  /// When SIGKILL is due after SIGTERM.
  clock_type::time_point kill_at_;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  bool leader_exited_ = false;
  bool reaped_elsewhere_ = false;
  /// What is being written to stdin: `stdin_data`, then what
  /// `write_stdin()` queued, a batch at a time.
  std::string pending_;
  /// Bytes of `pending_` written so far.
  size_t stdin_off_ = 0;
  /// Line mode: bytes of stdout streamed so far.
  size_t streamed_ = 0;
  /// Line mode: the line being read.
  std::string line_;
  /// Line mode: the line being read is too long and is skipped.
  bool skipping_line_ = false;
  std::vector<char> buf_;
};

subprocess_result subprocess::wait() {
  if (waited_ || reaped_)
    return result_;
  waited_ = true;
  waiter w{*this};
  w.run();
  w.end_group();
  int status = 0;
  pid_t reaped = -1;
  if (!w.reaped_elsewhere()) {
    do {
      reaped = ::waitpid(pid_, &status, 0);
    } while (reaped < 0 && errno == EINTR);
  }
  reaped_ = true;
  result_.duration = std::chrono::duration_cast<milliseconds>(clock_type::now()
                                                              - started_);
  if (reaped == pid_ && WIFEXITED(status)) {
    result_.exit_code = WEXITSTATUS(status);
    result_.outcome = subprocess_outcome::exited;
  } else if (reaped == pid_ && WIFSIGNALED(status)) {
    result_.signal = WTERMSIG(status);
    result_.outcome = subprocess_outcome::signaled;
  } else {
    result_.outcome = subprocess_outcome::exited;
    result_.error = "exit status lost: the child was reaped elsewhere "
                    "(is SIGCHLD ignored?)";
  }
  if (auto reason = w.reason())
    result_.outcome = *reason;
  return result_;
}

} // namespace butlers
