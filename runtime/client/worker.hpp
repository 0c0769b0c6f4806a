#pragma once

// `butlers-client worker`: a worker of an external butler (actors/README.md
// "Writing a butler in any language") that runs a command per work item. It
// takes items with POST /v1/butlers/{name}/work/recv (long poll), runs the
// command with the route.v1 envelope on stdin (runtime/subprocess), extends the
// item's visibility while the command runs, and acks on exit 0 (the answer
// is the command's stdout: a route_response.v1 document, else the reply
// text) or nacks otherwise. No CAF; talks through the client's `transport`.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/client/butlers_client.hpp"

namespace butlers::client {

/// How a worker runs.
struct worker_options {
  /// The external butler whose items it takes.
  std::string butler;
  /// The command per item (program and arguments; `--exec CMD` runs
  /// `/bin/sh -c CMD`).
  std::vector<std::string> argv;
  /// Items processed at once (one recv loop each).
  size_t concurrency = 1;
  /// Visibility asked for at recv and at every extend.
  std::chrono::milliseconds visibility{30000};
  /// How long one recv waits for an item.
  std::chrono::milliseconds wait{20000};
  /// Bound on one run of the command (it is killed after).
  std::chrono::milliseconds command_timeout{std::chrono::hours{1}};
  /// Largest stdout accepted (more kills the command: nack).
  size_t max_output_bytes = size_t{1} << 20;
  /// One JSON line per event (received, acked, nacked, lost, errors); may
  /// be empty.
  std::function<void(const std::string&)> log;
};

/// One item of a recv answer.
struct work_delivery {
  std::string work_id;
  std::string lease_token;
  /// The route.v1 envelope (JSON text).
  std::string envelope;
  /// Its request_context.request_id.
  std::string request_id;
  uint32_t attempt = 0;
};

/// Reads a recv answer's items; nullopt (and `error`) when it is not one.
std::optional<std::vector<work_delivery>> parse_deliveries(
  const std::string& body, std::string* error);

/// The ack body for a command that exited 0 with `out` on stdout: `out` as
/// `response` when it is a route_response.v1 object, else a response `ok`
/// whose result's `reply` is `out` without its trailing newlines (no reply
/// when that is empty).
std::string ack_body(const work_delivery& d, const std::string& out,
                     double duration_ms);

/// What a worker has done so far.
struct worker_counts {
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> nacked{0};
  /// Items whose token went stale while the command ran (409 on extend or
  /// ack): another worker has them now.
  std::atomic<uint64_t> lost{0};
};

/// The worker loop.
class worker {
 public:
  worker(std::shared_ptr<transport> t, worker_options o);

  /// Runs `concurrency` recv loops until `stop` is true, then lets the
  /// commands running finish (and acks or nacks them) and returns.
  void run(const std::atomic<bool>& stop);

  /// Runs the command for `d`, extending while it runs, then acks or nacks.
  void process(const work_delivery& d);

  const worker_counts& counts() const {
    return counts_;
  }

 private:
  void loop(const std::atomic<bool>& stop);
  response post(const std::string& path, const std::string& body,
                const std::atomic<bool>& cancel);
  void log(const std::string& event, const std::string& work_id,
           const std::string& detail);

  std::shared_ptr<transport> transport_;
  worker_options opt_;
  worker_counts counts_;
};

} // namespace butlers::client
