#pragma once

// A small Chrome DevTools Protocol client for browser tests: launches
// headless Chromium with `--remote-debugging-pipe`, which speaks CDP as JSON
// messages ended by a NUL byte over the child's fd 3 (commands to the
// browser) and fd 4 (replies and events from it); no websocket. A reader
// thread collects replies by id and events; `call` waits for its reply
// under a deadline. See test/fixtures/dashboard/README.md for the sources.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace butlers::test {

/// The answer to one command.
struct cdp_reply {
  /// False when the browser answered with an error, or none came in time.
  bool ok = false;
  /// The `result` object as JSON (ok), or the error's text.
  std::string json;
};

/// An event the browser sent: its method, the session it belongs to ("" for
/// the browser itself) and its `params` as JSON.
struct cdp_event {
  std::string method;
  std::string session;
  std::string params;
};

class cdp_client {
 public:
  /// Starts `chromium` headless with a fresh profile in `profile_dir`, its
  /// output to `log_path`. Null (and `error` says why) when it cannot.
  static std::unique_ptr<cdp_client> launch(const std::string& chromium,
                                            const std::string& profile_dir,
                                            const std::string& log_path,
                                            std::string& error);

  /// Closes the pipe, asks the browser to leave and waits for it (SIGKILL
  /// after a deadline).
  ~cdp_client();

  cdp_client(const cdp_client&) = delete;
  cdp_client& operator=(const cdp_client&) = delete;

  /// Sends `method` with `params` (a JSON object) to `session` ("" for the
  /// browser) and waits up to `timeout` for the reply.
  cdp_reply call(const std::string& method, const std::string& params = "{}",
                 const std::string& session = "",
                 std::chrono::milliseconds timeout = std::chrono::seconds{60});

  /// Every event received so far (at most `max_events`; more are counted
  /// in `dropped_events`).
  std::vector<cdp_event> events() const;

  /// Forgets the events received so far.
  void clear_events();

  /// Events not kept because `max_events` were already.
  uint64_t dropped_events() const;

  /// Whether the browser still answers (its pipe is open).
  bool connected() const;

  static constexpr size_t max_events = 20000;

 private:
  cdp_client() = default;
  void read_loop();

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  std::thread reader_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  int64_t next_id_ = 1;
  std::map<int64_t, cdp_reply> replies_;
  std::vector<cdp_event> events_;
  uint64_t dropped_ = 0;
  bool closed_ = false;
};

/// Decodes standard base64 (Page.captureScreenshot's `data`).
std::string base64_decode(const std::string& in);

} // namespace butlers::test
