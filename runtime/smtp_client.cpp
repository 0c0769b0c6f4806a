#include "runtime/smtp_client.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

#include "runtime/curl_support.hpp"

namespace butlers {

namespace {

/// `text` with every bare LF turned into CRLF (SMTP's line end).
std::string with_crlf(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 32);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r'))
      out += '\r';
    out += text[i];
  }
  return out;
}

/// A bare address curl can put between angle brackets.
bool plain_address(const std::string& a) {
  return !a.empty() && a.find_first_of("<>\r\n \t") == std::string::npos;
}

bool starts_with_ci(const std::string& s, std::string_view prefix) {
  if (s.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i])
      return false;
  return true;
}

/// The upload: the message, handed to curl in the pieces it asks for.
struct upload {
  std::string data;
  size_t pos = 0;
};

size_t on_read(char* buf, size_t size, size_t n, void* user) {
  auto& u = *static_cast<upload*>(user);
  size_t k = std::min(size * n, u.data.size() - u.pos);
  u.data.copy(buf, k, u.pos); // raw bytes, no terminator wanted
  u.pos += k;
  return k;
}

/// Errors that a retry cannot fix, whatever the server said.
bool permanent_code(CURLcode code) {
  return code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL
         || code == CURLE_BAD_FUNCTION_ARGUMENT || code == CURLE_NOT_BUILT_IN;
}

struct handles {
  CURL* easy = curl_easy_init();
  CURLM* multi = curl_multi_init();
  curl_slist* rcpt = nullptr;
  ~handles() {
    if (multi != nullptr)
      curl_multi_cleanup(multi);
    if (easy != nullptr)
      curl_easy_cleanup(easy);
    curl_slist_free_all(rcpt);
  }
};

smtp_result refuse(std::string error) {
  smtp_result r;
  r.error = std::move(error);
  return r;
}

smtp_result classify(CURLcode code, long reply, std::string error) {
  smtp_result r;
  r.code = static_cast<int>(reply);
  if (code == CURLE_OK) {
    r.sent = true;
    return r;
  }
  r.error = std::move(error);
  if (reply >= 500 && reply < 600)
    r.retryable = false;
  else
    r.retryable = !permanent_code(code);
  return r;
}

} // namespace

smtp_result smtp_send(const std::string& url, const smtp_message& m,
                      const std::string& username, const std::string& password,
                      std::chrono::milliseconds timeout,
                      const std::atomic<bool>* cancel) {
  try {
    bool smtps = starts_with_ci(url, "smtps://");
    if (!smtps && !starts_with_ci(url, "smtp://"))
      return refuse("the SMTP URL must start with smtp:// or smtps://");
    if (!plain_address(m.from))
      return refuse("bad sender address '" + m.from + "'");
    if (m.to.empty())
      return refuse("no recipients");
    curl::global_init();
    handles h;
    if (h.easy == nullptr || h.multi == nullptr)
      return refuse("curl_easy_init failed");
    for (auto& to : m.to) {
      if (!plain_address(to))
        return refuse("bad recipient address '" + to + "'");
      auto* more = curl_slist_append(h.rcpt, ("<" + to + ">").c_str());
      if (more == nullptr)
        return refuse("out of memory");
      h.rcpt = more;
    }
    upload body{with_crlf(m.rfc822)};
    auto from = "<" + m.from + ">";
    char errbuf[CURL_ERROR_SIZE] = {0};
    auto ms = static_cast<long>(std::max<int64_t>(timeout.count(), 1));
    auto* e = h.easy;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms);
    if (!smtps)
      curl_easy_setopt(e, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_TRY));
    if (const char* ca = std::getenv("BUTLERS_CA_FILE"); ca && *ca)
      curl_easy_setopt(e, CURLOPT_CAINFO, ca);
    if (!username.empty()) {
      curl_easy_setopt(e, CURLOPT_USERNAME, username.c_str());
      curl_easy_setopt(e, CURLOPT_PASSWORD, password.c_str());
    }
    curl_easy_setopt(e, CURLOPT_MAIL_FROM, from.c_str());
    curl_easy_setopt(e, CURLOPT_MAIL_RCPT, h.rcpt);
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, &body);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(body.data.size()));
    std::string run_error;
    auto code = curl::run(h.multi, e, cancel, run_error);
    long reply = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &reply);
    return classify(code, reply,
                    !run_error.empty() ? run_error
                    : code == CURLE_ABORTED_BY_CALLBACK
                      ? "cancelled"
                      : curl::describe(code, errbuf));
  } catch (const std::exception& ex) {
    auto r = refuse(std::string{"smtp_send: "} + ex.what());
    r.retryable = true;
    return r;
  }
}

} // namespace butlers
