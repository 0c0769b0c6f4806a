// The JSON-schema validator (runtime/schema.cpp) over every embedded schema
// (schemas/*.json): the first byte picks the schema, the rest is the
// instance, parsed with the project's json::parse limits as every caller
// does.

#include "runtime/schema.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> names = butlers::schema::names();
  if (size < 1 || names.empty())
    return 0;
  const auto& s = butlers::schema::get(names[data[0] % names.size()]);
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  rapidjson::Document doc;
  if (butlers::json::parse(text, doc))
    return 0;
  for (const auto& v : s.validate(doc))
    if (v.keyword.empty() || butlers::to_string(v).empty())
      __builtin_trap();
  return 0;
}
