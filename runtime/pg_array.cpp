#include "runtime/pg_array.hpp"

namespace butlers {

pg_array& pg_array::add(std::string_view element) {
  separator();
  text_ += '"';
  for (char c : element) {
    if (c == '"' || c == '\\')
      text_ += '\\';
    text_ += c;
  }
  text_ += '"';
  return *this;
}

pg_array& pg_array::add(int64_t element) {
  separator();
  text_ += std::to_string(element);
  return *this;
}

pg_array& pg_array::null() {
  separator();
  text_ += "NULL";
  return *this;
}

} // namespace butlers
