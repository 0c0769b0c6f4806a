#include "runtime/fanout.hpp"

namespace butlers {

std::string attempt_segment_id(const std::string& segment_id,
                               uint32_t attempt) {
  if (attempt <= 1)
    return segment_id;
  return segment_id + ":a" + std::to_string(attempt);
}

std::pair<std::string, uint32_t> split_attempt(const std::string& id) {
  auto pos = id.rfind(":a");
  if (pos == std::string::npos || pos + 2 >= id.size())
    return {id, 1};
  uint32_t n = 0;
  for (size_t i = pos + 2; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9')
      return {id, 1};
    n = n * 10 + static_cast<uint32_t>(id[i] - '0');
    if (n > 1000000)
      return {id, 1};
  }
  return {id.substr(0, pos), n};
}

const char* fanout::abort_policy() const {
  return mode == "conditional" ? "skip_dependents" : "continue";
}

std::vector<size_t> fanout::ready() const {
  std::vector<size_t> out;
  if (mode == "parallel") {
    for (size_t i = 0; i < segments.size(); ++i)
      if (segments[i].state == "pending")
        out.push_back(i);
    return out;
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].terminal())
      continue;
    if (segments[i].state == "pending")
      out.push_back(i);
    break;
  }
  return out;
}

std::vector<size_t> fanout::first_dispatches() const {
  auto copy = *this;
  std::vector<size_t> out;
  for (;;) {
    auto next = copy.ready();
    if (next.empty())
      return out;
    copy.segments[next.front()].state = "dispatched";
    out.push_back(next.front());
  }
}

std::vector<size_t> fanout::settle(size_t i) {
  std::vector<size_t> skipped;
  if (mode != "conditional" || segments[i].state != "error")
    return skipped;
  for (size_t j = i + 1; j < segments.size(); ++j) {
    auto& s = segments[j];
    if (s.terminal())
      continue;
    s.state = "skipped";
    s.error_class.clear();
    s.error_message = "skipped: upstream segment " + segments[i].segment_id
                      + " (" + segments[i].butler + ") failed";
    skipped.push_back(j);
  }
  return skipped;
}

bool fanout::done() const {
  for (auto& s : segments)
    if (!s.terminal())
      return false;
  return true;
}

fanout::verdict_t fanout::verdict() const {
  for (auto& s : segments)
    if (s.state == "error")
      return {"errored", s.error_class,
              s.butler + " (" + s.segment_id + "): " + s.error_message};
  for (auto& s : segments)
    if (s.state != "ok")
      return {"errored", "internal_error", s.segment_id + " did not complete"};
  return {"parsed", {}, {}};
}

int fanout::find(const std::string& segment_id) const {
  for (size_t i = 0; i < segments.size(); ++i)
    if (segments[i].segment_id == segment_id)
      return static_cast<int>(i);
  return -1;
}

} // namespace butlers
