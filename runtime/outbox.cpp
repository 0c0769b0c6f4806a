#include "runtime/outbox.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace butlers {

namespace {

std::string failure(const std::string& path, const char* what, int code) {
  return path + ": " + what + ": "
         + std::error_code{code, std::generic_category()}.message();
}

int open_retrying(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// fsyncs the directory holding `path`, so that a file just created there
/// survives a crash along with its contents.
std::string sync_parent(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  int fd = open_retrying(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return failure(dir, "open directory", errno);
  std::string error;
  if (::fsync(fd) != 0)
    error = failure(dir, "fsync directory", errno);
  ::close(fd);
  return error;
}

/// Writes `records` (whole lines) to `path` with one write() and fsyncs
/// it, creating the file (and fsyncing its directory) when needed.
std::string write_and_sync(const std::string& path,
                           const std::string& records) {
  constexpr int flags = O_WRONLY | O_APPEND | O_CLOEXEC;
  // Open without O_CREAT first to learn whether this call creates the file
  // (then the directory needs an fsync too); O_EXCL settles a race with
  // another creator, and the loser simply opens the winner's file.
  bool created = false;
  int fd = open_retrying(path.c_str(), flags);
  if (fd < 0 && errno == ENOENT) {
    fd = open_retrying(path.c_str(), flags | O_CREAT | O_EXCL, 0640);
    created = fd >= 0;
    if (fd < 0 && errno == EEXIST)
      fd = open_retrying(path.c_str(), flags);
  }
  if (fd < 0)
    return failure(path, "open", errno);
  std::string error;
  ssize_t n;
  do {
    n = ::write(fd, records.data(), records.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    error = failure(path, "write", errno);
  } else if (static_cast<size_t>(n) != records.size()) {
    // Writing the rest would no longer be one atomic append; a reader has
    // to tolerate a torn last line after a crash anyway.
    error = path + ": short write (" + std::to_string(n) + " of "
            + std::to_string(records.size()) + " bytes)";
  } else if (::fsync(fd) != 0) {
    error = failure(path, "fsync", errno);
  }
  if (::close(fd) != 0 && error.empty())
    error = failure(path, "close", errno);
  if (created && error.empty())
    error = sync_parent(path);
  return error;
}

/// A line waiting for its file's writer.
struct queued_line {
  std::string line;
  std::function<void(std::string)> done;
};

/// One file's writer: a thread that drains `queue` in batches. The object
/// and its thread live as long as the process (a detached thread waiting on
/// a condition variable must not see it destroyed at exit).
struct outbox_file {
  std::string path;
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<queued_line> queue;
};

/// Largest batch one write() carries; a queue holding more is drained by
/// several batches in a row.
constexpr size_t max_batch_bytes = size_t{1} << 20;

[[noreturn]] void run_writer(outbox_file* file) {
  std::vector<queued_line> batch;
  std::string records;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock{file->mtx};
      file->cv.wait(lock, [file] {
        return !file->queue.empty();
      });
      size_t bytes = 0;
      while (!file->queue.empty()
             && (batch.empty() || bytes < max_batch_bytes)) {
        bytes += file->queue.front().line.size() + 1;
        batch.push_back(std::move(file->queue.front()));
        file->queue.pop_front();
      }
    }
    records.clear();
    for (auto& q : batch) {
      records += q.line;
      records += '\n';
    }
    auto error = write_and_sync(file->path, records);
    for (auto& q : batch)
      q.done(error);
    batch.clear();
  }
}

outbox_file& file_for(const std::string& path) {
  static std::mutex mtx;
  // Never destroyed: each file's writer thread runs until the process ends.
  static auto* files = new std::unordered_map<std::string, outbox_file*>{};
  std::lock_guard<std::mutex> guard{mtx};
  auto& f = (*files)[path];
  if (!f) {
    f = new outbox_file{};
    f->path = path;
    std::thread{run_writer, f}.detach();
  }
  return *f;
}

} // namespace

std::string outbox_line_error(const std::string& path, std::string_view line) {
  if (line.empty())
    return path + ": refusing to append an empty line";
  if (line.find('\n') != std::string_view::npos)
    return path + ": refusing to append a line containing '\\n'";
  return {};
}

outbox_post append_outbox_line_async(const std::string& path, std::string line,
                                     std::function<void(std::string)> done) {
  if (!outbox_line_error(path, line).empty())
    return outbox_post::invalid;
  auto& file = file_for(path);
  {
    std::lock_guard<std::mutex> guard{file.mtx};
    if (file.queue.size() >= outbox_max_queued)
      return outbox_post::full;
    file.queue.push_back({std::move(line), std::move(done)});
  }
  file.cv.notify_one();
  return outbox_post::queued;
}

std::string append_outbox_line(const std::string& path, std::string_view line) {
  if (auto bad = outbox_line_error(path, line); !bad.empty())
    return bad;
  std::promise<std::string> result;
  auto out = result.get_future();
  auto posted = append_outbox_line_async(path, std::string{line},
                                         [&result](std::string error) {
                                           result.set_value(std::move(error));
                                         });
  if (posted == outbox_post::full)
    return path + ": " + std::to_string(outbox_max_queued)
           + " lines already wait to be written";
  return out.get();
}

} // namespace butlers
