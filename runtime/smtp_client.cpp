#include "runtime/smtp_client.hpp"

namespace butlers {

// Stub: the libcurl implementation follows.
smtp_result smtp_send(const std::string&, const smtp_message&,
                      const std::string&, const std::string&,
                      std::chrono::milliseconds, const std::atomic<bool>*) {
  smtp_result r;
  r.retryable = true;
  r.error = "not implemented";
  return r;
}

} // namespace butlers
