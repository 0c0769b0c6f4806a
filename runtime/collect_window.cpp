#include "runtime/collect_window.hpp"

#include <algorithm>

#include "runtime/json.hpp"

namespace butlers {

collect_limits collect_limits::of(const threads_config& cfg) {
  collect_limits out;
  out.quiet = std::chrono::milliseconds{cfg.collect_ms};
  out.max_open = std::chrono::milliseconds{
    std::max(cfg.collect_max_ms, cfg.collect_ms)};
  out.max_turns = std::max<size_t>(1, cfg.collect_max_turns);
  return out;
}

std::string collected_input(const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0)
      out += "\n\n";
    out += texts[i];
  }
  return out;
}

std::optional<std::string> collected_input_json(std::string_view json_array) {
  rapidjson::Document doc;
  // The texts come from our own table (each turn within the HTTP body
  // limit), not from a client.
  json::parse_limits limits;
  limits.max_bytes = std::max(limits.max_bytes, json_array.size());
  if (json::parse(json_array, doc, limits) || !doc.IsArray())
    return std::nullopt;
  std::vector<std::string> texts;
  for (auto& x : doc.GetArray()) {
    if (!x.IsString())
      return std::nullopt;
    texts.emplace_back(x.GetString(), x.GetStringLength());
  }
  return collected_input(texts);
}

collect_window::collect_window(std::string run_id, std::string butler,
                               collect_limits lim, std::string text,
                               time_point now)
  : run_id_(std::move(run_id)), butler_(std::move(butler)), lim_(lim),
    first_(now), last_(now) {
  bytes_ = text.size();
  texts_.push_back(std::move(text));
}

void collect_window::add(std::string text, time_point now) {
  bytes_ += 2 + text.size();
  texts_.push_back(std::move(text));
  last_ = std::max(last_, now);
}

collect_window::time_point collect_window::deadline() const {
  return std::min(last_ + lim_.quiet, first_ + lim_.max_open);
}

bool collect_window::fits(size_t bytes) const {
  return bytes_ + 2 + bytes <= lim_.max_bytes;
}

bool collect_window::due(time_point now) const {
  return full() || now >= deadline();
}

} // namespace butlers
