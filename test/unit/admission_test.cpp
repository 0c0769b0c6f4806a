#include <gtest/gtest.h>

#include "runtime/admission.hpp"
#include "runtime/error.hpp"

using namespace butlers;

namespace {

std::vector<inbox_record> records(size_t n) {
  std::vector<inbox_record> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].context.request_id = "r-" + std::to_string(i);
    out[i].context.source_thread_identity = "t";
    out[i].dedupe_key = "k-" + std::to_string(i);
  }
  return out;
}

ingest_batch batch_of(size_t n) {
  ingest_batch b;
  b.out.resize(n);
  return b;
}

} // namespace

TEST(Admission, AdmitsUpToMaxInFlightAndRefusesTheRestAsOverloaded) {
  ingest_admission adm{2};
  auto recs = records(3);
  auto b = batch_of(3);
  uint64_t overloaded = 0;
  auto admitted = adm.admit(b, recs, false, &overloaded);
  ASSERT_EQ(admitted.size(), 2u);
  EXPECT_EQ(adm.in_flight(), 2u);
  EXPECT_EQ(overloaded, 1u);
  EXPECT_EQ(b.slots, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(b.out[2].error_code,
            static_cast<uint8_t>(butlers_errc::overload_rejected));
  EXPECT_NE(b.out[2].error_message.find("2 requests awaiting commit"),
            std::string::npos);
  // What the hot path keeps: context, text, tier (defaulted), order key.
  ASSERT_EQ(b.admitted.size(), 2u);
  EXPECT_EQ(b.admitted[0].record->policy_tier, "default");
  EXPECT_EQ(b.admitted[0].dedupe_key, "k-0");
  EXPECT_FALSE(b.admitted[0].order_key.empty());
  adm.leave(2);
  EXPECT_EQ(adm.in_flight(), 0u);
}

TEST(Admission, RefusesEverythingWhileDraining) {
  ingest_admission adm{10};
  auto recs = records(2);
  auto b = batch_of(2);
  uint64_t overloaded = 0;
  EXPECT_TRUE(adm.admit(b, recs, true, &overloaded).empty());
  EXPECT_EQ(overloaded, 0u);
  for (auto& r : b.out)
    EXPECT_EQ(r.error_code, static_cast<uint8_t>(butlers_errc::draining));
  EXPECT_EQ(adm.in_flight(), 0u);
}
