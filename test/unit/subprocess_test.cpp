#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/subprocess.hpp"
#include "test/support/poll.hpp"

using namespace std::chrono_literals;
using butlers::stdin_write;
using butlers::subprocess;
using butlers::subprocess_options;
using butlers::subprocess_outcome;
using butlers::subprocess_result;
using std::chrono::milliseconds;

namespace {

using butlers::test::eventually;
using butlers::test::gone;
using butlers::test::read_pids;

const std::string fakes_dir = BUTLERS_SOURCE_DIR "/test/fakes";

std::string fake(const char* name) {
  return fakes_dir + "/" + name;
}

subprocess_options options(std::vector<std::string> argv) {
  subprocess_options opts;
  opts.argv = std::move(argv);
  opts.timeout = 20s; // a safety net; tests that need a timeout set one
  return opts;
}

subprocess_result run(subprocess_options opts) {
  subprocess proc{std::move(opts)};
  return proc.wait();
}

/// Waits until a fake has written its own and its child's pid.
std::vector<pid_t> await_pids(const std::string& path) {
  std::vector<pid_t> pids;
  eventually(
    [&] {
      pids = read_pids(path);
      return pids.size() == 2;
    },
    5s, 5ms);
  return pids;
}

void expect_all_gone(const std::vector<pid_t>& pids) {
  ASSERT_EQ(pids.size(), 2u) << "the fake never wrote its pidfile";
  for (auto pid : pids)
    EXPECT_TRUE(eventually(
      [pid] {
        return gone(pid);
      },
      5s, 5ms))
      << "pid " << pid;
}

/// A fresh temporary directory per test, removed afterwards.
class subprocess_test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "butlers-subprocess-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    pidfile_ = dir_ + "/pids";
  }

  void TearDown() override {
    std::remove(pidfile_.c_str());
    std::remove((pidfile_ + ".tmp").c_str());
    ::rmdir(dir_.c_str());
  }

  subprocess_options hang(bool ignore_term = false) {
    auto opts = options({fake("fake-claude"), "-p", "hello"});
    opts.env = {{"FAKE_CLI_MODE", "hang"}, {"FAKE_CLI_PIDFILE", pidfile_}};
    if (ignore_term)
      opts.env.emplace_back("FAKE_CLI_IGNORE_TERM", "1");
    return opts;
  }

  std::string dir_;
  std::string pidfile_;
};

} // namespace

// -- exit status and output ---------------------------------------------------

TEST_F(subprocess_test, reports_the_exit_code_and_both_streams) {
  auto res = run(options({"sh", "-c", "echo out; echo err >&2; exit 7"}));
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 7);
  EXPECT_EQ(res.signal, 0);
  EXPECT_EQ(res.out, "out\n");
  EXPECT_EQ(res.err, "err\n");
  EXPECT_GT(res.pid, 0);
  EXPECT_TRUE(res.error.empty()) << res.error;
}

TEST_F(subprocess_test, a_huge_timeout_means_no_timeout) {
  auto opts = options({"sh", "-c", "exit 0"});
  opts.timeout = milliseconds::max();
  opts.kill_grace = milliseconds::max();
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 0);
}

TEST_F(subprocess_test, a_crashing_fake_keeps_its_partial_output) {
  auto opts = options({fake("fake-codex"), "exec", "--json"});
  opts.stdin_data = "hi";
  opts.env = {{"FAKE_CLI_MODE", "crash"}};
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 3);
  EXPECT_NE(res.out.find("agent_mess"), std::string::npos) << res.out;
}

TEST_F(subprocess_test, reports_the_signal_that_killed_it) {
  auto opts = options({fake("fake-claude"), "-p"});
  opts.stdin_data = "hi";
  opts.env = {{"FAKE_CLI_MODE", "segv"}};
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::signaled);
  EXPECT_EQ(res.signal, SIGSEGV);
  EXPECT_EQ(res.exit_code, -1);
  EXPECT_NE(res.out.find("\"res"), std::string::npos) << res.out;
}

TEST_F(subprocess_test, keeps_the_tail_of_stderr) {
  auto opts = options({"sh", "-c",
                       "i=0; while [ $i -lt 3000 ]; do echo \"line $i\" >&2;"
                       " i=$((i+1)); done; echo done"});
  opts.max_stderr_bytes = 100;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(res.out, "done\n");
  ASSERT_EQ(res.err.size(), 100u);
  EXPECT_EQ(res.err.substr(res.err.size() - 10), "line 2999\n");
}

// -- spawning -----------------------------------------------------------------

TEST_F(subprocess_test, a_missing_program_is_a_spawn_failure) {
  subprocess proc{options({"butlers-no-such-program"})};
  EXPECT_EQ(proc.pid(), -1);
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, subprocess_outcome::spawn_failed);
  EXPECT_EQ(res.pid, -1);
  EXPECT_NE(res.error.find("butlers-no-such-program"), std::string::npos)
    << res.error;
  EXPECT_NE(res.error.find("No such file or directory"), std::string::npos)
    << res.error;
}

TEST_F(subprocess_test, a_missing_path_fails_in_exec) {
  auto res = run(options({dir_ + "/nope"}));
  EXPECT_EQ(res.outcome, subprocess_outcome::spawn_failed);
  EXPECT_EQ(res.error, "exec " + dir_ + "/nope: No such file or directory");
}

TEST_F(subprocess_test, a_file_that_is_not_executable_fails_in_exec) {
  // The shared body of the fakes is sourced, never executed: mode 644.
  auto res = run(options({fake("fake-cli.sh")}));
  EXPECT_EQ(res.outcome, subprocess_outcome::spawn_failed);
  EXPECT_NE(res.error.find("Permission denied"), std::string::npos)
    << res.error;
}

TEST_F(subprocess_test, a_missing_working_dir_is_a_spawn_failure) {
  auto opts = options({"true"});
  opts.working_dir = dir_ + "/missing";
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::spawn_failed);
  EXPECT_EQ(res.error, "chdir " + dir_ + "/missing: No such file or directory");
}

TEST_F(subprocess_test, empty_argv_is_a_spawn_failure) {
  auto res = run(options({}));
  EXPECT_EQ(res.outcome, subprocess_outcome::spawn_failed);
  EXPECT_FALSE(res.error.empty());
}

TEST_F(subprocess_test, sets_environment_and_working_dir) {
  auto opts = options({"sh", "-c", "pwd; printf '%s|%s' \"$A\" \"$B\""});
  opts.env = {{"A", "first"}, {"B", "x"}, {"B", "second"}};
  opts.working_dir = dir_;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  char real[PATH_MAX];
  ASSERT_NE(::realpath(dir_.c_str(), real), nullptr);
  EXPECT_EQ(res.out, std::string{real} + "\nfirst|second");
}

TEST_F(subprocess_test, looks_the_program_up_in_the_childs_path) {
  auto opts = options({"fake-opencode", "run"});
  opts.env = {{"PATH", fakes_dir + ":/usr/bin:/bin"}};
  opts.stdin_data = "via PATH";
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.out, "answer: via PATH\n");
}

TEST_F(subprocess_test, the_child_starts_with_default_signal_state) {
  // What the node does to its threads, plus an ignored signal.
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  auto old_usr1 = std::signal(SIGUSR1, SIG_IGN);
  auto res = run(options({"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}));
  std::signal(SIGUSR1, old_usr1);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  EXPECT_EQ(res.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_F(subprocess_test, the_child_inherits_no_other_descriptors) {
  int leaked = ::open("/dev/null", O_RDONLY); // deliberately not O_CLOEXEC
  ASSERT_GE(leaked, 0);
  int high = ::fcntl(leaked, F_DUPFD, 200);
  ::close(leaked);
  ASSERT_GE(high, 200);
  auto res = run(options({"ls", "/proc/self/fd"}));
  ::close(high);
  // ls itself has the directory open as 3.
  EXPECT_EQ(res.out, "0\n1\n2\n3\n");
}

// -- stdin --------------------------------------------------------------------

TEST_F(subprocess_test, feeds_large_stdin_while_draining_stdout) {
  std::string data(4 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>('a' + i % 26);
  auto opts = options({"cat"});
  opts.stdin_data = data;
  opts.max_output_bytes = 8 << 20;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.out.size(), data.size());
  EXPECT_TRUE(res.out == data);
  opts.argv = {"wc", "-c"};
  res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.out, "4194304\n");
}

TEST_F(subprocess_test, a_child_that_never_reads_stdin_does_not_kill_us) {
  // One exits at once; the other closes stdin and lives on, so that our
  // next write fails with EPIPE (and raises SIGPIPE) while it runs.
  for (auto script : {"echo bye", "exec 0<&-; sleep 0.2; echo bye"}) {
    auto opts = options({"sh", "-c", script});
    opts.stdin_data = std::string(4 << 20, 'x');
    auto res = run(opts);
    EXPECT_EQ(res.outcome, subprocess_outcome::exited) << script;
    EXPECT_EQ(res.exit_code, 0) << script;
    EXPECT_EQ(res.out, "bye\n") << script;
  }
  // The SIGPIPE was consumed and this thread's mask restored.
  sigset_t pending, mask;
  ::sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 0);
}

TEST_F(subprocess_test, a_full_stdin_pipe_does_not_block_the_timeout) {
  auto opts = options({"sleep", "1000"});
  opts.stdin_data = std::string(1 << 20, 'x');
  opts.timeout = 300ms;
  opts.kill_grace = 300ms;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::timed_out);
  EXPECT_EQ(res.signal, SIGTERM);
}

// -- timeout, output limit, cancel
// ----------------------------------------------

TEST_F(subprocess_test, a_hanging_group_is_terminated_at_the_timeout) {
  auto opts = hang();
  opts.timeout = 500ms;
  opts.kill_grace = 5s; // dies of SIGTERM: the grace is never used up
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::timed_out);
  EXPECT_EQ(res.signal, SIGTERM);
  EXPECT_GE(res.duration, opts.timeout);
  EXPECT_LT(res.duration, opts.timeout + 5s);
  expect_all_gone(read_pids(pidfile_));
}

TEST_F(subprocess_test, sigkill_follows_when_sigterm_is_ignored) {
  auto opts = hang(true);
  opts.timeout = 500ms;
  opts.kill_grace = 300ms;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::timed_out);
  EXPECT_EQ(res.signal, SIGKILL);
  EXPECT_GE(res.duration, opts.timeout + opts.kill_grace);
  EXPECT_LT(res.duration, opts.timeout + opts.kill_grace + 5s);
  expect_all_gone(read_pids(pidfile_));
}

TEST_F(subprocess_test, flooding_stdout_hits_the_output_limit) {
  auto opts = options({fake("fake-codex"), "exec", "--json"});
  opts.env = {{"FAKE_CLI_MODE", "flood"}, {"FAKE_CLI_PIDFILE", pidfile_}};
  opts.max_output_bytes = 256 << 10;
  auto res = run(opts);
  EXPECT_EQ(res.outcome, subprocess_outcome::output_limit);
  // Exactly the first max_output_bytes bytes are kept.
  EXPECT_EQ(res.out.size(), opts.max_output_bytes);
  EXPECT_EQ(res.out.compare(0, 6, "flood "), 0);
  expect_all_gone(read_pids(pidfile_));
}

TEST_F(subprocess_test, cancel_from_another_thread_ends_the_group) {
  subprocess proc{hang()};
  subprocess_result res;
  std::thread waiter{[&] {
    res = proc.wait();
  }};
  auto pids = await_pids(pidfile_);
  proc.cancel();
  proc.cancel(); // idempotent
  waiter.join();
  EXPECT_EQ(res.outcome, subprocess_outcome::cancelled);
  EXPECT_LT(res.duration, 15s);
  expect_all_gone(pids);
  proc.cancel(); // harmless afterwards, too
}

TEST_F(subprocess_test, cancel_before_wait_works) {
  subprocess proc{hang()};
  auto pids = await_pids(pidfile_);
  proc.cancel();
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, subprocess_outcome::cancelled);
  EXPECT_EQ(res.signal, SIGTERM);
  expect_all_gone(pids);
}

TEST_F(subprocess_test, the_destructor_kills_a_group_never_waited_for) {
  std::vector<pid_t> pids;
  {
    subprocess proc{hang(true)};
    pids = await_pids(pidfile_);
    EXPECT_EQ(pids.size() == 2 ? pids[0] : -1, proc.pid());
  }
  expect_all_gone(pids);
}

// -- interactive mode: stdin kept open, stdout streamed as lines
// ---------------

namespace {

/// Lines that `on_stdout_line` saw, readable from the test thread.
struct line_log {
  std::mutex mutex;
  std::vector<std::string> lines;

  void add(std::string_view line) {
    std::lock_guard<std::mutex> guard{mutex};
    lines.emplace_back(line);
  }

  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> guard{mutex};
    return lines;
  }

  bool has(size_t n) {
    return snapshot().size() >= n;
  }
};

subprocess_options interactive(std::vector<std::string> argv, line_log& log) {
  auto opts = options(std::move(argv));
  opts.keep_stdin_open = true;
  opts.on_stdout_line = [&log](std::string_view line) {
    log.add(line);
  };
  return opts;
}

} // namespace

TEST(subprocess_interactive, writes_while_running_and_streams_lines) {
  line_log log;
  subprocess proc{interactive({"/bin/cat"}, log)};
  subprocess_result res;
  std::thread waiter{[&] {
    res = proc.wait();
  }};
  EXPECT_EQ(proc.write_stdin("one\n"), stdin_write::queued);
  ASSERT_TRUE(eventually(
    [&] {
      return log.has(1);
    },
    5s, 2ms));
  // The child answered the first write before the second was made.
  EXPECT_EQ(proc.write_stdin("two\nthr"), stdin_write::queued);
  EXPECT_EQ(proc.write_stdin("ee\n"), stdin_write::queued);
  proc.close_stdin();
  proc.close_stdin(); // idempotent
  waiter.join();
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_TRUE(res.out.empty());
  EXPECT_EQ(proc.write_stdin("late\n"), stdin_write::closed);
}

TEST(subprocess_interactive, stdin_data_goes_first_then_the_queue_in_order) {
  line_log log;
  auto opts = interactive({"/bin/cat"}, log);
  opts.stdin_data = "first\n";
  subprocess proc{std::move(opts)};
  // Queued before wait() runs.
  EXPECT_EQ(proc.write_stdin("second\n"), stdin_write::queued);
  EXPECT_EQ(proc.write_stdin("third"), stdin_write::queued);
  proc.close_stdin();
  EXPECT_EQ(proc.write_stdin("after close\n"), stdin_write::closed);
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  // A last line without '\n' is passed at EOF.
  EXPECT_EQ(log.snapshot(),
            (std::vector<std::string>{"first", "second", "third"}));
}

TEST(subprocess_interactive, the_line_callback_can_answer_on_stdin) {
  std::vector<std::string> lines;
  auto opts = options(
    {"sh", "-c", "while read -r l; do echo \"got $l\"; done; echo bye"});
  opts.keep_stdin_open = true;
  opts.stdin_data = "1\n";
  subprocess* self = nullptr;
  opts.on_stdout_line = [&](std::string_view line) {
    lines.emplace_back(line);
    if (lines.size() < 3)
      EXPECT_EQ(self->write_stdin(std::to_string(lines.size() + 1) + "\n"),
                stdin_write::queued);
    else
      self->close_stdin();
  };
  subprocess proc{std::move(opts)};
  self = &proc;
  auto res = proc.wait();
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(lines,
            (std::vector<std::string>{"got 1", "got 2", "got 3", "bye"}));
}

TEST(subprocess_interactive, a_child_that_closed_stdin_makes_writes_fail) {
  line_log log;
  subprocess proc{
    interactive({"sh", "-c", "exec 0<&-; echo ready; sleep 30"}, log)};
  subprocess_result res;
  std::thread waiter{[&] {
    res = proc.wait();
  }};
  ASSERT_TRUE(eventually(
    [&] {
      return log.has(1);
    },
    5s, 2ms));
  // The wait() thread notices the closed pipe (POLLERR) without a write.
  EXPECT_TRUE(eventually(
    [&] {
      return proc.write_stdin("x\n") == stdin_write::closed;
    },
    5s, 2ms));
  proc.cancel();
  waiter.join();
  EXPECT_EQ(res.outcome, subprocess_outcome::cancelled);
}

TEST(subprocess_interactive, a_child_that_never_reads_fills_the_queue) {
  line_log log;
  auto opts = interactive({"sh", "-c", "echo ready; sleep 30"}, log);
  opts.max_stdin_queue_bytes = 256 << 10;
  subprocess proc{std::move(opts)};
  subprocess_result res;
  std::thread waiter{[&] {
    res = proc.wait();
  }};
  // The pipe (64 KiB), one batch in flight and the queue hold a bounded
  // amount; then writes fail with `full` instead of growing memory.
  std::string chunk(32 << 10, 'x');
  int queued = 0;
  auto answer = stdin_write::queued;
  while (queued < 1000
         && (answer = proc.write_stdin(chunk)) == stdin_write::queued)
    ++queued;
  EXPECT_EQ(answer, stdin_write::full);
  EXPECT_LT(queued, 100);
  EXPECT_STREQ(to_string(answer), "full");
  proc.cancel();
  waiter.join();
  EXPECT_EQ(res.outcome, subprocess_outcome::cancelled);
  EXPECT_EQ(proc.write_stdin("x"), stdin_write::closed);
}

TEST(subprocess_interactive, drops_lines_over_the_line_cap) {
  line_log log;
  auto opts = interactive({"sh", "-c",
                           "echo short; head -c 5000 /dev/zero | tr '\\0' y; "
                           "echo; echo after; "
                           "printf last"},
                          log);
  opts.keep_stdin_open = false;
  opts.max_line_bytes = 1000;
  auto res = run(std::move(opts));
  EXPECT_EQ(res.outcome, subprocess_outcome::exited);
  EXPECT_EQ(log.snapshot(),
            (std::vector<std::string>{"short", "after", "last"}));
  EXPECT_EQ(res.lines_dropped, 1u);
}

TEST(subprocess_interactive, max_output_bytes_caps_the_total_streamed) {
  line_log log;
  auto opts = interactive({"yes", "0123456789"}, log);
  opts.max_output_bytes = 10000;
  auto res = run(std::move(opts));
  EXPECT_EQ(res.outcome, subprocess_outcome::output_limit);
  auto lines = log.snapshot();
  // 11 bytes a line: 909 whole lines fit; the 910th is cut off at EOF.
  ASSERT_GE(lines.size(), 909u);
  EXPECT_LE(lines.size(), 910u);
  EXPECT_EQ(lines.front(), "0123456789");
}

TEST(subprocess_interactive, write_stdin_needs_keep_stdin_open) {
  auto opts = options({"/bin/cat"});
  opts.stdin_data = "x";
  subprocess proc{std::move(opts)};
  EXPECT_EQ(proc.write_stdin("y"), stdin_write::closed);
  auto res = proc.wait();
  EXPECT_EQ(res.out, "x");
  EXPECT_STREQ(to_string(stdin_write::closed), "closed");
  EXPECT_STREQ(to_string(stdin_write::queued), "queued");
}

TEST(subprocess_interactive, a_failed_spawn_accepts_no_input) {
  line_log log;
  subprocess proc{interactive({"/nonexistent/program"}, log)};
  EXPECT_EQ(proc.write_stdin("x\n"), stdin_write::closed);
  proc.close_stdin();
  EXPECT_EQ(proc.wait().outcome, subprocess_outcome::spawn_failed);
}

TEST_F(subprocess_test, outcome_names) {
  EXPECT_STREQ(to_string(subprocess_outcome::exited), "exited");
  EXPECT_STREQ(to_string(subprocess_outcome::signaled), "signaled");
  EXPECT_STREQ(to_string(subprocess_outcome::timed_out), "timed_out");
  EXPECT_STREQ(to_string(subprocess_outcome::output_limit), "output_limit");
  EXPECT_STREQ(to_string(subprocess_outcome::cancelled), "cancelled");
  EXPECT_STREQ(to_string(subprocess_outcome::spawn_failed), "spawn_failed");
}
