#include "runtime/http_client.hpp"

namespace butlers {

// Stub: the libcurl implementation follows.

const char* to_string(http_failure f) {
  switch (f) {
    case http_failure::none: return "none";
    case http_failure::connect: return "connect";
    case http_failure::timeout: return "timeout";
    case http_failure::tls: return "tls";
    case http_failure::too_large: return "too_large";
    case http_failure::cancelled: return "cancelled";
    case http_failure::protocol: return "protocol";
    case http_failure::other: return "other";
  }
  return "other";
}

const std::string* http_response::header(std::string_view lower_name) const {
  for (auto& [name, value] : headers)
    if (name == lower_name)
      return &value;
  return nullptr;
}

std::optional<std::chrono::seconds> http_response::retry_after() const {
  return std::nullopt;
}

struct http_client::impl {};

http_client::http_client(options) : impl_(std::make_unique<impl>()) {}

http_client::~http_client() = default;

http_response http_client::perform(const http_request&,
                                   const std::atomic<bool>*) const {
  http_response r;
  r.failure = http_failure::other;
  r.error = "not implemented";
  return r;
}

size_t http_client::connections_opened() const {
  return 0;
}

http_client& shared_http_client() {
  static http_client client;
  return client;
}

} // namespace butlers
