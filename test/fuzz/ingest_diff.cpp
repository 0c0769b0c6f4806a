// Differential: the ingest fast path and the full path must agree
// (runtime/ingest.hpp). Whatever the fast path accepts, the full path
// accepts with the same fields (the request id is fresh per call, so it is
// not compared); whatever the full path rejects, the fast path rejects. The
// fast path may reject more (it falls back to the full path for anything
// unusual), so a fast-path rejection of a valid body is not a finding.
// parse_ingest, the combination, must then answer as the full path does.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "runtime/ingest.hpp"

namespace {

constexpr size_t max_bytes = 1 << 20;
constexpr uint32_t window_s = 3600;
constexpr int64_t now_us = 1'700'000'000'000'000;

[[noreturn]] void disagree(const char* what) {
  std::fprintf(stderr, "ingest fast and full paths disagree: %s\n", what);
  __builtin_trap();
}

void same_record(const butlers::inbox_record& x,
                 const butlers::inbox_record& y) {
  const auto& a = x.context;
  const auto& b = y.context;
  if (a.received_at_us != b.received_at_us)
    disagree("received_at_us");
  if (a.source_channel != b.source_channel)
    disagree("source_channel");
  if (a.source_endpoint_identity != b.source_endpoint_identity)
    disagree("source_endpoint_identity");
  if (a.source_sender_identity != b.source_sender_identity)
    disagree("source_sender_identity");
  if (a.source_thread_identity != b.source_thread_identity)
    disagree("source_thread_identity");
  if (a.trace_parent != b.trace_parent)
    disagree("trace_parent");
  if (a.trace_state != b.trace_state)
    disagree("trace_state");
  if (x.dedupe_key != y.dedupe_key)
    disagree("dedupe_key");
  if (x.raw_payload != y.raw_payload)
    disagree("raw_payload");
  if (x.normalized_text != y.normalized_text)
    disagree("normalized_text");
  if (x.policy_tier != y.policy_tier)
    disagree("policy_tier");
  if (x.schema_version != y.schema_version)
    disagree("schema_version");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto fast = butlers::detail::parse_ingest_fast(body, max_bytes, window_s,
                                                 now_us);
  auto full = butlers::detail::parse_ingest_full(body, max_bytes, window_s,
                                                 now_us);
  if (fast) {
    if (!full.record)
      disagree("the fast path accepts what the full path rejects");
    same_record(*fast, *full.record);
  }
  auto both = butlers::parse_ingest(body, max_bytes, window_s, now_us);
  if (both.record.has_value() != full.record.has_value())
    disagree("parse_ingest and the full path");
  if (both.record)
    same_record(*both.record, *full.record);
  return 0;
}
