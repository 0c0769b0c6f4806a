#include "runtime/outbox.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

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

} // namespace

std::string append_outbox_line(const std::string& path, std::string_view line) {
  if (line.empty())
    return path + ": refusing to append an empty line";
  if (line.find('\n') != std::string_view::npos)
    return path + ": refusing to append a line containing '\\n'";
  std::string record;
  record.reserve(line.size() + 1);
  record += line;
  record += '\n';
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
    n = ::write(fd, record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    error = failure(path, "write", errno);
  } else if (static_cast<size_t>(n) != record.size()) {
    // Writing the rest would no longer be one atomic append; a reader has
    // to tolerate a torn last line after a crash anyway.
    error = path + ": short write (" + std::to_string(n) + " of "
            + std::to_string(record.size()) + " bytes)";
  } else if (::fsync(fd) != 0) {
    error = failure(path, "fsync", errno);
  }
  if (::close(fd) != 0 && error.empty())
    error = failure(path, "close", errno);
  if (created && error.empty())
    error = sync_parent(path);
  return error;
}

} // namespace butlers
