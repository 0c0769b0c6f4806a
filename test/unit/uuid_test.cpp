#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/uuid.hpp"

namespace butlers {
namespace {

TEST(Uuid, LayoutFollowsRfc9562) {
  uuid_v7_generator gen;
  auto id = gen.next(0x0123456789AB);
  EXPECT_EQ(id.version(), 7);
  EXPECT_EQ(id.bytes[8] & 0xC0, 0x80) << "variant must be 10xx";
  EXPECT_EQ(id.unix_ms(), 0x0123456789ABu);
  auto text = id.to_string();
  ASSERT_EQ(text.size(), 36u);
  EXPECT_EQ(text.substr(0, 13), "01234567-89ab");
  EXPECT_EQ(text[14], '7');
  EXPECT_EQ(text[8], '-');
  EXPECT_EQ(text[23], '-');
}

TEST(Uuid, TextRoundTrip) {
  auto id = make_uuid_v7();
  auto parsed = uuid::parse(id.to_string());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, id);
  EXPECT_FALSE(uuid::parse("not-a-uuid"));
  EXPECT_FALSE(uuid::parse("0123456789ab-7000-8000-000000000000x"));
  EXPECT_FALSE(uuid::parse("01234567-89ab-7000-8000-00000000000g"));
  auto upper = uuid::parse("01234567-89AB-7CDE-8F00-000000000001");
  ASSERT_TRUE(upper);
  EXPECT_EQ(upper->to_string(), "01234567-89ab-7cde-8f00-000000000001");
}

TEST(Uuid, MonotonicWithinOneMillisecond) {
  // The same clock reading 5,000 times: the 12-bit counter runs out and
  // borrows the next millisecond instead of wrapping.
  const uint64_t ms = 1'900'000'000'000;
  uuid_v7_generator gen;
  auto prev = gen.next(ms);
  for (int i = 0; i < 5000; ++i) {
    auto next = gen.next(ms);
    ASSERT_LT(prev, next) << "at " << i;
    ASSERT_LT(prev.to_string(), next.to_string());
    prev = next;
  }
  EXPECT_GE(prev.unix_ms(), ms);
}

TEST(Uuid, ClockGoingBackwardsStillIncreases) {
  uuid_v7_generator gen;
  auto a = gen.next(2'000'000'000'000);
  auto b = gen.next(1'000'000'000'000);
  EXPECT_LT(a, b);
}

TEST(Uuid, OrderedAndUniqueAcrossThreads) {
  constexpr int threads = 8;
  constexpr int per_thread = 20000;
  std::vector<std::vector<uuid>> results(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      auto& out = results[t];
      out.reserve(per_thread);
      for (int i = 0; i < per_thread; ++i)
        out.push_back(make_uuid_v7());
    });
  for (auto& w : workers)
    w.join();
  std::set<uuid> all;
  for (auto& out : results) {
    for (size_t i = 1; i < out.size(); ++i)
      ASSERT_LT(out[i - 1], out[i]) << "each thread sees increasing ids";
    all.insert(out.begin(), out.end());
  }
  EXPECT_EQ(all.size(), size_t{threads * per_thread});
}

} // namespace
} // namespace butlers
