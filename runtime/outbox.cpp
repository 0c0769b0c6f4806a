#include "runtime/outbox.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <unordered_map>

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

/// Lines for one file that go out with one write() and one fsync.
struct outbox_batch {
  std::string records;
  std::string error;
  bool done = false;
};

/// Group commit for one file: callers that arrive while a batch is being
/// synced join the next one, which the first of them writes once the
/// previous sync is over. Under load a sync covers many lines; alone, a
/// line is written at once.
struct outbox_file {
  std::mutex mtx;
  std::condition_variable cv;
  /// The batch new lines join (null: none yet).
  std::shared_ptr<outbox_batch> open;
  /// A caller is writing a batch.
  bool writing = false;
};

outbox_file& file_for(const std::string& path) {
  static std::mutex mtx;
  static std::unordered_map<std::string, std::unique_ptr<outbox_file>> files;
  std::lock_guard<std::mutex> guard{mtx};
  auto& f = files[path];
  if (!f)
    f = std::make_unique<outbox_file>();
  return *f;
}

} // namespace

std::string append_outbox_line(const std::string& path, std::string_view line) {
  if (line.empty())
    return path + ": refusing to append an empty line";
  if (line.find('\n') != std::string_view::npos)
    return path + ": refusing to append a line containing '\\n'";
  auto& file = file_for(path);
  std::unique_lock<std::mutex> lock{file.mtx};
  if (!file.open)
    file.open = std::make_shared<outbox_batch>();
  auto mine = file.open;
  mine->records += line;
  mine->records += '\n';
  while (!mine->done) {
    if (file.writing) {
      file.cv.wait(lock);
      continue;
    }
    // Lead: write everything that has joined so far.
    file.writing = true;
    auto batch = std::move(file.open);
    lock.unlock();
    auto error = write_and_sync(path, batch->records);
    lock.lock();
    batch->error = std::move(error);
    batch->done = true;
    file.writing = false;
    file.cv.notify_all();
  }
  return mine->error;
}

} // namespace butlers
