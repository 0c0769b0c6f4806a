// Incoming mail (runtime/mail.cpp, runtime/mail_text.cpp, GMime): a whole
// RFC 5322 message through parse_mail, and the same bytes through the text
// helpers a mail's parts go through (address, HTML to text, cleaning).

#include "runtime/mail.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)butlers::parse_mail(bytes);
  if (size < 4096) {
    (void)butlers::parse_mail_address(bytes);
    (void)butlers::html_to_text(bytes);
    (void)butlers::clean_mail_text(bytes);
    (void)butlers::reply_subject(bytes);
  }
  return 0;
}
