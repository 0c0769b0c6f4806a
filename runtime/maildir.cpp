#include "runtime/maildir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "runtime/mail.hpp"

namespace butlers {

namespace {

std::string sys_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

/// Closes a file descriptor when it goes.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// The delivery time a Maildir name starts with (its leading digits), for
/// ordering; names without one sort after every timed name.
uint64_t name_time(const std::string& name) {
  uint64_t t = 0;
  size_t i = 0;
  for (; i < name.size() && i < 19 && name[i] >= '0' && name[i] <= '9'; ++i)
    t = t * 10 + static_cast<uint64_t>(name[i] - '0');
  return i == 0 ? UINT64_MAX : t;
}

} // namespace

// -- maildir ------------------------------------------------------------------

maildir::maildir(std::string path, size_t max_bytes)
  : path_(std::move(path)), max_bytes_(max_bytes) {
  while (path_.size() > 1 && path_.back() == '/')
    path_.pop_back();
}

std::string maildir::prepare() const {
  for (auto sub : {"", "/new", "/cur", "/tmp", "/quarantine"}) {
    auto dir = path_ + sub;
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return sys_error(dir);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0)
      return sys_error(dir);
    if (!S_ISDIR(st.st_mode))
      return dir + ": not a directory";
  }
  return {};
}

std::vector<std::string> maildir::list_new(
  size_t max, const std::function<bool(const std::string&)>& skip,
  std::string* error) const {
  std::vector<std::string> names;
  if (error != nullptr)
    error->clear();
  auto dir = path_ + "/new";
  std::unique_ptr<DIR, int (*)(DIR*)> d{::opendir(dir.c_str()), &::closedir};
  if (!d) {
    if (error != nullptr)
      *error = sys_error(dir);
    return names;
  }
  while (auto* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.')
      continue;
    if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
      continue;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0
          || !S_ISREG(st.st_mode))
        continue;
    }
    if (skip && skip(name))
      continue;
    names.push_back(std::move(name));
  }
  auto older = [](const std::string& a, const std::string& b) {
    auto ta = name_time(a);
    auto tb = name_time(b);
    return ta != tb ? ta < tb : a < b;
  };
  if (names.size() > max) {
    std::partial_sort(names.begin(),
                      names.begin() + static_cast<std::ptrdiff_t>(max),
                      names.end(), older);
    names.resize(max);
  } else {
    std::sort(names.begin(), names.end(), older);
  }
  return names;
}

maildir::file maildir::read(const std::string& name) const {
  file out;
  auto p = path_ + "/new/" + name;
  fd_guard fd{::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (fd.fd < 0) {
    if (errno == ENOENT)
      out.vanished = true;
    else
      out.error = sys_error(p);
    return out;
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    out.error = sys_error(p);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.error = p + ": not a regular file";
    return out;
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes_) {
    out.error = p + ": " + std::to_string(st.st_size) + " bytes, more than the "
                + std::to_string(max_bytes_) + " a mail may have";
    return out;
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    auto n = ::read(fd.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      out.error = sys_error(p);
      return out;
    }
    if (n == 0)
      break; // shrank meanwhile: take what is there
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  out.bytes = std::move(bytes);
  return out;
}

std::string maildir::seen_name(const std::string& name) {
  auto info = name.find(":2,");
  if (info == std::string::npos)
    return name + ":2,S";
  auto flags = name.substr(info + 3);
  if (flags.find('S') != std::string::npos)
    return name;
  flags += 'S';
  std::sort(flags.begin(), flags.end()); // flags are kept in ASCII order
  return name.substr(0, info + 3) + flags;
}

std::string maildir::mark_seen(const std::string& name) const {
  auto from = path_ + "/new/" + name;
  auto to = path_ + "/cur/" + seen_name(name);
  if (::rename(from.c_str(), to.c_str()) != 0)
    return sys_error("rename " + from + " to " + to);
  return {};
}

std::string maildir::quarantine(const std::string& name,
                                const std::string& reason) const {
  auto dir = path_ + "/quarantine";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return sys_error(dir);
  auto from = path_ + "/new/" + name;
  auto to = dir + "/" + name;
  if (::rename(from.c_str(), to.c_str()) != 0)
    return sys_error("rename " + from + " to " + to);
  auto why = to + ".reason";
  fd_guard fd{
    ::open(why.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (fd.fd >= 0) {
    auto line = reason + "\n";
    [[maybe_unused]] auto n = ::write(fd.fd, line.data(), line.size());
  }
  return {};
}

// -- metrics ------------------------------------------------------------------

maildir_metrics register_maildir_metrics(metrics_registry& reg,
                                         const std::string& connector) {
  static const char* help = "files of a maildir connector by outcome";
  auto get = [&](const char* outcome) {
    return &reg.get_counter("butlers_connector_maildir_files_total", help,
                            "connector=\"" + connector + "\",outcome=\""
                              + outcome + "\"");
  };
  maildir_metrics m;
  m.submitted = get("submitted");
  m.seen = get("seen");
  m.quarantined = get("quarantined");
  m.deferred = get("deferred");
  m.stuck = get("stuck");
  return m;
}

// -- maildir_poller -----------------------------------------------------------

maildir_poller::maildir_poller(maildir dir, std::string mailbox,
                               size_t in_flight, mail_submit_fn submit,
                               maildir_metrics metrics,
                               std::function<int64_t()> now_us)
  : dir_(std::move(dir)), mailbox_(std::move(mailbox)),
    in_flight_(std::max<size_t>(in_flight, 1)), submit_(std::move(submit)),
    metrics_(metrics), now_us_(std::move(now_us)) {
  // nop
}

namespace {

void tally(maildir_poll_report& report, bool seen, bool quarantined,
           bool unreadable, bool stuck) {
  report.seen += seen ? 1 : 0;
  report.quarantined += quarantined || unreadable ? 1 : 0;
  report.unreadable += unreadable ? 1 : 0;
  report.stuck += stuck ? 1 : 0;
}

} // namespace

maildir_poll_report maildir_poller::poll_once(size_t batch,
                                              const std::atomic<bool>* stop) {
  maildir_poll_report report;
  if (stuck_.size() >= max_stuck)
    stuck_.clear();
  auto names = dir_.list_new(
    batch,
    [this](const std::string& n) {
      return stuck_.count(n) > 0;
    },
    &report.error);
  report.listed = names.size();
  for (size_t at = 0; at < names.size(); at += in_flight_) {
    if (stop != nullptr && stop->load())
      break;
    auto end = std::min(names.size(), at + in_flight_);
    std::vector<std::string> group(names.begin()
                                     + static_cast<std::ptrdiff_t>(at),
                                   names.begin()
                                     + static_cast<std::ptrdiff_t>(end));
    if (!submit_group(group, report))
      break; // the ingest path is away: the rest waits for the next pass
  }
  return report;
}

bool maildir_poller::submit_group(const std::vector<std::string>& names,
                                  maildir_poll_report& report) {
  std::vector<ready_mail> ready;
  bool go_on = true;
  for (auto& name : names) {
    auto p = prepare(name);
    if (auto* r = std::get_if<ready_mail>(&p)) {
      ready.push_back(std::move(*r));
      continue;
    }
    auto s = std::get<step>(p);
    tally(report, s == step::seen, s == step::quarantined,
          s == step::unreadable, s == step::stuck);
    if (s == step::deferred) {
      ++report.deferred;
      go_on = false;
    }
  }
  if (ready.empty())
    return go_on;
  std::vector<std::string> envelopes;
  envelopes.reserve(ready.size());
  for (auto& r : ready)
    envelopes.push_back(r.envelope);
  metrics_.submitted->inc(envelopes.size());
  auto results = submit_(envelopes);
  for (size_t i = 0; i < ready.size(); ++i) {
    auto s = i < results.size()
               ? settle(ready[i].name, results[i])
               : settle(ready[i].name, {mail_submit::later, "no answer"});
    tally(report, s == step::seen, s == step::quarantined, false,
          s == step::stuck);
    if (s == step::deferred) {
      ++report.deferred;
      go_on = false;
    }
  }
  return go_on;
}

std::variant<maildir_poller::ready_mail, maildir_poller::step> maildir_poller::
  prepare(const std::string& name) {
  auto f = dir_.read(name);
  if (f.vanished)
    return step::vanished;
  if (!f.bytes)
    return unreadable(move_to_quarantine(name, f.error));
  auto parsed = parse_mail(*f.bytes);
  if (!parsed.message)
    return unreadable(
      move_to_quarantine(name, "not a usable mail: " + parsed.error));
  if (answer_)
    if (auto verdict = answer_(*parsed.message))
      return settle(name, *verdict);
  mail_ingest_options opts;
  opts.mailbox = mailbox_;
  opts.now_us = now_us_();
  if (std::string error; !take_files(*parsed.message, opts, &error))
    return settle(name, {mail_submit::later, "storing its files: " + error});
  return ready_mail{name, mail_to_ingest(*parsed.message, opts)};
}

bool maildir_poller::take_files(const mail_message& m,
                                mail_ingest_options& opts, std::string* error) {
  for (size_t i = 0; i < m.attachments.size(); ++i) {
    auto& file = m.attachments[i];
    attachment_ref ref;
    ref.media_type = file.media_type;
    ref.size = file.bytes.size();
    ref.name = file.name.empty() ? "attachment-" + std::to_string(i + 1)
                                 : file.name;
    auto with = opts.attachments;
    with.push_back(ref);
    auto why = store_ ? over_cap(with, caps_)
                      : std::string{"no attachment store"};
    if (!why.empty()) {
      opts.left_out.push_back("[" + ref.name + " (" + ref.media_type
                              + ") not taken: " + why + "]");
      continue;
    }
    auto stored = store_(file, error);
    if (!stored)
      return false;
    stored->name = ref.name;
    opts.attachments.push_back(std::move(*stored));
  }
  return true;
}

maildir_poller::step maildir_poller::settle(const std::string& name,
                                            const mail_submit_result& out) {
  switch (out.verdict) {
    case mail_submit::stored:
      if (auto err = dir_.mark_seen(name); !err.empty())
        return give_up(name, err);
      metrics_.seen->inc();
      return step::seen;
    case mail_submit::invalid:
      return move_to_quarantine(name, "ingest refused it: " + out.detail);
    case mail_submit::later:
    default:
      metrics_.deferred->inc();
      spdlog::warn("maildir {}: {} stays in new/, not stored now: {}",
                   dir_.path(), name, out.detail);
      return step::deferred;
  }
}

maildir_poller::step maildir_poller::unreadable(step s) {
  return s == step::quarantined ? step::unreadable : s;
}

maildir_poller::step maildir_poller::move_to_quarantine(
  const std::string& name, const std::string& reason) {
  if (auto err = dir_.quarantine(name, reason); !err.empty())
    return give_up(name, err + " (quarantining it: " + reason + ")");
  metrics_.quarantined->inc();
  spdlog::warn("maildir {}: quarantined {}: {}", dir_.path(), name, reason);
  return step::quarantined;
}

maildir_poller::step maildir_poller::give_up(const std::string& name,
                                             const std::string& why) {
  auto p = dir_.path() + "/new/" + name;
  if (::access(p.c_str(), F_OK) != 0 && errno == ENOENT)
    return step::vanished; // another reader took it meanwhile
  stuck_.insert(name);
  metrics_.stuck->inc();
  spdlog::error("maildir {}: {} left in new/ and skipped until restart: {}",
                dir_.path(), name, why);
  return step::stuck;
}

} // namespace butlers
