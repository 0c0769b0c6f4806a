#include "runtime/http_router.hpp"

namespace butlers {

namespace {

constexpr const char* role_names[http_role_count] = {"ingest", "worker",
                                                     "thread", "operator",
                                                     "read"};

} // namespace

const char* to_string(http_role x) {
  return role_names[static_cast<size_t>(x)];
}

std::optional<http_role> parse_http_role(std::string_view name) {
  for (size_t i = 0; i < http_role_count; ++i)
    if (name == role_names[i])
      return static_cast<http_role>(i);
  return std::nullopt;
}

std::vector<http_role> http_roles::list() const {
  std::vector<http_role> out;
  for (size_t i = 0; i < http_role_count; ++i)
    if (has(static_cast<http_role>(i)))
      out.push_back(static_cast<http_role>(i));
  return out;
}

std::string http_roles::describe() const {
  if (is_open())
    return "open";
  std::string out;
  for (auto r : list())
    out += (out.empty() ? "" : " or ") + std::string{to_string(r)};
  return out.empty() ? "none" : out;
}

http_method parse_http_method(std::string_view name) {
  if (name == "GET")
    return http_method::get;
  if (name == "POST")
    return http_method::post;
  return http_method::other;
}

const char* to_string(http_method x) {
  switch (x) {
    case http_method::get: return "GET";
    case http_method::post: return "POST";
    case http_method::other: break;
  }
  return "OTHER";
}

std::string_view path_params::operator[](std::string_view name) const {
  for (auto& [key, value] : xs_)
    if (key == name)
      return value;
  return {};
}

void path_params::push(std::string_view name, std::string_view value) {
  xs_.emplace_back(name, value);
}

void path_params::pop() {
  xs_.pop_back();
}

void path_params::clear() {
  xs_.clear();
}

bool split_path(std::string_view path, std::vector<std::string_view>& out) {
  out.clear();
  if (path.empty() || path.front() != '/')
    return false;
  size_t pos = 1;
  for (;;) {
    auto end = path.find('/', pos);
    if (end == std::string_view::npos) {
      out.push_back(path.substr(pos));
      return true;
    }
    out.push_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
}

path_pattern::path_pattern(std::string_view text) : text_(text) {
  std::vector<std::string_view> parts;
  split_path(text, parts);
  for (auto part : parts) {
    if (part.size() > 2 && part.front() == '{' && part.back() == '}') {
      auto name = part.substr(1, part.size() - 2);
      if (name.size() > 3 && name.substr(name.size() - 3) == "...")
        segments_.push_back(
          {kind::many, std::string{name.substr(0, name.size() - 3)}});
      else
        segments_.push_back({kind::one, std::string{name}});
    } else {
      segments_.push_back({kind::literal, std::string{part}});
    }
  }
}

bool path_pattern::match(const std::vector<std::string_view>& segments,
                         path_params& out) const {
  out.clear();
  return match_from(0, segments, 0, out);
}

bool path_pattern::match_from(size_t pi,
                              const std::vector<std::string_view>& segments,
                              size_t si, path_params& out) const {
  if (pi == segments_.size())
    return si == segments.size();
  if (si == segments.size())
    return false;
  auto& seg = segments_[pi];
  switch (seg.what) {
    case kind::literal:
      return segments[si] == seg.text
             && match_from(pi + 1, segments, si + 1, out);
    case kind::one:
      out.push(seg.text, segments[si]);
      if (match_from(pi + 1, segments, si + 1, out))
        return true;
      out.pop();
      return false;
    case kind::many:
      // Longest first: the segments of one path are views into it, so the
      // ones from `si` to `last` are one contiguous view.
      for (auto last = segments.size(); last-- > si;) {
        auto first = segments[si].data();
        auto end = segments[last].data() + segments[last].size();
        out.push(seg.text,
                 std::string_view{first, static_cast<size_t>(end - first)});
        if (match_from(pi + 1, segments, last + 1, out))
          return true;
        out.pop();
      }
      return false;
  }
  return false;
}

} // namespace butlers
