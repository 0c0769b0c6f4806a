// A workaround for CAF 0.17.6's OpenSSL module (libcaf_openssl): when a TLS
// handshake fails (a peer with a certificate from another CA), CAF closes
// that session but leaves OpenSSL's per-thread error queue full. The next
// SSL_read of ANY other session on the middleman's thread that merely
// wants more data then sees SSL_get_error() report SSL_ERROR_SSL from the
// stale entry, and CAF drops that healthy, authenticated connection too:
// one refused peer could disconnect the whole cluster, again and again.
//
// This definition in the executable interposes OpenSSL's SSL_get_error
// (the dynamic linker binds libcaf_openssl's calls to it): it answers
// exactly as OpenSSL does, and after a fatal answer clears the queue, so
// the failure stays with the session it belongs to. It lives in the node
// binary only (not a library), which is the one process that links CAF's
// OpenSSL module. Tested by Cluster.MutualTlsAdmitsOnlyTheClustersCa.

#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

extern "C" int SSL_get_error(const SSL* s, int ret_code) {
  using fn = int (*)(const SSL*, int);
  static const fn real = reinterpret_cast<fn>(
    dlsym(RTLD_NEXT, "SSL_get_error"));
  auto err = real(s, ret_code);
  if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL)
    ERR_clear_error();
  return err;
}
