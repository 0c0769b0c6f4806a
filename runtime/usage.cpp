#include "runtime/usage.hpp"

#include <cstdio>

namespace butlers {

namespace {

/// FNV-1a 64 over `parts`, each followed by a 0 byte (so that ("ab", "c")
/// and ("a", "bc") differ).
uint64_t fnv1a(const std::vector<std::string_view>& parts) {
  uint64_t h = 14695981039346656037ull;
  for (auto part : parts) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h *= 1099511628211ull; // the separator (a 0 byte)
  }
  return h;
}

/// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(std::string_view x) {
  std::string out;
  for (char c : x) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

} // namespace

bool scripted_reports_usage(const runtime_config& rt) {
  return rt.input_tokens > 0 || rt.tokens_per_turn > 0
         || rt.cost_per_turn_usd > 0 || !rt.model.empty();
}

std::string prompt_version_of(const runtime_config& rt) {
  if (rt.kind == runtime_kind::delivery)
    return {};
  if (rt.kind == runtime_kind::scripted && !scripted_reports_usage(rt))
    return {};
  std::vector<std::string_view> parts;
  auto kind = to_string(rt.kind);
  auto family = to_string(rt.family);
  parts.push_back(kind);
  parts.push_back(family);
  for (auto& arg : rt.command)
    parts.push_back(arg);
  parts.push_back("model");
  parts.push_back(rt.model);
  parts.push_back("reply");
  parts.push_back(rt.reply);
  // The HTTP model runtimes' system prompt (inline or read from its file)
  // and the server it goes to.
  parts.push_back("system");
  parts.push_back(rt.system_prompt_text);
  parts.push_back("base_url");
  parts.push_back(rt.base_url);
  parts.push_back(cli_prompt_template_version);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(fnv1a(parts)));
  return buf;
}

bool has_usage(const session_usage& u) {
  return u.calls > 0 || u.total_tokens() > 0 || u.cost_known
         || !u.model.empty();
}

std::vector<double> token_buckets() {
  std::vector<double> out;
  double x = 1;
  for (int i = 0; i < 14; ++i, x *= 4)
    out.push_back(x);
  return out;
}

std::vector<double> operation_duration_buckets() {
  return {0.01, 0.02,  0.04,  0.08,  0.16,  0.32, 0.64, 1.28, 2.56,
          5.12, 10.24, 20.48, 40.96, 81.92, 300,  900,  3600};
}

usage_meters::usage_meters(metrics_registry& m, std::string butler)
  : registry_(m), butler_(std::move(butler)) {
  auto label = "butler=\"" + label_value(butler_) + "\"";
  budgets_.refused_request = &m.get_counter("butlers_budget_refused_total",
                                            "Sessions refused before they "
                                            "started: a budget was used up",
                                            label + ",budget=\"request\"");
  budgets_.refused_daily = &m.get_counter("butlers_budget_refused_total",
                                          "Sessions refused before they "
                                          "started: a budget was used up",
                                          label + ",budget=\"daily\"");
  budgets_.stopped = &m.get_counter("butlers_budget_stopped_total",
                                    "Sessions stopped while running: they "
                                    "crossed their budget",
                                    label);
}

usage_meters::per_model& usage_meters::model(const std::string& name) {
  auto key = name.empty() ? std::string{"unknown"} : name;
  auto i = models_.find(key);
  if (i != models_.end())
    return i->second;
  if (models_.size() >= max_models) {
    key = "other";
    i = models_.find(key);
    if (i != models_.end())
      return i->second;
  }
  auto base = "butler=\"" + label_value(butler_) + "\",gen_ai_response_model=\""
              + label_value(key) + "\"";
  per_model pm;
  const char* tokens_help = "Tokens used per session, by type "
                            "(OpenTelemetry gen_ai.client.token.usage)";
  pm.input = &registry_.get_histogram("gen_ai_client_token_usage", tokens_help,
                                      token_buckets(),
                                      base + ",gen_ai_token_type=\"input\"");
  pm.output = &registry_.get_histogram("gen_ai_client_token_usage", tokens_help,
                                       token_buckets(),
                                       base + ",gen_ai_token_type=\"output\"");
  pm.duration = &registry_.get_histogram(
    "gen_ai_client_operation_duration_seconds",
    "Duration of a session's model work, all its calls "
    "(OpenTelemetry gen_ai.client.operation.duration)",
    operation_duration_buckets(), base);
  pm.cost = &registry_.get_histogram("butlers_session_cost_usd",
                                     "Cost of a session in US dollars, as "
                                     "its runtime reported it",
                                     {0.001, 0.01, 0.1, 1, 10, 100}, base);
  return models_.emplace(key, pm).first->second;
}

void usage_meters::observe(const session_usage& u, double duration_s) {
  auto& pm = model(u.model);
  pm.input->observe(static_cast<double>(u.input_tokens));
  pm.output->observe(static_cast<double>(u.output_tokens));
  pm.duration->observe(duration_s);
  if (u.cost_known)
    pm.cost->observe(u.cost_usd);
}

} // namespace butlers
