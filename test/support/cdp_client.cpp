#include "test/support/cdp_client.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/poll.hpp"

extern char** environ;

namespace butlers::test {

namespace {

/// A copy of `fd` numbered 10 or above (so the child's dup2 onto 3 and 4
/// cannot clobber it), close-on-exec; closes `fd`.
int high_fd(int fd) {
  int out = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return out;
}

} // namespace

std::unique_ptr<cdp_client> cdp_client::launch(const std::string& chromium,
                                               const std::string& profile_dir,
                                               const std::string& log_path,
                                               std::string& error) {
  if (::access(chromium.c_str(), X_OK) != 0) {
    error = chromium + " is not there (scripts/setup.sh installs chromium)";
    return nullptr;
  }
  int in[2];  // to the browser: it reads in[0] as fd 3
  int out[2]; // from the browser: it writes out[1] as fd 4
  if (::pipe(in) != 0 || ::pipe(out) != 0) {
    error = std::string{"pipe: "} + std::strerror(errno);
    return nullptr;
  }
  for (auto* fds : {in, out})
    for (int i = 0; i < 2; ++i)
      fds[i] = high_fd(fds[i]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_adddup2(&fa, in[0], 3);
  posix_spawn_file_actions_adddup2(&fa, out[1], 4);
  std::vector<std::string> args{chromium,
                                "--headless=new",
                                "--remote-debugging-pipe",
                                "--no-sandbox",
                                "--disable-gpu",
                                "--disable-dev-shm-usage",
                                "--no-first-run",
                                "--no-default-browser-check",
                                "--disable-extensions",
                                "--disable-background-networking",
                                "--disable-sync",
                                "--metrics-recording-only",
                                "--mute-audio",
                                "--hide-scrollbars",
                                "--user-data-dir=" + profile_dir,
                                "about:blank"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::unique_ptr<cdp_client> c{new cdp_client};
  int rc = ::posix_spawn(&c->pid_, chromium.c_str(), &fa, nullptr, argv.data(),
                         environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    c->pid_ = -1;
    error = "cannot start " + chromium + ": " + std::strerror(rc);
    return nullptr;
  }
  c->to_browser_ = in[1];
  c->from_browser_ = out[0];
  c->reader_ = std::thread{[raw = c.get()] {
    raw->read_loop();
  }};
  return c;
}

cdp_client::~cdp_client() {
  if (to_browser_ >= 0) {
    // Browser.close asks it to leave; closing its input pipe does too.
    std::string msg = R"({"id":0,"method":"Browser.close"})";
    msg.push_back('\0');
    [[maybe_unused]] auto n = ::write(to_browser_, msg.data(), msg.size());
    ::close(to_browser_);
  }
  if (pid_ > 0) {
    if (!eventually(
          [this] {
            return ::waitpid(pid_, nullptr, WNOHANG) == pid_;
          },
          std::chrono::seconds{20}, std::chrono::milliseconds{50})) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  if (reader_.joinable())
    reader_.join();
  if (from_browser_ >= 0)
    ::close(from_browser_);
}

void cdp_client::read_loop() {
  std::string buf;
  char chunk[65536];
  for (;;) {
    auto n = ::read(from_browser_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    buf.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (auto end = buf.find('\0', start); end != std::string::npos;
         end = buf.find('\0', start)) {
      rapidjson::Document d;
      auto text = std::string_view{buf}.substr(start, end - start);
      start = end + 1;
      if (json::parse(text, d) || !d.IsObject())
        continue;
      std::lock_guard<std::mutex> guard{mtx_};
      if (d.HasMember("id") && d["id"].IsInt64()) {
        cdp_reply r;
        if (d.HasMember("result")) {
          r.ok = true;
          r.json = json::to_string(d["result"]);
        } else {
          r.json = d.HasMember("error") ? json::to_string(d["error"])
                                        : std::string{"no result"};
        }
        replies_[d["id"].GetInt64()] = std::move(r);
        cv_.notify_all();
      } else if (d.HasMember("method") && d["method"].IsString()) {
        if (events_.size() >= max_events) {
          ++dropped_;
          continue;
        }
        cdp_event e;
        e.method = d["method"].GetString();
        if (d.HasMember("sessionId") && d["sessionId"].IsString())
          e.session = d["sessionId"].GetString();
        if (d.HasMember("params"))
          e.params = json::to_string(d["params"]);
        events_.push_back(std::move(e));
      }
    }
    buf.erase(0, start);
  }
  std::lock_guard<std::mutex> guard{mtx_};
  closed_ = true;
  cv_.notify_all();
}

cdp_reply cdp_client::call(const std::string& method, const std::string& params,
                           const std::string& session,
                           std::chrono::milliseconds timeout) {
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    id = next_id_++;
  }
  std::string msg = R"({"id":)" + std::to_string(id) + R"(,"method":)"
                    + json::quote(method) + R"(,"params":)" + params;
  if (!session.empty())
    msg += R"(,"sessionId":)" + json::quote(session);
  msg += "}";
  msg.push_back('\0');
  size_t off = 0;
  while (off < msg.size()) {
    auto n = ::write(to_browser_, msg.data() + off, msg.size() - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return {false, "write to the browser failed"};
    off += static_cast<size_t>(n);
  }
  std::unique_lock<std::mutex> guard{mtx_};
  if (!cv_.wait_for(guard, timeout, [&] {
        return closed_ || replies_.count(id) > 0;
      }))
    return {false, "no reply to " + method + " in time"};
  auto i = replies_.find(id);
  if (i == replies_.end())
    return {false, "the browser went away during " + method};
  auto r = std::move(i->second);
  replies_.erase(i);
  return r;
}

std::vector<cdp_event> cdp_client::events() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return events_;
}

void cdp_client::clear_events() {
  std::lock_guard<std::mutex> guard{mtx_};
  events_.clear();
}

uint64_t cdp_client::dropped_events() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return dropped_;
}

bool cdp_client::connected() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return !closed_;
}

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0)
      continue; // '=' padding and line breaks
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

} // namespace butlers::test
