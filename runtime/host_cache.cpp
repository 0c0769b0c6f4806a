#include "runtime/host_cache.hpp"

namespace butlers {

const std::vector<registry_entry>* host_cache::entries(
  clock::time_point now) const {
  return listed_ && now - listed_at_ < ttl_ ? &entries_ : nullptr;
}

void host_cache::set_entries(std::vector<registry_entry> entries,
                             clock::time_point at) {
  entries_ = std::move(entries);
  listed_at_ = at;
  listed_ = true;
}

caf::actor host_cache::local_host(const std::string& butler,
                                  clock::time_point now) const {
  auto i = local_.find(butler);
  if (i == local_.end() || now - i->second.second >= ttl_)
    return {};
  return i->second.first;
}

void host_cache::remember_local(const std::string& butler, caf::actor hdl,
                                clock::time_point now) {
  if (hdl)
    local_[butler] = {std::move(hdl), now};
}

void host_cache::forget(const std::string& butler) {
  local_.erase(butler);
}

void host_cache::failed(const std::string& request_id,
                        const std::string& segment_id, caf::actor hdl) {
  failed_[request_id][segment_id] = std::move(hdl);
}

caf::actor host_cache::take_failed(const std::string& request_id,
                                   const std::string& segment_id) {
  auto r = failed_.find(request_id);
  if (r == failed_.end())
    return {};
  caf::actor out;
  if (auto f = r->second.find(segment_id); f != r->second.end()) {
    out = std::move(f->second);
    r->second.erase(f);
  }
  if (r->second.empty())
    failed_.erase(r);
  return out;
}

} // namespace butlers
