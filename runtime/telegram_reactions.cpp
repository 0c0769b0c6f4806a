#include "runtime/telegram_reactions.hpp"

#include <algorithm>

namespace butlers {

using namespace std::string_view_literals;

// Written as escapes so that no editor normalises a variation selector or a
// zero-width joiner in or out; each comment gives the code points.
// Order as in the Bot API documentation.
const std::array<std::string_view, 73> telegram_reaction_emoji = {
  "\xf0\x9f\x91\x8d"sv, // U+1F44D thumbs up
  "\xf0\x9f\x91\x8e"sv, // U+1F44E thumbs down
  "\xe2\x9d\xa4"sv,     // U+2764 red heart
  "\xf0\x9f\x94\xa5"sv, // U+1F525 fire
  "\xf0\x9f\xa5\xb0"sv, // U+1F970 smiling face with hearts
  "\xf0\x9f\x91\x8f"sv, // U+1F44F clapping hands
  "\xf0\x9f\x98\x81"sv, // U+1F601 grinning face with smiling eyes
  "\xf0\x9f\xa4\x94"sv, // U+1F914 thinking face
  "\xf0\x9f\xa4\xaf"sv, // U+1F92F shocked face with exploding head
  "\xf0\x9f\x98\xb1"sv, // U+1F631 face screaming in fear
  "\xf0\x9f\xa4\xac"sv, // U+1F92C serious face with symbols covering mouth
  "\xf0\x9f\x98\xa2"sv, // U+1F622 crying face
  "\xf0\x9f\x8e\x89"sv, // U+1F389 party popper
  "\xf0\x9f\xa4\xa9"sv, // U+1F929 grinning face with star eyes
  "\xf0\x9f\xa4\xae"sv, // U+1F92E face with open mouth vomiting
  "\xf0\x9f\x92\xa9"sv, // U+1F4A9 pile of poo
  "\xf0\x9f\x99\x8f"sv, // U+1F64F person with folded hands
  "\xf0\x9f\x91\x8c"sv, // U+1F44C ok hand sign
  "\xf0\x9f\x95\x8a"sv, // U+1F54A dove of peace
  "\xf0\x9f\xa4\xa1"sv, // U+1F921 clown face
  "\xf0\x9f\xa5\xb1"sv, // U+1F971 yawning face
  "\xf0\x9f\xa5\xb4"sv, // U+1F974 face with uneven eyes and wavy mouth
  "\xf0\x9f\x98\x8d"sv, // U+1F60D smiling face with heart shaped eyes
  "\xf0\x9f\x90\xb3"sv, // U+1F433 spouting whale
  "\xe2\x9d\xa4\xe2\x80\x8d\xf0\x9f\x94\xa5"sv, // U+2764 U+200D U+1F525
  "\xf0\x9f\x8c\x9a"sv,                         // U+1F31A new moon with face
  "\xf0\x9f\x8c\xad"sv,                         // U+1F32D hot dog
  "\xf0\x9f\x92\xaf"sv,                         // U+1F4AF hundred points symbol
  "\xf0\x9f\xa4\xa3"sv, // U+1F923 rolling on the floor laughing
  "\xe2\x9a\xa1"sv,     // U+26A1 high voltage sign
  "\xf0\x9f\x8d\x8c"sv, // U+1F34C banana
  "\xf0\x9f\x8f\x86"sv, // U+1F3C6 trophy
  "\xf0\x9f\x92\x94"sv, // U+1F494 broken heart
  "\xf0\x9f\xa4\xa8"sv, // U+1F928 face with one eyebrow raised
  "\xf0\x9f\x98\x90"sv, // U+1F610 neutral face
  "\xf0\x9f\x8d\x93"sv, // U+1F353 strawberry
  "\xf0\x9f\x8d\xbe"sv, // U+1F37E bottle with popping cork
  "\xf0\x9f\x92\x8b"sv, // U+1F48B kiss mark
  "\xf0\x9f\x96\x95"sv, // U+1F595 reversed hand with middle finger extended
  "\xf0\x9f\x98\x88"sv, // U+1F608 smiling face with horns
  "\xf0\x9f\x98\xb4"sv, // U+1F634 sleeping face
  "\xf0\x9f\x98\xad"sv, // U+1F62D loudly crying face
  "\xf0\x9f\xa4\x93"sv, // U+1F913 nerd face
  "\xf0\x9f\x91\xbb"sv, // U+1F47B ghost
  "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x92\xbb"sv, // U+1F468 U+200D U+1F4BB
  "\xf0\x9f\x91\x80"sv,                             // U+1F440 eyes
  "\xf0\x9f\x8e\x83"sv,                             // U+1F383 jack o lantern
  "\xf0\x9f\x99\x88"sv, // U+1F648 see no evil monkey
  "\xf0\x9f\x98\x87"sv, // U+1F607 smiling face with halo
  "\xf0\x9f\x98\xa8"sv, // U+1F628 fearful face
  "\xf0\x9f\xa4\x9d"sv, // U+1F91D handshake
  "\xe2\x9c\x8d"sv,     // U+270D writing hand
  "\xf0\x9f\xa4\x97"sv, // U+1F917 hugging face
  "\xf0\x9f\xab\xa1"sv, // U+1FAE1 saluting face
  "\xf0\x9f\x8e\x85"sv, // U+1F385 father christmas
  "\xf0\x9f\x8e\x84"sv, // U+1F384 christmas tree
  "\xe2\x98\x83"sv,     // U+2603 snowman
  "\xf0\x9f\x92\x85"sv, // U+1F485 nail polish
  "\xf0\x9f\xa4\xaa"sv, // U+1F92A
  "\xf0\x9f\x97\xbf"sv, // U+1F5FF moyai
  "\xf0\x9f\x86\x92"sv, // U+1F192 squared cool
  "\xf0\x9f\x92\x98"sv, // U+1F498 heart with arrow
  "\xf0\x9f\x99\x89"sv, // U+1F649 hear no evil monkey
  "\xf0\x9f\xa6\x84"sv, // U+1F984 unicorn face
  "\xf0\x9f\x98\x98"sv, // U+1F618 face throwing a kiss
  "\xf0\x9f\x92\x8a"sv, // U+1F48A pill
  "\xf0\x9f\x99\x8a"sv, // U+1F64A speak no evil monkey
  "\xf0\x9f\x98\x8e"sv, // U+1F60E smiling face with sunglasses
  "\xf0\x9f\x91\xbe"sv, // U+1F47E alien monster
  "\xf0\x9f\xa4\xb7\xe2\x80\x8d\xe2\x99\x82"sv, // U+1F937 U+200D U+2642
  "\xf0\x9f\xa4\xb7"sv,                         // U+1F937 shrug
  "\xf0\x9f\xa4\xb7\xe2\x80\x8d\xe2\x99\x80"sv, // U+1F937 U+200D U+2640
  "\xf0\x9f\x98\xa1"sv,                         // U+1F621 pouting face
};

bool is_allowed_reaction(std::string_view emoji) {
  return std::find(telegram_reaction_emoji.begin(),
                   telegram_reaction_emoji.end(), emoji)
         != telegram_reaction_emoji.end();
}

namespace {

std::string without_vs16(std::string_view s) {
  static constexpr std::string_view vs16 = "\xef\xb8\x8f";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, vs16.size()) == vs16) {
      i += vs16.size();
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

} // namespace

std::optional<std::string> canonical_reaction(std::string_view emoji) {
  auto stripped = without_vs16(emoji);
  for (auto listed : telegram_reaction_emoji)
    if (without_vs16(listed) == stripped)
      return std::string{listed};
  return std::nullopt;
}

} // namespace butlers
