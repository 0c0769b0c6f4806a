#include "runtime/client/cli.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "runtime/client/butlers_client.hpp"
#include "runtime/client/worker.hpp"

namespace butlers::client {

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

/// Options every subcommand shares.
struct common_args {
  std::string url;
  std::string token_env = "BUTLERS_HTTP_TOKEN";
  size_t shards = 4;
  size_t queue_size = 1000;
  int max_attempts = 8;
  int base_ms = 100;
  int cap_ms = 20000;
  int timeout_ms = 30000;
  double wait_s = 60;
  std::string spool;
  bool verbose = false;
};

std::string json_string(const std::string& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return buf.GetString();
}

std::string now_rfc3339() {
  auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

std::string random_id() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << rd() << rd() << rd() << rd();
  return s.str();
}

/// Library log records as JSON lines on stderr (warnings and errors, or
/// everything with --verbose).
std::function<void(const log_record&)> stderr_log(bool verbose) {
  return [verbose](const log_record& r) {
    if (!verbose && (r.level == log_level::debug || r.level == log_level::info))
      return;
    static std::mutex mtx;
    std::lock_guard<std::mutex> guard{mtx};
    std::cerr << R"({"level":")" << to_string(r.level) << R"(","event":")"
              << r.event << R"(","key":)" << json_string(std::string{r.key})
              << R"(,"sequence":)" << r.sequence << R"(,"attempt":)"
              << r.attempt << R"(,"status":)" << r.status << R"(,"delay_ms":)"
              << r.delay.count() << R"(,"message":)"
              << json_string(std::string{r.message}) << "}\n";
  };
}

std::string failure_json(const op_failure& f) {
  return R"({"failed":true,"key":)" + json_string(f.key) + R"(,"sequence":)"
         + std::to_string(f.sequence) + R"(,"identity":)"
         + json_string(f.identity) + R"(,"reason":")" + to_string(f.reason)
         + R"(","status":)" + std::to_string(f.status) + R"(,"attempts":)"
         + std::to_string(f.attempts) + R"(,"spooled":)"
         + (f.spooled ? "true" : "false") + R"(,"message":)"
         + json_string(f.message) + "}";
}

std::shared_ptr<transport> transport_of(const common_args& a) {
  http_options h;
  h.url = a.url;
  if (h.url.empty()) {
    auto* env = std::getenv("BUTLERS_URL");
    h.url = env != nullptr ? env : "http://127.0.0.1:8470";
  }
  if (auto* token = std::getenv(a.token_env.c_str()))
    h.token = token;
  h.timeout = milliseconds{a.timeout_ms};
  h.max_idle_connections = a.shards + 2;
  return make_http_transport(std::move(h));
}

options options_of(const common_args& a) {
  options o;
  o.shards = a.shards;
  o.queue_size = a.queue_size;
  o.retry.max_attempts = a.max_attempts;
  o.retry.base = milliseconds{a.base_ms};
  o.retry.cap = milliseconds{a.cap_ms};
  o.spool_path = a.spool;
  o.log = stderr_log(a.verbose);
  return o;
}

steady_clock::time_point deadline_of(const common_args& a) {
  return steady_clock::now()
         + std::chrono::duration_cast<steady_clock::duration>(
           std::chrono::duration<double>(a.wait_s));
}

/// Exit code of a close report plus the failures seen.
int close_exit(const close_report& r, size_t failed) {
  for (auto& f : r.undelivered)
    std::cout << failure_json(f) << "\n";
  std::cout.flush();
  if (!r.undelivered.empty())
    return exit_undelivered;
  return failed > 0 ? exit_failed : exit_ok;
}

// -- send
// -----------------------------------------------------------------------

struct send_args {
  std::string text;
  std::string envelope_file;
  std::string channel = "api";
  std::string sender = "butlers-client";
  std::string endpoint = "butlers-client";
  std::string thread;
  std::string event_id;
  std::string key;
};

std::string envelope_of(const send_args& s) {
  auto event_id = s.event_id.empty() ? random_id() : s.event_id;
  return R"({"schema_version":"ingest.v1","source":{"channel":)"
         + json_string(s.channel) + R"(,"provider":"internal",)"
         + R"("endpoint_identity":)" + json_string(s.endpoint)
         + R"(},"event":{"external_event_id":)" + json_string(event_id)
         + R"(,"external_thread_id":)"
         + (s.thread.empty() ? std::string{"null"} : json_string(s.thread))
         + R"(,"observed_at":")" + now_rfc3339() + R"("},"sender":{"identity":)"
         + json_string(s.sender) + R"(},"payload":{"raw":{"text":)"
         + json_string(s.text) + R"(},"normalized_text":)" + json_string(s.text)
         + "}}";
}

int run_send(const common_args& a, const send_args& s) {
  std::string body;
  if (!s.envelope_file.empty()) {
    std::ifstream in{s.envelope_file};
    if (!in) {
      std::cerr << "butlers-client: cannot read " << s.envelope_file << "\n";
      return exit_runtime;
    }
    std::ostringstream all;
    all << in.rdbuf();
    body = all.str();
  } else {
    body = envelope_of(s);
  }
  auto o = options_of(a);
  std::mutex mtx;
  std::vector<std::string> lines;
  size_t failed = 0;
  o.on_delivered = [&](const enqueue_ack&, int, const std::string& b) {
    std::lock_guard<std::mutex> guard{mtx};
    lines.push_back(b);
  };
  o.on_failure = [&](const op_failure& f) {
    std::lock_guard<std::mutex> guard{mtx};
    if (f.reason != failure_reason::undelivered) {
      ++failed;
      lines.push_back(failure_json(f));
    }
  };
  client c{transport_of(a), std::move(o)};
  auto r = c.submit_ingest(body, s.key);
  if (!r) {
    std::cerr << "butlers-client: " << to_string(r.error) << ": " << r.message
              << "\n";
    return r.error == submit_errc::invalid ? exit_usage : exit_runtime;
  }
  auto report = c.close(deadline_of(a));
  std::lock_guard<std::mutex> guard{mtx};
  for (auto& l : lines)
    std::cout << l << "\n";
  return close_exit(report, failed);
}

// -- replay
// ---------------------------------------------------------------------

/// How far a replay got: lines (and bytes) of the file that need not be
/// read again.
struct progress {
  uint64_t line = 0;
  uint64_t offset = 0;
};

progress read_progress(const std::string& path) {
  progress p;
  std::ifstream in{path};
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  rapidjson::Document doc;
  doc.Parse(text.c_str());
  if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("line")
      && doc["line"].IsUint64() && doc.HasMember("offset")
      && doc["offset"].IsUint64()) {
    p.line = doc["line"].GetUint64();
    p.offset = doc["offset"].GetUint64();
  }
  return p;
}

/// Replaces `path` atomically (temporary file, fsync, rename).
bool write_progress(const std::string& path, const progress& p) {
  auto tmp = path + ".tmp";
  auto text = R"({"line":)" + std::to_string(p.line) + R"(,"offset":)"
              + std::to_string(p.offset) + "}\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  bool ok = ::write(fd, text.data(), text.size())
              == static_cast<ssize_t>(text.size())
            && ::fsync(fd) == 0;
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

struct replay_args {
  std::string file;
  std::string progress_file;
  bool print_acks = false;
};

/// Tracks which lines finished, to know the contiguous prefix that needs no
/// resend (without a spool, that is what progress may record).
class completion_tracker {
 public:
  void submitted(uint64_t seq, uint64_t line, uint64_t end_offset) {
    std::lock_guard<std::mutex> guard{mtx_};
    lines_[seq] = {line, end_offset, false};
  }
  void finished(uint64_t seq) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = lines_.find(seq);
    if (it != lines_.end())
      it->second.done = true;
    while (!lines_.empty() && lines_.begin()->second.done) {
      done_ = {lines_.begin()->second.line, lines_.begin()->second.end};
      lines_.erase(lines_.begin());
    }
  }
  /// Lines skipped (blank, not JSON) count as done once everything before
  /// them is.
  void skipped(uint64_t line, uint64_t end_offset) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (lines_.empty())
      done_ = {line, end_offset};
  }
  progress done() {
    std::lock_guard<std::mutex> guard{mtx_};
    return done_;
  }
  void start_at(progress p) {
    done_ = p;
  }

 private:
  struct entry {
    uint64_t line;
    uint64_t end;
    bool done;
  };
  std::mutex mtx_;
  std::map<uint64_t, entry> lines_;
  progress done_;
};

/// Submits one line, waiting while its shard is full; false when the
/// client refused it for good (spool failure, closed).
bool submit_line(client& c, const std::string& line, submit_result& r) {
  for (;;) {
    r = c.submit_ingest(line);
    if (r || r.error != submit_errc::queue_full)
      return r || r.error == submit_errc::invalid;
    // The shards are full: wait for room (replay is the only producer).
    std::this_thread::sleep_for(milliseconds{5});
  }
}

int run_replay(const common_args& a, const replay_args& ra) {
  std::ifstream in{ra.file, std::ios::binary};
  if (!in) {
    std::cerr << "butlers-client: cannot read " << ra.file << "\n";
    return exit_runtime;
  }
  auto progress_path = ra.progress_file.empty() ? ra.file + ".progress"
                                                : ra.progress_file;
  auto start = read_progress(progress_path);
  completion_tracker tracker;
  tracker.start_at(start);
  std::atomic<size_t> failed{0};
  auto o = options_of(a);
  o.on_delivered = [&](const enqueue_ack& ack, int, const std::string&) {
    tracker.finished(ack.sequence);
  };
  o.on_failure = [&](const op_failure& f) {
    if (f.reason == failure_reason::undelivered)
      return;
    ++failed;
    std::cout << failure_json(f) << std::endl;
    tracker.finished(f.sequence);
  };
  bool spooled = !a.spool.empty();
  std::unique_ptr<client> c;
  try {
    c = std::make_unique<client>(transport_of(a), std::move(o));
  } catch (const std::exception& e) {
    std::cerr << "butlers-client: " << e.what() << "\n";
    return exit_runtime;
  }
  in.seekg(static_cast<std::streamoff>(start.offset));
  progress acked = start;
  auto last_write = steady_clock::now();
  std::string line;
  uint64_t lineno = start.line;
  uint64_t offset = start.offset;
  while (std::getline(in, line)) {
    ++lineno;
    offset += line.size() + 1;
    if (in.eof())
      break; // a last line without newline is not complete yet
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      tracker.skipped(lineno, offset);
      acked = {lineno, offset};
      continue;
    }
    submit_result r;
    if (!submit_line(*c, line, r)) {
      std::cerr << "butlers-client: line " << lineno << ": "
                << to_string(r.error) << ": " << r.message << "\n";
      write_progress(progress_path, spooled ? acked : tracker.done());
      c->close(steady_clock::now());
      return exit_runtime;
    }
    if (!r) {
      ++failed;
      std::cout << R"({"failed":true,"line":)" << lineno
                << R"(,"reason":"invalid","message":)" << json_string(r.message)
                << "}" << std::endl;
      tracker.skipped(lineno, offset);
    } else {
      tracker.submitted(r.ack->sequence, lineno, offset);
      if (ra.print_acks)
        std::cout << R"({"line":)" << lineno << R"(,"key":)"
                  << json_string(r.ack->key) << R"(,"sequence":)"
                  << r.ack->sequence << R"(,"status":"enqueued"})" << std::endl;
    }
    acked = {lineno, offset};
    if (steady_clock::now() - last_write > milliseconds{200}) {
      write_progress(progress_path, spooled ? acked : tracker.done());
      last_write = steady_clock::now();
    }
  }
  auto report = c->close(deadline_of(a));
  write_progress(progress_path, spooled ? acked : tracker.done());
  return close_exit(report, failed);
}

// -- await, inspect -----------------------------------------------------------

/// Sends what a spool holds and waits for it (the CLI's await: the spool is
/// what survives between runs).
int run_await(const common_args& a) {
  if (a.spool.empty()) {
    std::cerr << "butlers-client: await needs --spool\n";
    return exit_usage;
  }
  std::atomic<size_t> failed{0};
  auto o = options_of(a);
  o.on_failure = [&](const op_failure& f) {
    if (f.reason == failure_reason::undelivered)
      return;
    ++failed;
    std::cout << failure_json(f) << std::endl;
  };
  std::unique_ptr<client> c;
  try {
    c = std::make_unique<client>(transport_of(a), std::move(o));
  } catch (const std::exception& e) {
    std::cerr << "butlers-client: " << e.what() << "\n";
    return exit_runtime;
  }
  auto recovered = c->recovered();
  auto report = c->close(deadline_of(a));
  std::cout << R"({"recovered":)" << recovered << R"(,"failed":)"
            << failed.load() << R"(,"undelivered":)"
            << report.undelivered.size() << "}" << std::endl;
  return close_exit(report, failed);
}

int run_inspect(const common_args& a, const std::string& id) {
  client c{transport_of(a), options_of(a)};
  auto r = c.inspect_request(id);
  if (r.transport_error) {
    std::cerr << "butlers-client: " << r.error << "\n";
    return exit_runtime;
  }
  std::cout << r.body << (r.body.empty() || r.body.back() != '\n' ? "\n" : "");
  if (r.status == 200)
    return exit_ok;
  return r.status == 404 ? exit_failed : exit_runtime;
}

/// Set by SIGINT and SIGTERM: the worker stops taking items.
std::atomic<bool> worker_stop{false};

extern "C" void on_worker_signal(int) {
  worker_stop = true;
}

/// `worker`: takes the butler's items until SIGINT or SIGTERM, runs the
/// command per item, acks or nacks (runtime/client/worker.hpp).
int run_worker(const common_args& a, worker_options o, const std::string& cmd) {
  o.argv = {"/bin/sh", "-c", cmd};
  o.log = [verbose = a.verbose](const std::string& line) {
    static std::mutex mtx;
    if (!verbose && line.find(R"("event":"received")") != std::string::npos)
      return;
    std::lock_guard<std::mutex> guard{mtx};
    std::cerr << line << "\n";
  };
  auto c = a;
  // A recv waits up to wait_ms: the exchange may take that much longer.
  c.timeout_ms = std::max<int>(a.timeout_ms,
                               static_cast<int>(o.wait.count()) + 10000);
  struct sigaction sa {};
  sa.sa_handler = on_worker_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  worker w{transport_of(c), std::move(o)};
  w.run(worker_stop);
  auto& n = w.counts();
  std::cout << R"({"received":)" << n.received << R"(,"acked":)" << n.acked
            << R"(,"nacked":)" << n.nacked << R"(,"lost":)" << n.lost << "}"
            << std::endl;
  return exit_ok;
}

void add_common(CLI::App& app, common_args& a) {
  // The common options may stand before or after the subcommand: an option
  // a subcommand does not know falls through to the app (subcommands added
  // after this inherit it).
  app.fallthrough();
  app.add_option("--url", a.url,
                 "the node's base URL (default $BUTLERS_URL, else "
                 "http://127.0.0.1:8470)");
  app
    .add_option("--token-env", a.token_env,
                "environment variable holding the bearer token")
    ->capture_default_str();
  app.add_option("--shards", a.shards, "shard queues (workers)")
    ->capture_default_str()
    ->check(CLI::Range(1, 256));
  app.add_option("--queue-size", a.queue_size, "operations per shard")
    ->capture_default_str()
    ->check(CLI::Range(1, 1000000));
  app.add_option("--max-attempts", a.max_attempts, "attempts per operation")
    ->capture_default_str()
    ->check(CLI::Range(1, 1000));
  app.add_option("--backoff-base-ms", a.base_ms, "backoff base")
    ->capture_default_str()
    ->check(CLI::Range(0, 600000));
  app.add_option("--backoff-cap-ms", a.cap_ms, "backoff cap")
    ->capture_default_str()
    ->check(CLI::Range(0, 3600000));
  app.add_option("--timeout-ms", a.timeout_ms, "bound on one HTTP exchange")
    ->capture_default_str()
    ->check(CLI::Range(100, 3600000));
  app
    .add_option("--wait-s", a.wait_s,
                "how long to wait for delivery before giving up (exit 4)")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--verbose", a.verbose, "log retries and progress to stderr");
}

} // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"butlers-client: feed a butlers node (ordered, retried, "
               "optionally spooled)"};
  app.require_subcommand(1);
  common_args a;
  add_common(app, a);

  send_args s;
  auto* send = app.add_subcommand("send", "submit one ingest.v1 envelope");
  send->add_option("text", s.text, "the message text");
  send->add_option("--envelope", s.envelope_file,
                   "an ingest.v1 envelope file instead of text");
  send->add_option("--channel", s.channel, "source.channel")
    ->capture_default_str();
  send->add_option("--sender", s.sender, "sender.identity")
    ->capture_default_str();
  send->add_option("--endpoint", s.endpoint, "source.endpoint_identity")
    ->capture_default_str();
  send->add_option("--thread", s.thread, "event.external_thread_id");
  send->add_option("--event-id", s.event_id,
                   "event.external_event_id (default random; fix it to make "
                   "a re-run idempotent)");
  send->add_option("--key", s.key, "ordering key (default the thread)");

  replay_args ra;
  auto* replay = app.add_subcommand(
    "replay", "submit a JSONL file of envelopes, in order per key, resumable");
  replay->add_option("file", ra.file, "one ingest.v1 envelope per line")
    ->required();
  replay->add_option("--spool", a.spool,
                     "spool file: acknowledged lines survive a crash");
  replay->add_option("--progress", ra.progress_file,
                     "progress file (default FILE.progress)");
  replay->add_flag("--acks", ra.print_acks,
                   "print each enqueue_ack as a JSON line");

  auto* await = app.add_subcommand("await", "send what a spool holds and wait "
                                            "until it is durable");
  await->add_option("--spool", a.spool, "the spool file")->required();

  std::string request_id;
  auto* inspect = app.add_subcommand("inspect", "GET /v1/requests/{id}");
  inspect->add_option("request_id", request_id, "the request id")->required();

  worker_options wo;
  std::string exec;
  int64_t visibility_ms = 30000;
  int64_t wait_ms = 20000;
  auto* work = app.add_subcommand("worker", "take an external butler's work "
                                            "items and run CMD per item");
  work->add_option("--butler", wo.butler, "the external butler")->required();
  work
    ->add_option("--exec", exec,
                 "run by /bin/sh -c per item: the route.v1 envelope on "
                 "stdin; exit 0 and stdout (a route_response.v1, else the "
                 "reply text) acks, anything else nacks")
    ->required();
  work->add_option("--concurrency", wo.concurrency, "items at once")
    ->capture_default_str()
    ->check(CLI::Range(1, 256));
  work
    ->add_option("--visibility-ms", visibility_ms,
                 "visibility asked for; extended every third of it while "
                 "CMD runs")
    ->capture_default_str()
    ->check(CLI::Range(250, 43200000));
  work->add_option("--wait-ms", wait_ms, "long poll of one recv")
    ->capture_default_str()
    ->check(CLI::Range(0, 60000));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_usage;
  }
  try {
    if (*send) {
      if (s.text.empty() == s.envelope_file.empty()) {
        std::cerr << "butlers-client: send takes TEXT or --envelope FILE\n";
        return exit_usage;
      }
      return run_send(a, s);
    }
    if (*replay)
      return run_replay(a, ra);
    if (*await)
      return run_await(a);
    if (*work) {
      wo.visibility = milliseconds{visibility_ms};
      wo.wait = milliseconds{wait_ms};
      return run_worker(a, std::move(wo), exec);
    }
    return run_inspect(a, request_id);
  } catch (const std::exception& e) {
    std::cerr << "butlers-client: " << e.what() << "\n";
    return exit_runtime;
  }
}

} // namespace butlers::client
