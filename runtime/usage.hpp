#pragma once

// What a butler records about its sessions' model use (spec 001 §15.7,
// §15.10): the prompt version of its runtime, and the metrics of tokens,
// cost and duration in the OpenTelemetry GenAI names
// (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`), with
// label sets bounded per butler.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/messages.hpp"
#include "runtime/metrics.hpp"

namespace butlers {

/// Version of `cli_prompt` (actors/session.cpp): bump it when that template
/// changes, so that prompt versions change with it.
constexpr std::string_view cli_prompt_template_version = "cli_prompt/1";

/// A stable hash (16 hex digits, FNV-1a 64) of what shapes the prompts of
/// runtime `rt`: kind, family, command, model, reply template and the CLI
/// prompt template's version. "" for runtimes that make no model calls
/// (the messenger's deliveries) and for a scripted runtime that reports no
/// usage (nothing to record, and the benchmark path stays as it was).
std::string prompt_version_of(const runtime_config& rt);

/// True when a scripted runtime reports synthetic usage.
bool scripted_reports_usage(const runtime_config& rt);

/// True when `u` carries anything worth storing.
bool has_usage(const session_usage& u);

/// Bucket bounds of `gen_ai_client_token_usage` (the GenAI semantic
/// conventions' advice: powers of 4 from 1 to 4^13).
std::vector<double> token_buckets();

/// Bucket bounds of `gen_ai_client_operation_duration_seconds` (the
/// conventions' advice, 0.01 s .. 81.92 s, then longer runs).
std::vector<double> operation_duration_buckets();

/// Counters of budget decisions, one set per butler (null until set).
struct budget_meters {
  /// Sessions refused before they started: per-request and daily budgets.
  counter* refused_request = nullptr;
  counter* refused_daily = nullptr;
  /// Sessions stopped while running.
  counter* stopped = nullptr;
};

/// A butler's usage metrics: created per model on first use, at most
/// `max_models` models per butler (later ones share the label "other").
class usage_meters {
 public:
  static constexpr size_t max_models = 8;

  usage_meters(metrics_registry& m, std::string butler);

  /// The budget counters of this butler.
  budget_meters budgets() const {
    return budgets_;
  }

  /// Records a finished session's usage and duration.
  void observe(const session_usage& u, double duration_s);

 private:
  struct per_model {
    histogram* input = nullptr;
    histogram* output = nullptr;
    histogram* duration = nullptr;
    histogram* cost = nullptr;
  };

  per_model& model(const std::string& name);

  metrics_registry& registry_;
  std::string butler_;
  budget_meters budgets_;
  std::map<std::string, per_model> models_;
};

} // namespace butlers
