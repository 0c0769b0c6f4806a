#include "runtime/sse.hpp"

#include <algorithm>
#include <utility>

namespace butlers {

namespace {

constexpr std::string_view utf8_bom{"\xEF\xBB\xBF"};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

} // namespace

bool sse_parser::feed(std::string_view chunk, const handler& on_event) {
  if (failed_)
    return false;
  if (!bom_done_) {
    // Hold the first bytes until they either are the BOM or cannot be.
    head_.append(chunk.data(), chunk.size());
    auto n = std::min(head_.size(), utf8_bom.size());
    if (head_.compare(0, n, utf8_bom.substr(0, n)) == 0
        && head_.size() < utf8_bom.size())
      return true;
    bom_done_ = true;
    auto held = std::move(head_);
    head_.clear();
    if (held.compare(0, utf8_bom.size(), utf8_bom) == 0)
      held.erase(0, utf8_bom.size());
    return feed(held, on_event);
  }
  size_t i = 0;
  if (after_cr_ && !chunk.empty() && chunk[0] == '\n')
    i = 1; // the LF of a CRLF split between chunks
  after_cr_ = false;
  while (i < chunk.size()) {
    auto end = chunk.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      if (line_.size() + (chunk.size() - i) > max_bytes_) {
        failed_ = true;
        return false;
      }
      line_.append(chunk.data() + i, chunk.size() - i);
      return true;
    }
    if (line_.size() + (end - i) > max_bytes_) {
      failed_ = true;
      return false;
    }
    line_.append(chunk.data() + i, end - i);
    auto complete = std::exchange(line_, {});
    line(complete, on_event);
    if (failed_)
      return false;
    i = end + 1;
    if (chunk[end] == '\r') {
      if (i < chunk.size() && chunk[i] == '\n')
        ++i;
      else if (i == chunk.size())
        after_cr_ = true;
    }
  }
  return true;
}

void sse_parser::line(std::string_view l, const handler& on_event) {
  if (l.empty()) {
    // Dispatch; an event without data lines is no event.
    if (!data_.empty()) {
      sse_event ev;
      ev.type = std::move(type_);
      data_.pop_back(); // the last LF
      ev.data = std::move(data_);
      ev.id = last_id_;
      on_event(ev);
    }
    type_.clear();
    data_.clear();
    return;
  }
  if (l[0] == ':')
    return; // a comment
  auto colon = l.find(':');
  auto name = l.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = l.substr(colon + 1);
    if (!value.empty() && value[0] == ' ')
      value.remove_prefix(1);
  }
  if (name == "data") {
    if (data_.size() + value.size() + 1 > max_bytes_) {
      failed_ = true;
      return;
    }
    data_.append(value.data(), value.size());
    data_ += '\n';
  } else if (name == "event") {
    type_.assign(value.data(), value.size());
  } else if (name == "id") {
    if (value.find('\0') == std::string_view::npos)
      last_id_.assign(value.data(), value.size());
  } else if (name == "retry") {
    if (all_digits(value) && value.size() <= 18)
      retry_ms_ = std::stoull(std::string{value});
  }
}

} // namespace butlers
