#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "runtime/client/backoff.hpp"
#include "runtime/client/butlers_client.hpp"
#include "runtime/client/spool.hpp"

namespace butlers::client {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

/// One operation in a shard queue.
struct queued {
  uint64_t seq = 0;
  operation op;
};

/// A shard: its queue (the front is the one running) and its worker.
struct shard_state {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<queued> q;
  std::thread worker;
};

/// What the client remembers of a key while it has operations in flight or
/// failures nobody has asked for yet.
struct key_state {
  /// The key's last sequence.
  uint64_t last_seq = 0;
  /// Sequences queued and not finished, oldest first.
  std::deque<uint64_t> pending;
  /// Failures not yet returned by await_consistency (at most
  /// `max_unreported`; on_failure saw every one).
  std::vector<op_failure> unreported;
};

constexpr size_t max_unreported = 10000;

/// How one operation ended.
struct outcome {
  enum { delivered, failed, undelivered } kind = failed;
  failure_reason reason = failure_reason::rejected;
  response last;
  int attempts = 0;
};

uint32_t fnv1a(std::string_view s) {
  uint32_t h = 2166136261U;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619U;
  }
  return h;
}

} // namespace

const char* to_string(submit_errc e) {
  switch (e) {
    case submit_errc::queue_full:
      return "queue_full";
    case submit_errc::closed:
      return "closed";
    case submit_errc::invalid:
      return "invalid";
    case submit_errc::spool:
      return "spool";
  }
  return "?";
}

const char* to_string(failure_reason r) {
  switch (r) {
    case failure_reason::rejected:
      return "rejected";
    case failure_reason::exhausted:
      return "exhausted";
    case failure_reason::undelivered:
      return "undelivered";
  }
  return "?";
}

const char* to_string(log_level l) {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
  }
  return "?";
}

struct client::impl {
  std::shared_ptr<transport> tr;
  options opt;
  std::vector<std::unique_ptr<shard_state>> shards;
  /// Serializes submits (sequence, spool record, queue push), the switch to
  /// closing and compaction.
  std::mutex submit_mtx;
  uint64_t next_seq = 1;
  std::unique_ptr<spool> sp;
  std::mutex keys_mtx;
  std::condition_variable keys_cv;
  std::unordered_map<std::string, key_state> keys;
  /// Operations queued and not finished (guarded by keys_mtx).
  size_t outstanding = 0;
  std::atomic<bool> closing{false};
  /// Interrupts exchanges and backoff waits: close's deadline passed.
  std::atomic<bool> abort{false};
  std::mutex sleep_mtx;
  std::condition_variable sleep_cv;
  std::mutex rng_mtx;
  std::mt19937_64 rng;
  size_t recovered = 0;
  std::mutex close_mtx;
  bool closed = false;
  std::mutex undelivered_mtx;
  std::vector<op_failure> undelivered;

  void log(log_level lvl, std::string_view event, const queued* item,
           int attempt, int status, milliseconds delay,
           std::string_view msg) const {
    if (!opt.log)
      return;
    log_record r;
    r.level = lvl;
    r.event = event;
    if (item != nullptr) {
      r.key = item->op.key;
      r.sequence = item->seq;
    }
    r.attempt = attempt;
    r.status = status;
    r.delay = delay;
    r.message = msg;
    opt.log(r);
  }

  size_t shard_of(std::string_view key) const {
    return fnv1a(key) % shards.size();
  }

  void wait(milliseconds d) {
    if (opt.sleep_for) {
      opt.sleep_for(d);
      return;
    }
    std::unique_lock<std::mutex> lk{sleep_mtx};
    sleep_cv.wait_for(lk, d, [this] {
      return abort.load();
    });
  }

  outcome deliver(const queued& item) {
    outcome out;
    request req{"POST", item.op.path, item.op.body};
    for (int attempt = 1;; ++attempt) {
      if (abort) {
        out.kind = outcome::undelivered;
        return out;
      }
      out.attempts = attempt;
      out.last = tr->perform(req, abort);
      if (succeeded(out.last)) {
        out.kind = outcome::delivered;
        return out;
      }
      if (abort) {
        out.kind = outcome::undelivered;
        return out;
      }
      if (!retryable(out.last) || attempt >= opt.retry.max_attempts) {
        out.kind = outcome::failed;
        out.reason = retryable(out.last) ? failure_reason::exhausted
                                         : failure_reason::rejected;
        return out;
      }
      milliseconds delay;
      {
        std::lock_guard<std::mutex> guard{rng_mtx};
        delay = backoff_delay(opt.retry, attempt, out.last.retry_after, rng);
      }
      log(log_level::info, "retry", &item, attempt, out.last.status, delay,
          out.last.transport_error ? out.last.error : out.last.body);
      wait(delay);
    }
  }

  op_failure failure_of(const queued& item, const outcome& o) const {
    op_failure f;
    f.key = item.op.key;
    f.sequence = item.seq;
    f.identity = item.op.identity;
    f.reason = o.kind == outcome::undelivered ? failure_reason::undelivered
                                              : o.reason;
    f.status = o.last.status;
    f.attempts = o.attempts;
    f.message = o.last.transport_error ? o.last.error : o.last.body;
    if (f.reason == failure_reason::undelivered && f.message.empty())
      f.message = "closed before an answer";
    f.spooled = f.reason == failure_reason::undelivered && sp != nullptr;
    return f;
  }

  /// Reports and records the end of the front operation of shard `i`.
  void complete(size_t i, const outcome& o, steady_clock::duration took) {
    auto& s = *shards[i];
    queued item;
    {
      std::lock_guard<std::mutex> guard{s.mtx};
      item = std::move(s.q.front());
    }
    bool ok = o.kind == outcome::delivered;
    if (sp != nullptr && o.kind != outcome::undelivered) {
      std::lock_guard<std::mutex> guard{submit_mtx};
      sp->append_done(item.seq, !ok);
    }
    std::optional<op_failure> failure;
    if (ok) {
      if (opt.on_delivered)
        opt.on_delivered(enqueue_ack{item.op.key, item.seq, "enqueued"},
                         o.last.status, o.last.body);
    } else {
      failure = failure_of(item, o);
      log(log_level::warn, to_string(failure->reason), &item, o.attempts,
          failure->status, milliseconds{0}, failure->message);
      if (failure->reason == failure_reason::undelivered) {
        std::lock_guard<std::mutex> guard{undelivered_mtx};
        undelivered.push_back(*failure);
      }
      if (opt.on_failure)
        opt.on_failure(*failure);
    }
    if (opt.metrics.run_duration)
      opt.metrics.run_duration(i, took, ok);
    size_t depth = 0;
    {
      std::lock_guard<std::mutex> guard{s.mtx};
      s.q.pop_front();
      depth = s.q.size();
    }
    if (opt.metrics.queue_depth)
      opt.metrics.queue_depth(i, depth);
    finish_key(item, std::move(failure));
  }

  void finish_key(const queued& item, std::optional<op_failure> failure) {
    bool idle = false;
    {
      std::lock_guard<std::mutex> guard{keys_mtx};
      auto& ks = keys[item.op.key];
      if (!ks.pending.empty() && ks.pending.front() == item.seq)
        ks.pending.pop_front();
      if (failure && ks.unreported.size() < max_unreported)
        ks.unreported.push_back(std::move(*failure));
      if (ks.pending.empty() && ks.unreported.empty())
        keys.erase(item.op.key);
      idle = --outstanding == 0;
    }
    keys_cv.notify_all();
    if (idle && sp != nullptr && !abort)
      compact_if_idle();
  }

  void compact_if_idle() {
    std::lock_guard<std::mutex> guard{submit_mtx};
    {
      std::lock_guard<std::mutex> kguard{keys_mtx};
      if (outstanding != 0)
        return;
    }
    std::string err;
    if (!sp->compact(next_seq, &err))
      log(log_level::error, "spool_compact_failed", nullptr, 0, 0,
          milliseconds{0}, err);
  }

  void run_shard(size_t i) {
    auto& s = *shards[i];
    for (;;) {
      const queued* item = nullptr;
      {
        std::unique_lock<std::mutex> lk{s.mtx};
        s.cv.wait(lk, [&] {
          return !s.q.empty() || closing.load();
        });
        if (s.q.empty())
          return;
        item = &s.q.front(); // stays put: only this thread pops
      }
      auto start = steady_clock::now();
      auto o = deliver(*item);
      complete(i, o, steady_clock::now() - start);
    }
  }

  /// Puts `item` into its shard and key (queue bounds checked by the
  /// caller).
  void enqueue(queued item) {
    auto i = shard_of(item.op.key);
    {
      std::lock_guard<std::mutex> guard{keys_mtx};
      auto& ks = keys[item.op.key];
      ks.pending.push_back(item.seq);
      ks.last_seq = item.seq;
      ++outstanding;
    }
    auto& s = *shards[i];
    size_t depth = 0;
    {
      std::lock_guard<std::mutex> guard{s.mtx};
      s.q.push_back(std::move(item));
      depth = s.q.size();
    }
    s.cv.notify_one();
    if (opt.metrics.submitted)
      opt.metrics.submitted(i);
    if (opt.metrics.queue_depth)
      opt.metrics.queue_depth(i, depth);
  }

  void open_spool() {
    spool::contents c;
    sp = spool::open(opt.spool_path, c);
    next_seq = c.next_seq;
    if (c.torn_bytes > 0)
      log(log_level::warn, "spool_torn_tail", nullptr, 0, 0, milliseconds{0},
          std::to_string(c.torn_bytes) + " bytes cut");
    recovered = c.pending.size();
    for (auto& r : c.pending)
      enqueue(queued{r.seq, std::move(r.op)});
    if (recovered > 0)
      log(log_level::info, "spool_replayed", nullptr, 0, 0, milliseconds{0},
          std::to_string(recovered) + " operations");
  }
};

client::client(std::shared_ptr<transport> t, options o)
  : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  m.tr = std::move(t);
  m.opt = std::move(o);
  if (!m.tr)
    throw std::invalid_argument("butlers_client: no transport");
  if (m.opt.shards == 0 || m.opt.queue_size == 0 || m.opt.retry.max_attempts < 1)
    throw std::invalid_argument(
      "butlers_client: shards, queue_size and max_attempts must be >= 1");
  m.rng.seed(m.opt.seed != 0 ? m.opt.seed : std::random_device{}());
  for (size_t i = 0; i < m.opt.shards; ++i)
    m.shards.push_back(std::make_unique<shard_state>());
  if (!m.opt.spool_path.empty())
    m.open_spool();
  for (size_t i = 0; i < m.opt.shards; ++i)
    m.shards[i]->worker = std::thread([this, i] {
      impl_->run_shard(i);
    });
}

client::~client() {
  close(steady_clock::now());
}

submit_result client::submit(operation op) {
  auto& m = *impl_;
  submit_result r;
  if (op.path.empty() || op.path.front() != '/') {
    r.error = submit_errc::invalid;
    r.message = "an operation needs a path";
    return r;
  }
  std::lock_guard<std::mutex> guard{m.submit_mtx};
  if (m.closing) {
    r.error = submit_errc::closed;
    r.message = "the client is closed";
    return r;
  }
  auto i = m.shard_of(op.key);
  {
    std::lock_guard<std::mutex> sguard{m.shards[i]->mtx};
    if (m.shards[i]->q.size() >= m.opt.queue_size) {
      if (m.opt.metrics.queue_full)
        m.opt.metrics.queue_full(i);
      r.error = submit_errc::queue_full;
      r.message = "shard " + std::to_string(i) + " holds "
                  + std::to_string(m.opt.queue_size) + " operations";
      return r;
    }
  }
  auto seq = m.next_seq;
  if (m.sp != nullptr && !m.sp->append_op(seq, op, &r.message)) {
    r.error = submit_errc::spool;
    return r;
  }
  ++m.next_seq;
  r.ack = enqueue_ack{op.key, seq, "enqueued"};
  m.enqueue(queued{seq, std::move(op)});
  return r;
}

submit_result client::submit_ingest(std::string_view envelope,
                                    std::string key) {
  submit_result r;
  auto op = ingest_operation(envelope, std::move(key), &r.message);
  if (!op) {
    r.error = submit_errc::invalid;
    return r;
  }
  return submit(std::move(*op));
}

submit_result client::submit_turn(const turn& t, std::string key) {
  if (t.thread_id.empty()) {
    submit_result r;
    r.error = submit_errc::invalid;
    r.message = "a turn needs a thread id";
    return r;
  }
  return submit(turn_operation(t, std::move(key)));
}

consistency client::await_consistency(const std::string& key,
                                      steady_time deadline) {
  auto& m = *impl_;
  consistency out;
  std::unique_lock<std::mutex> lk{m.keys_mtx};
  auto it = m.keys.find(key);
  if (it == m.keys.end()) {
    out.reached = true;
    return out;
  }
  out.through = it->second.last_seq;
  auto done = [&] {
    auto k = m.keys.find(key);
    return k == m.keys.end() || k->second.pending.empty()
           || k->second.pending.front() > out.through;
  };
  out.reached = m.keys_cv.wait_until(lk, deadline, done);
  it = m.keys.find(key);
  if (it == m.keys.end())
    return out;
  auto& un = it->second.unreported;
  for (auto f = un.begin(); f != un.end();) {
    if (f->sequence <= out.through) {
      out.failed.push_back(std::move(*f));
      f = un.erase(f);
    } else {
      ++f;
    }
  }
  if (it->second.pending.empty() && un.empty())
    m.keys.erase(it);
  return out;
}

close_report client::close(steady_time deadline) {
  auto& m = *impl_;
  std::lock_guard<std::mutex> once{m.close_mtx};
  close_report report;
  if (m.closed)
    return report;
  {
    std::lock_guard<std::mutex> guard{m.submit_mtx};
    m.closing = true;
  }
  for (auto& s : m.shards) {
    std::lock_guard<std::mutex> guard{s->mtx};
    s->cv.notify_all();
  }
  {
    std::unique_lock<std::mutex> lk{m.keys_mtx};
    report.drained = m.keys_cv.wait_until(lk, deadline, [&] {
      return m.outstanding == 0;
    });
  }
  if (!report.drained) {
    m.abort = true;
    std::lock_guard<std::mutex> guard{m.sleep_mtx};
    m.sleep_cv.notify_all();
  }
  for (auto& s : m.shards)
    if (s->worker.joinable())
      s->worker.join();
  m.closed = true;
  std::lock_guard<std::mutex> guard{m.undelivered_mtx};
  report.undelivered = std::move(m.undelivered);
  m.log(log_level::info, "close", nullptr, 0, 0, milliseconds{0},
        report.drained ? "drained"
                       : std::to_string(report.undelivered.size())
                           + " undelivered");
  return report;
}

namespace {

std::string escape_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'
        || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4U];
      out += hex[c & 15U];
    }
  }
  return out;
}

} // namespace

response client::inspect_request(const std::string& request_id) {
  return impl_->tr->perform(
    request{"GET", "/v1/requests/" + escape_segment(request_id), {}},
    impl_->abort);
}

response client::transcript(const std::string& thread_id,
                            const std::string& after, int limit) {
  auto path = "/v1/threads/" + escape_segment(thread_id) + "/transcript";
  std::string sep = "?";
  if (!after.empty()) {
    path += sep + "after=" + escape_segment(after);
    sep = "&";
  }
  if (limit > 0)
    path += sep + "limit=" + std::to_string(limit);
  return impl_->tr->perform(request{"GET", path, {}}, impl_->abort);
}

response client::butlers() {
  return impl_->tr->perform(request{"GET", "/v1/butlers", {}}, impl_->abort);
}

size_t client::shard_of(std::string_view key) const {
  return impl_->shard_of(key);
}

size_t client::depth(size_t shard) const {
  auto& s = *impl_->shards.at(shard);
  std::lock_guard<std::mutex> guard{s.mtx};
  return s.q.size();
}

size_t client::recovered() const {
  return impl_->recovered;
}

} // namespace butlers::client
