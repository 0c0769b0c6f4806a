#pragma once

// Waiting for states that real processes, servers and actors reach
// asynchronously: poll under a deadline (never sleep-and-hope), and tell
// whether a process is gone. Header-only, for unit and integration tests.

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#ifndef BUTLERS_TEST_SLOWDOWN
#  define BUTLERS_TEST_SLOWDOWN 1
#endif

namespace butlers::test {

/// How many times slower this build runs than a normal one (test/
/// CMakeLists.txt: 1, or 2 under ASan+UBSan, 5 under TSan). Deadlines bound
/// the wait for a failure, so they stretch by it; they never speed-test.
constexpr int slowdown = BUTLERS_TEST_SLOWDOWN;

/// `d` stretched for this build.
constexpr std::chrono::milliseconds stretched(std::chrono::milliseconds d) {
  return d * slowdown;
}

/// Polls `pred` every `step` until it holds (true) or `timeout` (stretched
/// for this build) has passed (false).
template<class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds{
                  20}) {
  auto deadline = std::chrono::steady_clock::now() + stretched(timeout);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

/// A pid is gone once it does not exist or is a zombie nobody reaped yet
/// (in a container, PID 1 may not reap orphans).
inline bool gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(stat, line))
    return true; // ended between the two looks
  auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size()
         && line[paren + 2] == 'Z';
}

/// The pids in a pidfile, one per line.
inline std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in{path};
  long pid = 0;
  while (in >> pid)
    pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

} // namespace butlers::test
