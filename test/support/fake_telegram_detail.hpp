#pragma once

// Helpers shared by fake_telegram.cpp and fake_telegram_methods.cpp.

#include <cctype>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "runtime/json.hpp"

namespace butlers::test::telegram_detail {

inline std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Member `name` of `obj`, or null (also when `obj` is no object).
inline const rapidjson::Value* member(const rapidjson::Value& obj,
                                      std::string_view name) {
  if (!obj.IsObject())
    return nullptr;
  auto i = obj.FindMember(
    rapidjson::Value{name.data(),
                     static_cast<rapidjson::SizeType>(name.size())});
  return i == obj.MemberEnd() ? nullptr : &i->value;
}

/// A JSON integer, or a string holding one (form and query parameters).
inline std::optional<int64_t> as_int(const rapidjson::Value* v) {
  if (v == nullptr)
    return std::nullopt;
  if (v->IsInt64())
    return v->GetInt64();
  if (v->IsString()) {
    std::string s = v->GetString();
    if (s.empty() || s.size() > 20)
      return std::nullopt;
    size_t pos = 0;
    try {
      auto n = std::stoll(s, &pos);
      if (pos == s.size())
        return n;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

/// `{"ok":true,"result":<result>}`.
inline std::string ok(std::string_view result) {
  return R"({"ok":true,"result":)" + std::string{result} + "}";
}

/// `{"ok":false,"error_code":N,"description":...}`, with
/// `"parameters":{"retry_after":N}` when given.
inline std::string failure(int code, std::string_view description,
                           std::optional<int> retry_after = std::nullopt) {
  std::string out = R"({"ok":false,"error_code":)" + std::to_string(code)
                    + R"(,"description":)" + json::quote(description);
  if (retry_after)
    out += R"(,"parameters":{"retry_after":)" + std::to_string(*retry_after)
           + "}";
  return out + "}";
}

} // namespace butlers::test::telegram_detail
