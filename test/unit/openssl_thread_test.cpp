#include <thread>

#include <gtest/gtest.h>
#include <openssl/err.h>

#include "runtime/openssl_thread.hpp"

namespace butlers {
namespace {

// OpenSSL keeps an error queue per thread. The release frees this thread's
// state: an error left in the queue is gone afterwards (a fresh, empty
// queue is allocated on the next use), while another thread's is untouched.
TEST(OpenSslThreadRelease, FreesTheCallingThreadsStateOnly) {
  ERR_clear_error();
  ERR_raise(ERR_LIB_USER, 1);
  unsigned long in_worker_before = 0;
  unsigned long in_worker_after = 0;
  std::thread worker{[&] {
    ERR_raise(ERR_LIB_USER, 2);
    in_worker_before = ERR_peek_error();
    { openssl_thread_release release; }
    in_worker_after = ERR_peek_error();
  }};
  worker.join();
  EXPECT_NE(in_worker_before, 0u);
  EXPECT_EQ(in_worker_after, 0u);
  EXPECT_EQ(ERR_GET_REASON(ERR_peek_error()), 1);
  ERR_clear_error();
}

} // namespace
} // namespace butlers
