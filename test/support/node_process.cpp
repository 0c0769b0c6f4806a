#include "test/support/node_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace butlers::test {

namespace {

using clock_type = std::chrono::steady_clock;

int open_pidfd(pid_t pid) {
  auto fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0)
    throw std::runtime_error(std::string{"pidfd_open: "}
                             + std::strerror(errno));
  return fd;
}

int remaining_ms(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - clock_type::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

std::vector<std::string> merged_env(
  const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> all;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos)
      all[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : extra)
    all[k] = v;
  std::vector<std::string> out;
  for (auto& [k, v] : all)
    out.push_back(k + "=" + v);
  return out;
}

/// fork + exec with stdout to `out_fd` and stderr to `err_fd`, in `cwd`
/// ("": this process's).
pid_t spawn(const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& env, int out_fd,
            int err_fd, const std::string& cwd = {}) {
  auto envs = merged_env(env);
  std::vector<char*> cargv, cenv;
  for (auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : envs)
    cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  auto pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::setpgid(0, 0);
    // Give the child a clean signal state.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  return pid;
}

} // namespace

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out{path};
  out << content;
}

process_result run_process(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env,
                           std::chrono::milliseconds timeout) {
  auto dir = make_temp_dir("butlers-proc");
  auto out_path = dir + "/out";
  auto err_path = dir + "/err";
  int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto pid = spawn(argv, env, out_fd, err_fd);
  ::close(out_fd);
  ::close(err_fd);
  int pidfd = open_pidfd(pid);
  pollfd p{pidfd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
    ::kill(pid, SIGKILL);
  ::close(pidfd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  process_result r;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.signal = WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  ::rmdir(dir.c_str());
  return r;
}

node_process::node_process(const std::string& config_toml,
                           std::map<std::string, std::string> env,
                           const std::string& cwd) {
  dir_ = make_temp_dir("butlers-node");
  config_path_ = dir_ + "/node.toml";
  log_path_ = dir_ + "/node.log";
  write_file(config_path_, config_toml);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  int err_fd = ::open(log_path_.c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = spawn({BUTLERS_NODE_BINARY, "run", "--config", config_path_}, env,
               pipefd[1], err_fd, cwd);
  ::close(pipefd[1]);
  ::close(err_fd);
  out_fd_ = pipefd[0];
  pidfd_ = open_pidfd(pid_);
}

node_process::~node_process() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0)
    ::close(out_fd_);
  if (pidfd_ >= 0)
    ::close(pidfd_);
  ::unlink(config_path_.c_str());
  ::unlink(log_path_.c_str());
  ::rmdir(dir_.c_str());
}

std::optional<uint16_t> node_process::wait_listening(
  std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    auto event = out_.find(R"("event":"listening")");
    auto port = out_.find(R"("port":)", event == std::string::npos ? 0 : event);
    auto end = port == std::string::npos ? port : out_.find('}', port);
    if (event != std::string::npos && end != std::string::npos)
      return static_cast<uint16_t>(std::stoi(out_.substr(port + 7)));
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1)
      return std::nullopt;
    char buf[4096];
    auto n = ::read(out_fd_, buf, sizeof(buf));
    if (n <= 0)
      return std::nullopt; // exited before listening
    out_.append(buf, static_cast<size_t>(n));
  }
}

void node_process::signal(int sig) {
  if (!exited_)
    ::kill(pid_, sig);
}

std::optional<process_result> node_process::wait_exit(
  std::chrono::milliseconds timeout) {
  pollfd p{pidfd_, POLLIN, 0};
  if (!exited_ && ::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
    return std::nullopt;
  process_result r;
  int status = 0;
  if (!exited_) {
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    if (WIFEXITED(status))
      r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      r.signal = WTERMSIG(status);
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out_fd_, buf, sizeof(buf))) > 0)
    out_.append(buf, static_cast<size_t>(n));
  r.out = out_;
  r.err = log();
  return r;
}

std::string node_process::log() const {
  return read_file(log_path_);
}

} // namespace butlers::test
