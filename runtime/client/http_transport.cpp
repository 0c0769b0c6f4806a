// The client's transport on runtime/http_client (libcurl, no CAF).

#include "runtime/client/butlers_client.hpp"
#include "runtime/http_client.hpp"

namespace butlers::client {

namespace {

class http_transport final : public transport {
 public:
  explicit http_transport(http_options o)
    : opt_(std::move(o)), http_(client_options(opt_)) {
    while (!opt_.url.empty() && opt_.url.back() == '/')
      opt_.url.pop_back();
  }

  response perform(const request& req,
                   const std::atomic<bool>& cancel) override {
    http_request hr;
    hr.method = req.method;
    hr.url = opt_.url + req.path;
    hr.timeout = opt_.timeout;
    hr.connect_timeout = opt_.connect_timeout;
    hr.max_response_bytes = size_t{64} << 20;
    if (!opt_.token.empty())
      hr.headers.emplace_back("Authorization", "Bearer " + opt_.token);
    if (req.method != "GET") {
      hr.headers.emplace_back("Content-Type", "application/json");
      hr.body = req.body;
    }
    auto hres = http_.perform(hr, &cancel);
    response r;
    if (hres.failure != http_failure::none) {
      r.transport_error = true;
      r.permanent = hres.failure == http_failure::other;
      r.error = std::string{to_string(hres.failure)} + ": " + hres.error;
      return r;
    }
    r.status = hres.status;
    r.body = std::move(hres.body);
    if (auto ra = hres.retry_after())
      r.retry_after = std::chrono::duration_cast<std::chrono::milliseconds>(*ra);
    return r;
  }

 private:
  static http_client_options client_options(const http_options& o) {
    http_client_options c;
    c.ca_file = o.ca_file;
    c.max_idle_connections = o.max_idle_connections;
    c.user_agent = "butlers-client";
    return c;
  }

  http_options opt_;
  http_client http_;
};

} // namespace

std::shared_ptr<transport> make_http_transport(http_options o) {
  return std::make_shared<http_transport>(std::move(o));
}

} // namespace butlers::client
