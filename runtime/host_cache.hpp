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

#include <caf/actor.hpp>

#include "runtime/messages.hpp"

namespace butlers {

class host_cache {
 public:
  using clock = std::chrono::steady_clock;

  explicit host_cache(clock::duration ttl) : ttl_(ttl) {
    // nop
  }

  /// The registry's entries, if listed less than the TTL ago; else null.
  const std::vector<registry_entry>* entries(clock::time_point now) const;

  void set_entries(std::vector<registry_entry> entries, clock::time_point at);

  /// This node's host of `butler`, if the registry named it less than the
  /// TTL ago; else null.
  caf::actor local_host(const std::string& butler, clock::time_point now) const;

  /// Keeps a host of this node the registry named: it names this node's
  /// host first, so the answer stays the same until the butler restarts (a
  /// remote answer rotates, and is not kept).
  void remember_local(const std::string& butler, caf::actor hdl,
                      clock::time_point now);

  /// Drops the kept host of `butler` (a call to it failed).
  void forget(const std::string& butler);

  /// The transport to `hdl` failed for segment `segment_id` of a request.
  void failed(const std::string& request_id, const std::string& segment_id,
              caf::actor hdl);

  /// The host to avoid on the segment's next attempt (taken when read), or
  /// null.
  caf::actor take_failed(const std::string& request_id,
                         const std::string& segment_id);

  /// The request ended: its failed hosts are of no further use.
  void drop_request(const std::string& request_id) {
    failed_.erase(request_id);
  }

 private:
  clock::duration ttl_;
  std::vector<registry_entry> entries_;
  clock::time_point listed_at_;
  bool listed_ = false;
  std::unordered_map<std::string, std::pair<caf::actor, clock::time_point>>
    local_;
  std::unordered_map<std::string, std::map<std::string, caf::actor>> failed_;
};

} // namespace butlers
