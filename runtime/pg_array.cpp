#include "runtime/pg_array.hpp"

namespace butlers {

pg_array& pg_array::add(std::string_view element) {
  separator();
  // Appends the runs between characters that need a backslash in one go:
  // this runs for every column of every row of a group commit, and a JSON
  // payload is mostly such runs.
  text_.reserve(text_.size() + element.size() + 3);
  text_ += '"';
  size_t run = 0;
  for (size_t i = 0; i < element.size(); ++i) {
    char c = element[i];
    if (c == '"' || c == '\\') {
      text_.append(element.data() + run, i - run);
      text_ += '\\';
      run = i;
    }
  }
  text_.append(element.data() + run, element.size() - run);
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

std::string pg_array::take() {
  text_ += '}';
  std::string out = std::move(text_);
  text_ = "{";
  size_ = 0;
  return out;
}

} // namespace butlers
