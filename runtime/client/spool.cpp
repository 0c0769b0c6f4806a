#include "runtime/client/spool.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace butlers::client {

namespace {

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1U) != 0 ? 0xEDB88320U ^ (c >> 1U) : c >> 1U;
    t[i] = c;
  }
  return t;
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string framed(const std::string& json) {
  char crc[10];
  std::snprintf(crc, sizeof crc, "%08x ", crc32(json));
  return crc + json + "\n";
}

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw std::runtime_error(errno_text("spool: read"));
    if (n == 0)
      return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

const char* str(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  return it != v.MemberEnd() && it->value.IsString() ? it->value.GetString()
                                                     : nullptr;
}

/// Parses one framed line's JSON; false when the CRC or the JSON is bad.
bool parse_line(const std::string& line, rapidjson::Document& doc) {
  if (line.size() < 10 || line[8] != ' ')
    return false;
  auto json = line.substr(9);
  // A named copy: `end` points into it, so it must outlive the check.
  auto hex = line.substr(0, 8);
  char* end = nullptr;
  auto want = std::strtoul(hex.c_str(), &end, 16);
  if (end == nullptr || *end != '\0' || want != crc32(json))
    return false;
  doc.Parse(json.c_str(), json.size());
  return !doc.HasParseError() && doc.IsObject() && str(doc, "t") != nullptr;
}

/// Applies one record to the replay state; false when it is malformed.
bool apply(const rapidjson::Document& doc,
           std::map<uint64_t, spool::record>& open_ops, uint64_t& next) {
  std::string t = str(doc, "t");
  auto num = [&](const char* name) -> std::optional<uint64_t> {
    auto it = doc.FindMember(name);
    if (it == doc.MemberEnd() || !it->value.IsUint64())
      return std::nullopt;
    return it->value.GetUint64();
  };
  if (t == "base") {
    auto n = num("next");
    if (!n)
      return false;
    next = std::max(next, *n);
    return true;
  }
  auto seq = num("seq");
  if (!seq)
    return false;
  if (t == "done") {
    open_ops.erase(*seq);
    return true;
  }
  if (t != "op")
    return false;
  auto kind = num("kind");
  const char* key = str(doc, "key");
  const char* path = str(doc, "path");
  const char* id = str(doc, "id");
  const char* body = str(doc, "body");
  if (!kind || *kind > 1 || !key || !path || !id || !body)
    return false;
  spool::record r;
  r.seq = *seq;
  r.op.kind = static_cast<op_kind>(*kind);
  r.op.key = key;
  r.op.path = path;
  r.op.identity = id;
  r.op.body = body;
  open_ops[*seq] = std::move(r);
  next = std::max(next, *seq + 1);
  return true;
}

} // namespace

uint32_t crc32(const std::string& data) {
  static const auto table = make_crc_table();
  uint32_t c = 0xFFFFFFFFU;
  for (unsigned char b : data)
    c = table[(c ^ b) & 0xFFU] ^ (c >> 8U);
  return c ^ 0xFFFFFFFFU;
}

spool::spool(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

spool::~spool() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::unique_ptr<spool> spool::open(const std::string& path, contents& out) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error(errno_text("spool: open " + path));
  std::unique_ptr<spool> sp{new spool(path, fd)};
  auto data = read_all(fd);
  std::map<uint64_t, record> open_ops;
  uint64_t next = 1;
  size_t good = 0; // bytes up to the end of the last good line
  while (good < data.size()) {
    auto nl = data.find('\n', good);
    if (nl == std::string::npos)
      break; // torn: no newline
    rapidjson::Document doc;
    auto line = data.substr(good, nl - good);
    if (!parse_line(line, doc) || !apply(doc, open_ops, next)) {
      if (nl + 1 < data.size())
        throw std::runtime_error("spool: " + path + ": corrupt record at byte "
                                 + std::to_string(good));
      break; // torn: the last line is bad
    }
    good = nl + 1;
  }
  if (good < data.size()) {
    out.torn_bytes = data.size() - good;
    if (::ftruncate(fd, static_cast<off_t>(good)) != 0 || ::fsync(fd) != 0)
      throw std::runtime_error(errno_text("spool: cut torn tail of " + path));
  }
  if (::lseek(fd, 0, SEEK_END) < 0)
    throw std::runtime_error(errno_text("spool: seek " + path));
  for (auto& [seq, r] : open_ops)
    out.pending.push_back(std::move(r));
  out.next_seq = next;
  return sp;
}

bool spool::write_line(const std::string& json, bool sync, std::string* error) {
  auto line = framed(json);
  if (!write_all(fd_, line.data(), line.size())
      || (sync && ::fdatasync(fd_) != 0)) {
    if (error != nullptr)
      *error = errno_text("spool: write " + path_);
    return false;
  }
  return true;
}

bool spool::append_op(uint64_t seq, const operation& op, std::string* error) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.StartObject();
  w.Key("t");
  w.String("op");
  w.Key("seq");
  w.Uint64(seq);
  w.Key("kind");
  w.Uint(static_cast<unsigned>(op.kind));
  w.Key("key");
  w.String(op.key.data(), static_cast<rapidjson::SizeType>(op.key.size()));
  w.Key("path");
  w.String(op.path.data(), static_cast<rapidjson::SizeType>(op.path.size()));
  w.Key("id");
  w.String(op.identity.data(),
           static_cast<rapidjson::SizeType>(op.identity.size()));
  w.Key("body");
  w.String(op.body.data(), static_cast<rapidjson::SizeType>(op.body.size()));
  w.EndObject();
  return write_line(buf.GetString(), true, error);
}

void spool::append_done(uint64_t seq, bool failed) {
  write_line(R"({"t":"done","seq":)" + std::to_string(seq) + R"(,"failed":)"
               + (failed ? "true" : "false") + "}",
             false, nullptr);
}

bool spool::compact(uint64_t next_seq, std::string* error) {
  auto tmp = path_ + ".compact";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto line = framed(R"({"t":"base","next":)" + std::to_string(next_seq) + "}");
  bool ok = fd >= 0 && write_all(fd, line.data(), line.size())
            && ::fsync(fd) == 0;
  if (ok)
    ok = ::rename(tmp.c_str(), path_.c_str()) == 0;
  if (!ok) {
    if (error != nullptr)
      *error = errno_text("spool: compact " + path_);
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  ::lseek(fd, 0, SEEK_END);
  ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ::close(fd);
  // The rename is durable once the directory is.
  auto slash = path_.rfind('/');
  auto dir = slash == std::string::npos ? std::string{"."}
                                        : path_.substr(0, slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return fd_ >= 0;
}

size_t spool::size() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

} // namespace butlers::client
