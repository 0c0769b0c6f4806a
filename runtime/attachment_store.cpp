#include "runtime/attachment_store.hpp"

#include <algorithm>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "runtime/embedded.hpp"

namespace butlers {

namespace {

/// A sweep runs after this many writes (and at the first).
constexpr uint64_t sweep_every = 64;

} // namespace

attachment_store::attachment_store(std::string url, attachment_limits limits,
                                   size_t connections)
  : url_(std::move(url)), limits_(limits),
    max_connections_(std::max<size_t>(1, connections)) {
  // nop
}

attachment_store::~attachment_store() = default;

std::unique_ptr<pqxx::connection> attachment_store::take() {
  {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] {
      return !idle_.empty() || open_ < max_connections_;
    });
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    ++open_;
  }
  try {
    return std::make_unique<pqxx::connection>(url_);
  } catch (...) {
    std::lock_guard<std::mutex> guard{mtx_};
    --open_;
    cv_.notify_one();
    throw;
  }
}

void attachment_store::give_back(std::unique_ptr<pqxx::connection> conn) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (conn && conn->is_open())
    idle_.push_back(std::move(conn));
  else
    --open_;
  cv_.notify_one();
}

std::optional<attachment_ref> attachment_store::put(std::string_view bytes,
                                                    std::string media_type,
                                                    std::string name,
                                                    std::string* error) {
  attachment_ref ref;
  ref.sha256 = attachment_hash(bytes);
  ref.media_type = media_type.empty() ? "application/octet-stream"
                                      : std::move(media_type);
  ref.size = bytes.size();
  ref.name = std::move(name);
  if (auto why = over_cap({ref}, limits_); !why.empty()) {
    if (error)
      *error = why;
    return std::nullopt;
  }
  std::unique_ptr<pqxx::connection> conn;
  try {
    conn = take();
    {
      pqxx::work tx{*conn};
      tx.exec_params(named_query("attachment_put"), ref.sha256, ref.media_type,
                     static_cast<int64_t>(ref.size),
                     pqxx::binarystring{bytes.data(), bytes.size()});
      tx.commit();
    }
    give_back(std::move(conn));
  } catch (const std::exception& e) {
    if (conn) // a broken connection is dropped
      give_back(nullptr);
    if (error)
      *error = std::string{"attachment not stored: "} + e.what();
    return std::nullopt;
  }
  bool sweep_now = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    sweep_now = puts_since_sweep_++ % sweep_every == 0;
  }
  if (sweep_now)
    sweep();
  return ref;
}

size_t attachment_store::sweep(size_t batch) {
  std::unique_ptr<pqxx::connection> conn;
  try {
    conn = take();
    size_t n = 0;
    {
      pqxx::work tx{*conn};
      auto r = tx.exec_params(named_query("attachment_sweep"),
                              static_cast<int>(limits_.retention_days),
                              static_cast<int>(batch));
      tx.commit();
      n = static_cast<size_t>(r.affected_rows());
    }
    give_back(std::move(conn));
    if (n > 0)
      spdlog::info("attachments: {} row(s) past {} days deleted", n,
                   limits_.retention_days);
    return n;
  } catch (const std::exception& e) {
    if (conn)
      give_back(nullptr);
    spdlog::warn("attachments: retention sweep failed: {}", e.what());
    return 0;
  }
}

} // namespace butlers
