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
  if (cancel_fd_ < 0)
    return fail("eventfd: " + errno_text(errno));
  if (opts_.argv.empty())
    return fail("no program given (empty argv)");
  // The child's environment: ours, with the overrides (the last one wins).
  auto overridden = [this](std::string_view entry) {
    auto eq = entry.find('=');
    auto key = entry.substr(0, eq);
    return std::any_of(opts_.env.begin(), opts_.env.end(),
                       [key](const auto& kv) {
                         return kv.first == key;
                       });
  };
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (!overridden(*e))
      env_strings.emplace_back(*e);
  for (size_t i = 0; i < opts_.env.size(); ++i) {
    auto& [key, value] = opts_.env[i];
    bool later = std::any_of(opts_.env.begin() + i + 1, opts_.env.end(),
                             [&](const auto& kv) {
                               return kv.first == key;
                             });
    if (!later)
      env_strings.push_back(key + '=' + value);
  }
  const char* child_path = nullptr;
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    if (s.compare(0, 5, "PATH=") == 0)
      child_path = s.c_str() + 5;
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  int err = 0;
  auto program = find_program(opts_.argv[0], child_path, err);
  if (program.empty())
    return fail("exec " + opts_.argv[0] + ": " + errno_text(err)
                + " (searched PATH)");
  std::vector<char*> argv;
  for (auto& s : opts_.argv)
    argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int errp[2] = {-1, -1};
  int report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, errp, report}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if (!make_pipe(in) || !make_pipe(out) || !make_pipe(errp)
      || !make_pipe(report)) {
    auto what = "pipe: " + errno_text(errno);
    close_all();
    return fail(std::move(what));
  }
  rlimit lim{};
  int max_fd = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    max_fd = static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 16));
  child_setup setup{program.c_str(),
                    argv.data(),
                    envp.data(),
                    opts_.working_dir.empty() ? nullptr
                                              : opts_.working_dir.c_str(),
                    in[0],
                    out[1],
                    errp[1],
                    report[1],
                    max_fd};
  auto pid = ::fork();
  if (pid == 0)
    run_child(setup);
  if (pid < 0) {
    auto what = "fork: " + errno_text(errno);
    close_all();
    return fail(std::move(what));
  }
  // Also from this side, so the group exists whichever of us runs first
  // (EACCES once the child has exec'd is fine).
  ::setpgid(pid, pid);
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(errp[1]);
  close_fd(report[1]);
  // EOF: the exec succeeded and closed the pipe; a message: it failed.
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(report[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close_fd(report[0]);
  if (n == static_cast<ssize_t>(sizeof(msg))) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      // retry
    }
    close_all();
    switch (msg[0]) {
      case stage_chdir:
        return fail("chdir " + opts_.working_dir + ": " + errno_text(msg[1]));
      case stage_exec:
        return fail("exec " + program + ": " + errno_text(msg[1]));
      default:
        return fail("setting up the child's stdio: " + errno_text(msg[1]));
    }
  }
  pid_ = pid;
  reaped_ = false;
  result_.pid = pid;
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = errp[0];
  set_nonblocking(stdin_fd_);
  set_nonblocking(stdout_fd_);
  set_nonblocking(stderr_fd_);
  if (opts_.stdin_data.empty())
    close_fd(stdin_fd_);
}

subprocess_result subprocess::wait() {
  if (waited_ || reaped_)
    return result_;
  waited_ = true;
  sigpipe_guard guard;
  int pidfd = open_pidfd(pid_);
  auto deadline = after(started_, opts_.timeout);
  std::optional<subprocess_outcome> reason; // why we kill it, if we do
  clock_type::time_point kill_at;           // SIGKILL due after SIGTERM
  bool term_sent = false;
  bool kill_sent = false;
  bool leader_exited = false;
  bool reaped_elsewhere = false;
  size_t stdin_off = 0;
  std::vector<char> buf(chunk_size);
  auto& out = result_.out;
  auto& err = result_.err;
  auto take_stdout = [&](const char* p, size_t n) {
    auto room = opts_.max_output_bytes - out.size();
    if (n > room) {
      out.append(p, room);
      if (!reason)
        reason = subprocess_outcome::output_limit;
    } else {
      out.append(p, n);
    }
  };
  auto take_stderr = [&](const char* p, size_t n) {
    err.append(p, n);
    // Trim rarely: only once the tail is twice the cap.
    if (err.size() > 2 * opts_.max_stderr_bytes)
      err.erase(0, err.size() - opts_.max_stderr_bytes);
  };
  auto write_stdin = [&] {
    auto left = opts_.stdin_data.size() - stdin_off;
    auto n = ::write(stdin_fd_, opts_.stdin_data.data() + stdin_off,
                     std::min(left, chunk_size));
    if (n >= 0) {
      stdin_off += static_cast<size_t>(n);
      if (stdin_off == opts_.stdin_data.size())
        close_fd(stdin_fd_);
    } else if (errno == EPIPE) {
      guard.raised();
      close_fd(stdin_fd_); // it stopped reading; not an error of ours
    } else if (errno != EAGAIN && errno != EINTR) {
      close_fd(stdin_fd_);
    }
  };
  auto check_leader = [&] {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    // WNOWAIT leaves it a zombie: its pid, which is the group's id, cannot
    // be reused while we still signal the group.
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info,
                 WEXITED | WNOHANG | WNOWAIT)
        == 0) {
      leader_exited = info.si_pid == pid_;
    } else if (errno == ECHILD) {
      leader_exited = true; // SIGCHLD ignored, or someone else reaped it
      reaped_elsewhere = true;
    }
  };
  auto signal_group = [&](int sig) {
    if (!reaped_elsewhere)
      ::kill(-pid_, sig);
  };
  // Reads stdout and stderr until both are at EOF or `until` has passed.
  auto drain = [&](clock_type::time_point until) {
    while (stdout_fd_ >= 0 || stderr_fd_ >= 0) {
      pollfd fds[2];
      nfds_t nfds = 0;
      for (int fd : {stdout_fd_, stderr_fd_})
        if (fd >= 0)
          fds[nfds++] = pollfd{fd, POLLIN, 0};
      int rc = ::poll(fds, nfds, remaining_ms(until));
      if (rc < 0 && errno != EINTR)
        break;
      if (rc == 0 && clock_type::now() >= until)
        break;
      if (stdout_fd_ >= 0)
        read_once(stdout_fd_, buf.data(), take_stdout);
      if (stderr_fd_ >= 0)
        read_once(stderr_fd_, buf.data(), take_stderr);
    }
  };
  // -- run until the leader exits -------------------------------------------
  while (!leader_exited) {
    auto now = clock_type::now();
    if (!reason) {
      if (cancelled_.load())
        reason = subprocess_outcome::cancelled;
      else if (now >= deadline)
        reason = subprocess_outcome::timed_out;
    }
    if (reason && !term_sent) {
      signal_group(SIGTERM);
      term_sent = true;
      kill_at = after(now, opts_.kill_grace);
      close_fd(stdin_fd_);
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      signal_group(SIGKILL);
      kill_sent = true;
    }
    pollfd fds[5];
    nfds_t nfds = 0;
    auto add = [&](int fd, short events) {
      if (fd >= 0)
        fds[nfds++] = pollfd{fd, events, 0};
    };
    add(stdin_fd_, POLLOUT);
    add(stdout_fd_, POLLIN);
    add(stderr_fd_, POLLIN);
    add(pidfd, POLLIN);
    if (!reason)
      add(cancel_fd_, POLLIN); // stays readable once written
    int timeout = -1;
    auto earlier = [&](int ms) {
      timeout = timeout < 0 ? ms : std::min(timeout, ms);
    };
    if (!reason)
      earlier(remaining_ms(deadline));
    if (term_sent && !kill_sent)
      earlier(remaining_ms(kill_at));
    if (pidfd < 0)
      earlier(static_cast<int>(exit_poll_interval.count()));
    int rc = ::poll(fds, nfds, timeout);
    if (rc < 0 && errno != EINTR) {
      // Cannot wait any more: treat it like a timeout.
      if (!reason)
        reason = subprocess_outcome::timed_out;
    }
    if (rc > 0) {
      for (nfds_t i = 0; i < nfds; ++i) {
        if (fds[i].revents == 0)
          continue;
        if (fds[i].fd == stdin_fd_)
          write_stdin();
        else if (fds[i].fd == stdout_fd_)
          read_once(stdout_fd_, buf.data(), take_stdout);
        else if (fds[i].fd == stderr_fd_)
          read_once(stderr_fd_, buf.data(), take_stderr);
      }
    }
    check_leader();
  }
  // -- the leader is gone: end the rest of its group ------------------------
  // What it left behind gets SIGTERM (unless it already did) and, once the
  // pipes close or the grace runs out, SIGKILL. Well-behaved CLIs leave
  // nothing, and then the pipes are at EOF at once.
  close_fd(stdin_fd_);
  if (!term_sent) {
    signal_group(SIGTERM);
    kill_at = after(clock_type::now(), opts_.kill_grace);
  }
  if (!kill_sent)
    drain(kill_at);
  signal_group(SIGKILL);
  drain(clock_type::now() + final_drain_limit);
  close_fds();
  close_fd(pidfd);
  if (err.size() > opts_.max_stderr_bytes)
    err.erase(0, err.size() - opts_.max_stderr_bytes);
  int status = 0;
  pid_t reaped = -1;
  if (!reaped_elsewhere) {
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
  if (reason)
    result_.outcome = *reason;
  return result_;
}

} // namespace butlers
