#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace butlers::test {

/// What a finished child process left behind.
struct process_result {
  /// Exit code, or -1 when killed by a signal.
  int exit_code = -1;
  /// The terminating signal, 0 for a normal exit.
  int signal = 0;
  std::string out;
  std::string err;
};

/// Runs a command to completion (bounded by `timeout`, then SIGKILL) and
/// collects its output.
process_result run_process(
  const std::vector<std::string>& argv,
  const std::map<std::string, std::string>& env = {},
  std::chrono::milliseconds timeout = std::chrono::seconds{60});

/// A real `butlers-node run` child process. Its stdout is read until the
/// "listening" line; stderr (the JSON log) goes to a file kept for
/// diagnostics. The destructor kills a node that is still running.
class node_process {
 public:
  /// Writes `config_toml` to a temporary file and starts the node on it.
  /// `env` adds to (or overrides) the inherited environment; the node runs
  /// in `cwd` ("": this process's working directory).
  node_process(const std::string& config_toml,
               std::map<std::string, std::string> env = {},
               const std::string& cwd = {});
  ~node_process();

  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  /// Waits for the "listening" line; returns the HTTP port or nullopt if the
  /// process exited or `timeout` passed first.
  std::optional<uint16_t> wait_listening(
    std::chrono::milliseconds timeout = std::chrono::seconds{30});

  /// Sends `sig` (SIGTERM, SIGINT, SIGKILL, ...).
  void signal(int sig);

  /// Waits for the exit; nullopt if it is still running after `timeout`.
  std::optional<process_result> wait_exit(std::chrono::milliseconds timeout);

  /// The node's log so far.
  std::string log() const;

  pid_t pid() const {
    return pid_;
  }

  const std::string& config_path() const {
    return config_path_;
  }

 private:
  std::string dir_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_fd_ = -1;
  std::string out_;
  bool exited_ = false;
};

/// A fresh temporary directory (removed by the caller when it wants).
std::string make_temp_dir(const std::string& prefix);

/// Reads a whole file.
std::string read_file(const std::string& path);

/// Writes a whole file.
void write_file(const std::string& path, const std::string& content);

} // namespace butlers::test
