#include <gtest/gtest.h>

#include "runtime/dedupe.hpp"

namespace butlers {
namespace {

dedupe_input telegram(std::string_view bot, std::string_view update) {
  dedupe_input in;
  in.channel = "telegram";
  in.endpoint_identity = bot;
  in.external_event_id = update;
  in.sender_identity = "user-1";
  in.normalized_text = "hello";
  in.received_at_s = 1000;
  return in;
}

TEST(Dedupe, TelegramUsesUpdateIdAndBot) {
  auto a = dedupe_key(telegram("bot-a", "42"), 300);
  EXPECT_EQ(a, "tg:5:bot-a:42");
  // Same update id from another bot is another event.
  EXPECT_NE(a, dedupe_key(telegram("bot-b", "42"), 300));
  // Text and time do not matter once the update id is known.
  auto later = telegram("bot-a", "42");
  later.normalized_text = "edited";
  later.received_at_s = 999999;
  EXPECT_EQ(a, dedupe_key(later, 300));
}

TEST(Dedupe, EmailUsesMessageIdAndMailbox) {
  dedupe_input in;
  in.channel = "email";
  in.endpoint_identity = "inbox@example.org";
  in.external_event_id = " <abc@mail.example> ";
  auto a = dedupe_key(in, 300);
  EXPECT_EQ(a, "email:17:inbox@example.org:abc@mail.example");
  in.external_event_id = "abc@mail.example";
  EXPECT_EQ(a, dedupe_key(in, 300)) << "angle brackets are not identity";
  in.endpoint_identity = "other@example.org";
  EXPECT_NE(a, dedupe_key(in, 300));
}

TEST(Dedupe, ApiPrefersIdempotencyKey) {
  dedupe_input in;
  in.channel = "api";
  in.endpoint_identity = "client-1";
  in.idempotency_key = "k-1";
  in.normalized_text = "one";
  auto a = dedupe_key(in, 300);
  EXPECT_EQ(a, "idem:3:api:8:client-1:k-1");
  in.normalized_text = "two";
  EXPECT_EQ(a, dedupe_key(in, 300));
  in.endpoint_identity = "client-2";
  EXPECT_NE(a, dedupe_key(in, 300)) << "keys are scoped per caller";
}

TEST(Dedupe, ApiWithoutKeyHashesTextSenderAndTimeBucket) {
  dedupe_input in;
  in.channel = "api";
  in.endpoint_identity = "client-1";
  in.sender_identity = "alice";
  in.normalized_text = "  remind me\tto  call mom ";
  in.received_at_s = 600; // bucket 2 at 300 s
  auto a = dedupe_key(in, 300);
  ASSERT_EQ(a.rfind("hash:", 0), 0u);
  EXPECT_EQ(a.size(), 5u + 64u);
  in.normalized_text = "remind me to call mom";
  in.received_at_s = 899; // same bucket, whitespace normalized
  EXPECT_EQ(a, dedupe_key(in, 300));
  in.received_at_s = 900; // next bucket
  EXPECT_NE(a, dedupe_key(in, 300));
  in.received_at_s = 600;
  in.sender_identity = "bob";
  EXPECT_NE(a, dedupe_key(in, 300));
}

TEST(Dedupe, FieldBoundariesCannotBeForged) {
  dedupe_input x;
  x.channel = "api";
  x.endpoint_identity = "ab";
  x.sender_identity = "c";
  dedupe_input y = x;
  y.endpoint_identity = "a";
  y.sender_identity = "bc";
  EXPECT_NE(dedupe_key(x, 300), dedupe_key(y, 300));
}

TEST(Dedupe, TelegramWithoutUpdateIdFallsBack) {
  auto in = telegram("bot-a", "");
  auto key = dedupe_key(in, 300);
  EXPECT_EQ(key.rfind("hash:", 0), 0u);
}

TEST(Dedupe, Sha256KnownVector) {
  EXPECT_EQ(sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Dedupe, NormalizeWhitespace) {
  EXPECT_EQ(normalize_whitespace("  a \n\t b  c "), "a b c");
  EXPECT_EQ(normalize_whitespace(""), "");
  EXPECT_EQ(normalize_whitespace(" \t\n"), "");
}

} // namespace
} // namespace butlers
