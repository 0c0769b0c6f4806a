// Slack (runtime/slack_event.cpp, runtime/slack.cpp): an Events API body
// as a slack connector receives it, its signature checked and mapped to an
// ingest envelope; the same bytes as a stored request the adapter reads
// its source message from, and as a Web API answer body (first byte: the
// HTTP status). Contract: an envelope verdict carries an envelope, a
// challenge a challenge, anything else a reason; the signature of a body
// is always valid against itself.

#include "runtime/slack_event.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/http_client.hpp"
#include "runtime/slack.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace butlers;
  if (size < 1)
    return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto m = map_slack_event(text, "U0LAN0Z89");
  switch (m.verdict) {
    case slack_event_verdict::envelope:
      if (m.envelope.empty())
        __builtin_trap();
      break;
    case slack_event_verdict::challenge: break;
    default:
      if (m.reason.empty())
        __builtin_trap();
  }
  auto sig = slack_signature("secret", "1700000000", text);
  if (verify_slack_signature("secret", "1700000000", sig, text, 1700000000)
      != slack_signature_status::valid)
    __builtin_trap();
  (void)verify_slack_signature("secret", text.substr(0, 12), text, text,
                               1700000000);
  (void)slack_source(text);
  (void)split_slack_text(text, 1 + data[0] % 64);
  static constexpr int statuses[] = {200, 400, 401, 404, 429, 500, 502, 302};
  http_response r;
  r.status = statuses[data[0] % 8];
  r.body.assign(text);
  if (data[0] & 0x80)
    r.headers.emplace_back("retry-after", "3");
  (void)read_slack_answer(r);
  return 0;
}
