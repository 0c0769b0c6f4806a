#include "runtime/curl_support.hpp"

#include <mutex>

namespace butlers::curl {

namespace {

bool cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

int on_progress(void* clientp, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return cancelled(static_cast<const std::atomic<bool>*>(clientp)) ? 1 : 0;
}

} // namespace

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
  });
}

CURLcode run(CURLM* multi, CURL* easy, const std::atomic<bool>* cancel,
             std::string& error) {
  if (cancelled(cancel))
    return CURLE_ABORTED_BY_CALLBACK; // before anything is sent
  curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(easy, CURLOPT_XFERINFODATA,
                   const_cast<std::atomic<bool>*>(cancel));
  if (auto mc = curl_multi_add_handle(multi, easy); mc != CURLM_OK) {
    error = curl_multi_strerror(mc);
    return CURLE_FAILED_INIT;
  }
  auto result = CURLE_OK;
  for (bool done = false; !done;) {
    int running = 0;
    auto mc = curl_multi_perform(multi, &running);
    int left = 0;
    while (auto* msg = curl_multi_info_read(multi, &left))
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
        result = msg->data.result;
        done = true;
      }
    if (done)
      break;
    if (mc == CURLM_OK && running > 0 && cancelled(cancel)) {
      // curl calls the progress callback often, but not in every state;
      // removing the handle below ends the transfer and closes its
      // connection.
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    if (mc == CURLM_OK && running > 0)
      mc = curl_multi_poll(multi, nullptr, 0,
                           static_cast<int>(cancel_poll_interval.count()),
                           nullptr);
    if (mc != CURLM_OK || running == 0) {
      error = mc != CURLM_OK ? curl_multi_strerror(mc)
                             : "transfer ended without a result";
      result = CURLE_FAILED_INIT;
      break;
    }
  }
  curl_multi_remove_handle(multi, easy);
  return result;
}

std::string describe(CURLcode code, const char* errbuf) {
  if (errbuf != nullptr && errbuf[0] != '\0')
    return errbuf;
  return curl_easy_strerror(code);
}

} // namespace butlers::curl
