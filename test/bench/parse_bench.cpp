// The ingest boundary's CPU alone: parse_ingest (JSON parse, the ingest.v1
// schema check, the request context and dedupe key) on the load
// generator's body shape, in a loop on one thread. No HTTP, no actors.
// parse_ingest takes its fast path on these bodies; the last column is the
// full path (DOM and generic schema check) alone, for comparison.
//
//   butlers_parse_bench [ITERATIONS]     default 200000
//
// Prints one row per body: the ASCII body every benchmark sends, and the
// same with non-ASCII text, which takes RapidJSON's validating parse.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/ingest.hpp"

namespace {

std::string body(const std::string& text) {
  return R"({"schema_version":"ingest.v1","source":{"channel":"api",)"
         R"("provider":"internal","endpoint_identity":"bench"},)"
         R"("event":{"external_event_id":"e-123456",)"
         R"("observed_at":"2026-01-01T00:00:00Z"},)"
         R"("sender":{"identity":"user-1234"},"payload":{"raw":{)"
         R"("update_id":123456,"message":{"message_id":123456,)"
         R"("date":1795000000,"chat":{"id":1234,"type":"private"},)"
         R"("text":")"
         + text + R"("}},"normalized_text":")" + text
         + R"("},"control":{"idempotency_key":"bench-0123456789ab-1"}})";
}

} // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200000;
  if (n < 1 || n > 100'000'000) {
    std::fprintf(stderr, "usage: butlers_parse_bench [ITERATIONS 1..1e8]\n");
    return 2;
  }
  const std::string ascii = "Can you move my dentist appointment to next "
                            "Thursday afternoon please";
  const std::string utf8 = "Kannst du meinen Zahnarzttermin auf Donnerstag "
                           "verschieben, bitte? "
                           "\xc3\xa4\xc3\xb6\xc3\xbc \xe2\x82\xac";
  std::printf("| body | bytes | parses | us per parse_ingest | us, full path "
              "alone |\n");
  std::printf("|---|---|---|---|---|\n");
  for (auto& [label, text] :
       {std::pair<const char*, std::string>{"ASCII", ascii},
        std::pair<const char*, std::string>{"non-ASCII text", utf8}}) {
    auto b = body(text);
    auto time = [&](auto&& parse) -> double {
      long ok = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < n; ++i)
        ok += parse(b, 1 << 20, 300, 1'795'000'000'000'000 + i)
                .record.has_value();
      auto us = std::chrono::duration<double, std::micro>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
      if (ok != n) {
        std::fprintf(stderr,
                     "butlers_parse_bench: %ld of %ld bodies rejected\n",
                     n - ok, n);
        std::exit(1);
      }
      return us / static_cast<double>(n);
    };
    auto both = time(butlers::parse_ingest);
    auto full = time(butlers::detail::parse_ingest_full);
    std::printf("| %s | %zu | %ld | %.2f | %.2f |\n", label, b.size(), n, both,
                full);
  }
  return 0;
}
