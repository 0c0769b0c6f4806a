#pragma once

// What the switchboard remembers of the butler registry's answers: the
// entries the router plans with, this node's host of each butler (asking
// for them was three calls per message; the registry changes only when
// butlers start or stop or a node comes or goes, and a call to a host that
// is gone fails and is asked again), and, per attempt, a host whose
// transport failed, so the retry goes elsewhere while there is another.

#include <chrono>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/messages.hpp"

namespace butlers {

/// `Handle`: the typed handle of a butler.
template<class Handle>
class host_cache {
 public:
  using clock = std::chrono::steady_clock;

  explicit host_cache(clock::duration ttl) : ttl_(ttl) {
    // nop
  }

  /// The registry's entries, if listed less than the TTL ago; else null.
  const std::vector<registry_entry>* entries(clock::time_point now) const {
    return listed_ && now - listed_at_ < ttl_ ? &entries_ : nullptr;
  }

  void set_entries(std::vector<registry_entry> entries, clock::time_point at) {
    entries_ = std::move(entries);
    listed_at_ = at;
    listed_ = true;
  }

  /// This node's host of `butler`, if the registry named it less than the
  /// TTL ago; else null.
  Handle local_host(const std::string& butler, clock::time_point now) const {
    auto i = local_.find(butler);
    if (i == local_.end() || now - i->second.second >= ttl_)
      return {};
    return i->second.first;
  }

  /// Keeps a host of this node the registry named: it names this node's
  /// host first, so the answer stays the same until the butler restarts (a
  /// remote answer rotates, and is not kept).
  void remember_local(const std::string& butler, Handle hdl,
                      clock::time_point now) {
    if (hdl)
      local_[butler] = {std::move(hdl), now};
  }

  /// Drops the kept host of `butler` (a call to it failed).
  void forget(const std::string& butler) {
    local_.erase(butler);
  }

  /// The transport to `hdl` failed for segment `segment_id` of a request.
  void failed(const std::string& request_id, const std::string& segment_id,
              Handle hdl) {
    failed_[request_id][segment_id] = std::move(hdl);
  }

  /// The host to avoid on the segment's next attempt (taken when read), or
  /// null.
  Handle take_failed(const std::string& request_id,
                     const std::string& segment_id) {
    auto r = failed_.find(request_id);
    if (r == failed_.end())
      return {};
    Handle out;
    if (auto f = r->second.find(segment_id); f != r->second.end()) {
      out = std::move(f->second);
      r->second.erase(f);
    }
    if (r->second.empty())
      failed_.erase(r);
    return out;
  }

  /// The request ended: its failed hosts are of no further use.
  void drop_request(const std::string& request_id) {
    failed_.erase(request_id);
  }

 private:
  clock::duration ttl_;
  std::vector<registry_entry> entries_;
  clock::time_point listed_at_;
  bool listed_ = false;
  std::unordered_map<std::string, std::pair<Handle, clock::time_point>> local_;
  std::unordered_map<std::string, std::map<std::string, Handle>> failed_;
};

} // namespace butlers
