#include "runtime/pg_array.hpp"

namespace butlers {

pg_array& pg_array::add(std::string_view element) {
  separator();
  // Written straight into the buffer, sized for the worst case (every
  // character escaped) and cut back after: this runs for every column of
  // every row of a group commit, and a JSON payload has a quote every few
  // characters, so appending the runs between them costs a call each.
  auto at = text_.size();
  text_.resize(at + 2 * element.size() + 2);
  char* out = text_.data() + at;
  *out++ = '"';
  for (char c : element) {
    if (c == '"' || c == '\\')
      *out++ = '\\';
    *out++ = c;
  }
  *out++ = '"';
  text_.resize(static_cast<size_t>(out - text_.data()));
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
