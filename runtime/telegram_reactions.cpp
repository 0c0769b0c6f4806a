#include "runtime/telegram_reactions.hpp"

#include <algorithm>

namespace butlers {

using namespace std::string_view_literals;

// Written as escapes so that no editor normalises a variation selector or a
// zero-width joiner in or out; the comment shows each one as it renders.
// Order as in the Bot API documentation.
const std::array<std::string_view, 73> telegram_reaction_emoji = {
  "\xf0\x9f\x91\x8d"sv, // 👍 thumbs up sign
  "\xf0\x9f\x91\x8e"sv, // 👎 thumbs down sign
  "\xe2\x9d\xa4"sv,     // ❤ heavy black heart
  "\xf0\x9f\x94\xa5"sv, // 🔥 fire
  "\xf0\x9f\xa5\xb0"sv, // 🥰 smiling face with smiling eyes and three hearts
  "\xf0\x9f\x91\x8f"sv, // 👏 clapping hands sign
  "\xf0\x9f\x98\x81"sv, // 😁 grinning face with smiling eyes
  "\xf0\x9f\xa4\x94"sv, // 🤔 thinking face
  "\xf0\x9f\xa4\xaf"sv, // 🤯 shocked face with exploding head
  "\xf0\x9f\x98\xb1"sv, // 😱 face screaming in fear
  "\xf0\x9f\xa4\xac"sv, // 🤬 serious face with symbols covering mouth
  "\xf0\x9f\x98\xa2"sv, // 😢 crying face
  "\xf0\x9f\x8e\x89"sv, // 🎉 party popper
  "\xf0\x9f\xa4\xa9"sv, // 🤩 grinning face with star eyes
  "\xf0\x9f\xa4\xae"sv, // 🤮 face with open mouth vomiting
  "\xf0\x9f\x92\xa9"sv, // 💩 pile of poo
  "\xf0\x9f\x99\x8f"sv, // 🙏 person with folded hands
  "\xf0\x9f\x91\x8c"sv, // 👌 ok hand sign
  "\xf0\x9f\x95\x8a"sv, // 🕊 dove of peace
  "\xf0\x9f\xa4\xa1"sv, // 🤡 clown face
  "\xf0\x9f\xa5\xb1"sv, // 🥱 yawning face
  "\xf0\x9f\xa5\xb4"sv, // 🥴 face with uneven eyes and wavy mouth
  "\xf0\x9f\x98\x8d"sv, // 😍 smiling face with heart-shaped eyes
  "\xf0\x9f\x90\xb3"sv, // 🐳 spouting whale
  "\xe2\x9d\xa4\xe2\x80\x8d\xf0\x9f\x94\xa5"sv, // ❤‍🔥 heavy black heart
                                                // + zero width joiner + fire
  "\xf0\x9f\x8c\x9a"sv, // 🌚 new moon with face
  "\xf0\x9f\x8c\xad"sv, // 🌭 hot dog
  "\xf0\x9f\x92\xaf"sv, // 💯 hundred points symbol
  "\xf0\x9f\xa4\xa3"sv, // 🤣 rolling on the floor laughing
  "\xe2\x9a\xa1"sv,     // ⚡ high voltage sign
  "\xf0\x9f\x8d\x8c"sv, // 🍌 banana
  "\xf0\x9f\x8f\x86"sv, // 🏆 trophy
  "\xf0\x9f\x92\x94"sv, // 💔 broken heart
  "\xf0\x9f\xa4\xa8"sv, // 🤨 face with one eyebrow raised
  "\xf0\x9f\x98\x90"sv, // 😐 neutral face
  "\xf0\x9f\x8d\x93"sv, // 🍓 strawberry
  "\xf0\x9f\x8d\xbe"sv, // 🍾 bottle with popping cork
  "\xf0\x9f\x92\x8b"sv, // 💋 kiss mark
  "\xf0\x9f\x96\x95"sv, // 🖕 reversed hand with middle finger extended
  "\xf0\x9f\x98\x88"sv, // 😈 smiling face with horns
  "\xf0\x9f\x98\xb4"sv, // 😴 sleeping face
  "\xf0\x9f\x98\xad"sv, // 😭 loudly crying face
  "\xf0\x9f\xa4\x93"sv, // 🤓 nerd face
  "\xf0\x9f\x91\xbb"sv, // 👻 ghost
  "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x92\xbb"sv, // 👨‍💻 man + zero
                                                    // width joiner + personal
                                                    // computer
  "\xf0\x9f\x91\x80"sv, // 👀 eyes
  "\xf0\x9f\x8e\x83"sv, // 🎃 jack-o-lantern
  "\xf0\x9f\x99\x88"sv, // 🙈 see-no-evil monkey
  "\xf0\x9f\x98\x87"sv, // 😇 smiling face with halo
  "\xf0\x9f\x98\xa8"sv, // 😨 fearful face
  "\xf0\x9f\xa4\x9d"sv, // 🤝 handshake
  "\xe2\x9c\x8d"sv,     // ✍ writing hand
  "\xf0\x9f\xa4\x97"sv, // 🤗 hugging face
  "\xf0\x9f\xab\xa1"sv, // 🫡 saluting face
  "\xf0\x9f\x8e\x85"sv, // 🎅 father christmas
  "\xf0\x9f\x8e\x84"sv, // 🎄 christmas tree
  "\xe2\x98\x83"sv,     // ☃ snowman
  "\xf0\x9f\x92\x85"sv, // 💅 nail polish
  "\xf0\x9f\xa4\xaa"sv, // 🤪 grinning face with one large and one small eye
  "\xf0\x9f\x97\xbf"sv, // 🗿 moyai
  "\xf0\x9f\x86\x92"sv, // 🆒 squared cool
  "\xf0\x9f\x92\x98"sv, // 💘 heart with arrow
  "\xf0\x9f\x99\x89"sv, // 🙉 hear-no-evil monkey
  "\xf0\x9f\xa6\x84"sv, // 🦄 unicorn face
  "\xf0\x9f\x98\x98"sv, // 😘 face throwing a kiss
  "\xf0\x9f\x92\x8a"sv, // 💊 pill
  "\xf0\x9f\x99\x8a"sv, // 🙊 speak-no-evil monkey
  "\xf0\x9f\x98\x8e"sv, // 😎 smiling face with sunglasses
  "\xf0\x9f\x91\xbe"sv, // 👾 alien monster
  "\xf0\x9f\xa4\xb7\xe2\x80\x8d\xe2\x99\x82"sv, // 🤷‍♂ shrug + zero width
                                                // joiner + male sign
  "\xf0\x9f\xa4\xb7"sv,                         // 🤷 shrug
  "\xf0\x9f\xa4\xb7\xe2\x80\x8d\xe2\x99\x80"sv, // 🤷‍♀ shrug + zero width
                                                // joiner + female sign
  "\xf0\x9f\x98\xa1"sv,                         // 😡 pouting face
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
