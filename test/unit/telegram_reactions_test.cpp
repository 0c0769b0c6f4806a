#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "runtime/telegram_reactions.hpp"

using namespace butlers;

TEST(telegram_reactions, the_lifecycle_defaults_are_allowed) {
  for (const char* e : {"👀", "👍", "👾", "😴"})
    EXPECT_TRUE(is_allowed_reaction(e)) << e;
}

TEST(telegram_reactions, emoji_outside_the_list_are_not) {
  for (const char* e : {"🚀", "✅", "", "eyes", "👀👀", "❤️"})
    EXPECT_FALSE(is_allowed_reaction(e)) << e;
}

TEST(telegram_reactions, zwj_sequences_match_byte_for_byte) {
  EXPECT_TRUE(is_allowed_reaction("\xe2\x9d\xa4\xe2\x80\x8d\xf0\x9f\x94\xa5"));
  EXPECT_TRUE(
    is_allowed_reaction("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x92\xbb"));
  EXPECT_TRUE(is_allowed_reaction("\xf0\x9f\xa4\xb7\xe2\x80\x8d\xe2\x99\x82"));
  // Without the joiner it is two emoji, not one reaction.
  EXPECT_FALSE(is_allowed_reaction("\xe2\x9d\xa4\xf0\x9f\x94\xa5"));
}

TEST(telegram_reactions, canonical_form_drops_variation_selectors) {
  EXPECT_EQ(canonical_reaction("❤️"), std::string{"❤"});
  EXPECT_EQ(canonical_reaction(
              "\xe2\x9d\xa4\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x94\xa5"),
            std::string{"\xe2\x9d\xa4\xe2\x80\x8d\xf0\x9f\x94\xa5"});
  EXPECT_EQ(canonical_reaction("👀"), std::string{"👀"});
  EXPECT_EQ(canonical_reaction("🚀"), std::nullopt);
}

TEST(telegram_reactions, the_list_is_73_distinct_utf8_emoji) {
  std::set<std::string_view> seen;
  for (auto e : telegram_reaction_emoji) {
    EXPECT_TRUE(json::is_utf8(e)) << e;
    EXPECT_FALSE(json::is_ascii(e)) << e;
    seen.insert(e);
  }
  EXPECT_EQ(seen.size(), 73u);
}
