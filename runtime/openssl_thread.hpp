#pragma once

namespace butlers {

/// Frees OpenSSL's state for the calling thread (its error queue, ...) when
/// destroyed. Make it the first member of a detached actor's state that
/// uses OpenSSL (libpq over TLS, the migrations' SHA-256): CAF 0.17 does
/// not join a detached actor's thread, which may still be on its way out
/// when the process exits and OpenSSL's exit handler has already dropped
/// the per-thread destructor that would have freed that state (a leak
/// LeakSanitizer reported once). The state is destroyed on the actor's own
/// thread, after the members declared below it.
class openssl_thread_release {
 public:
  openssl_thread_release() = default;
  openssl_thread_release(const openssl_thread_release&) = delete;
  openssl_thread_release& operator=(const openssl_thread_release&) = delete;
  ~openssl_thread_release();
};

} // namespace butlers
