#include "runtime/connector_metrics.hpp"

#include "runtime/connector_source.hpp"

namespace butlers {

connector_metrics connector_metrics::of(metrics_registry& reg,
                                        const std::string& name) {
  auto labels = "connector=\"" + name + "\"";
  auto count = [&](const char* metric, const char* help) {
    return &reg.get_counter(metric, help, labels);
  };
  connector_metrics m;
  m.received = count("butlers_connector_received_total",
                     "Envelopes a connector got, whatever became of them");
  m.accepted = count("butlers_connector_accepted_total",
                     "Envelopes a connector stored");
  m.deduped = count("butlers_connector_deduped_total",
                    "Envelopes a connector submitted that were duplicates");
  m.invalid = count("butlers_connector_invalid_total",
                    "Input a connector could not turn into a valid envelope");
  m.ignored = count("butlers_connector_ignored_total",
                    "Events of kinds a connector does not take");
  m.attachments_refused = count("butlers_connector_attachments_refused_total",
                                "Messages refused because an attachment was "
                                "over a cap");
  m.refused = count("butlers_connector_refused_total",
                    "Envelopes refused at a connector's max_in_flight");
  m.errors = count("butlers_connector_errors_total",
                   "Submissions or fetches that failed and are retried");
  m.in_flight = &reg.get_gauge("butlers_connector_in_flight",
                               "Envelopes submitted and not yet acknowledged",
                               labels);
  m.up = &reg.get_gauge("butlers_connector_up",
                        "1 while a connector runs, 0 once it gave up", labels);
  return m;
}

const char* to_string(submit_status x) {
  switch (x) {
    case submit_status::accepted: return "accepted";
    case submit_status::deduped: return "deduped";
    case submit_status::invalid: return "invalid";
    case submit_status::unavailable: return "unavailable";
    case submit_status::refused: return "refused";
    case submit_status::rate_limited: return "rate_limited";
  }
  return "unknown";
}

} // namespace butlers
