#include "runtime/scripted.hpp"

#include <algorithm>
#include <functional>
#include <random>

#include "runtime/json.hpp"

namespace butlers {

bool is_retryable_class(std::string_view cls) {
  return cls == "timeout" || cls == "target_unavailable"
         || cls == "overload_rejected";
}

std::string render_tool_call(std::string_view call, std::string_view prompt) {
  auto quoted = json::quote(prompt);
  auto escaped = std::string_view{quoted}.substr(1, quoted.size() - 2);
  std::string out;
  constexpr std::string_view key = "{prompt}";
  size_t i = 0;
  for (auto at = call.find(key); at != std::string_view::npos;
       at = call.find(key, i)) {
    out.append(call.substr(i, at - i));
    out.append(escaped);
    i = at + key.size();
  }
  out.append(call.substr(i));
  return out;
}

std::string render_reply(std::string_view templ, std::string_view butler,
                         std::string_view prompt, std::string_view request_id,
                         uint32_t turns) {
  std::string out;
  out.reserve(templ.size() + prompt.size());
  auto turns_text = std::to_string(turns);
  size_t i = 0;
  while (i < templ.size()) {
    auto open = templ.find('{', i);
    if (open == std::string_view::npos) {
      out.append(templ.substr(i));
      break;
    }
    out.append(templ.substr(i, open - i));
    auto close = templ.find('}', open);
    if (close == std::string_view::npos) {
      out.append(templ.substr(open));
      break;
    }
    auto key = templ.substr(open + 1, close - open - 1);
    if (key == "butler")
      out.append(butler);
    else if (key == "prompt")
      out.append(prompt);
    else if (key == "request_id")
      out.append(request_id);
    else if (key == "turns")
      out.append(turns_text);
    else
      out.append(templ.substr(open, close - open + 1));
    i = close + 1;
  }
  return out;
}

std::vector<std::string> split_reply(std::string_view reply, uint32_t parts) {
  parts = std::max<uint32_t>(1, parts);
  // Where each word after the first begins (at the space before it).
  std::vector<size_t> cuts;
  for (size_t i = 1; i < reply.size(); ++i)
    if (reply[i] == ' ' && reply[i - 1] != ' ')
      cuts.push_back(i);
  size_t words = cuts.size() + 1;
  std::vector<std::string> out;
  size_t from = 0;
  for (uint32_t p = 1; p <= parts; ++p) {
    size_t to = reply.size();
    if (p < parts) {
      size_t word = words * p / parts; // the first word of the next part
      to = word == 0 ? 0 : cuts[word - 1];
      to = std::max(to, from);
    }
    out.emplace_back(reply.substr(from, to - from));
    from = to;
  }
  return out;
}

namespace {

/// A uniform draw in [0, 1): from (seed, work_id) when seeded, else from a
/// per-thread generator seeded by the OS.
double draw(uint64_t seed, std::string_view work_id) {
  if (seed != 0) {
    std::seed_seq seq{static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32),
                      static_cast<uint32_t>(
                        std::hash<std::string_view>{}(work_id))};
    std::mt19937_64 rng{seq};
    return std::uniform_real_distribution<double>{0.0, 1.0}(rng);
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>{0.0, 1.0}(rng);
}

} // namespace

scripted_script make_script(const runtime_config& cfg, std::string_view butler,
                            std::string_view work_id, std::string_view prompt,
                            std::string_view request_id, uint32_t attempt) {
  scripted_script s;
  s.turn = std::chrono::milliseconds{cfg.turn_ms};
  s.turns = std::max<uint32_t>(1, cfg.turns);
  s.fail = attempt <= cfg.fail_attempts
           || (cfg.fail_rate > 0 && draw(cfg.seed, work_id) < cfg.fail_rate);
  s.fail_class = to_string(cfg.fail_class);
  s.reply = render_reply(cfg.reply, butler, prompt, request_id, s.turns);
  return s;
}

} // namespace butlers
