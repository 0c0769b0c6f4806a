#include "runtime/openssl_thread.hpp"

#include <openssl/crypto.h>

namespace butlers {

openssl_thread_release::~openssl_thread_release() {
  OPENSSL_thread_stop();
}

} // namespace butlers
