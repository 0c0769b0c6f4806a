// Telegram (runtime/telegram_update.cpp, runtime/telegram.cpp): an Update as
// a webhook delivers it, mapped to an ingest envelope; and the same bytes
// as a Bot API answer body (first byte: the HTTP status class).

#include "runtime/telegram_update.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/http_client.hpp"
#include "runtime/telegram.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)butlers::map_telegram_update(text, "12345");
  static constexpr int statuses[] = {200, 400, 401, 404, 429, 500, 502, 302};
  butlers::http_response r;
  r.status = statuses[data[0] % 8];
  r.body.assign(text);
  if (data[0] & 0x80)
    r.headers.emplace_back("retry-after", "3");
  (void)butlers::read_telegram_answer(r);
  return 0;
}
