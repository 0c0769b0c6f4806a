#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include <curl/curl.h>

// What runtime/http_client.cpp and runtime/smtp_client.cpp share: libcurl's
// one-time initialisation and one transfer driven to its end with a
// cancellation flag that is looked at every 50 ms. Not for other callers:
// they use http_client and smtp_send.

namespace butlers::curl {

/// curl_global_init, once per process (thread-safe). Never undone: the
/// clients may be used until the process exits.
void global_init();

/// How often a transfer looks at its cancellation flag at least.
constexpr std::chrono::milliseconds cancel_poll_interval{50};

/// Runs `easy` to completion on `multi` (which owns the connection cache)
/// and removes it again. `cancel`, when not null, is checked by curl's
/// progress callback and between polls; a cancelled transfer ends with
/// CURLE_ABORTED_BY_CALLBACK. Installs its own CURLOPT_XFERINFOFUNCTION.
/// A multi-interface failure ends with CURLE_FAILED_INIT and its text in
/// `error`.
CURLcode run(CURLM* multi, CURL* easy, const std::atomic<bool>* cancel,
             std::string& error);

/// The description of a finished transfer: the error buffer's text when
/// curl left one, else curl_easy_strerror(code).
std::string describe(CURLcode code, const char* errbuf);

} // namespace butlers::curl
