#include "runtime/config_enums.hpp"

namespace butlers {

template<>
const std::vector<enum_name<severity>>& enum_names<severity>() {
  static const std::vector<enum_name<severity>> names{
    {severity::trace, "trace"}, {severity::debug, "debug"},
    {severity::info, "info"},   {severity::warn, "warn"},
    {severity::error, "error"},
  };
  return names;
}

template<>
const std::vector<enum_name<router_kind>>& enum_names<router_kind>() {
  static const std::vector<enum_name<router_kind>> names{
    {router_kind::rules, "rules"},
    {router_kind::cli, "cli"},
  };
  return names;
}

template<>
const std::vector<enum_name<cli_family>>& enum_names<cli_family>() {
  static const std::vector<enum_name<cli_family>> names{
    {cli_family::claude, "claude"},
    {cli_family::codex, "codex"},
    {cli_family::opencode, "opencode"},
  };
  return names;
}

template<>
const std::vector<enum_name<runtime_kind>>& enum_names<runtime_kind>() {
  static const std::vector<enum_name<runtime_kind>> names{
    {runtime_kind::scripted, "scripted"},
    {runtime_kind::cli, "cli"},
    {runtime_kind::openai, "openai"},
    {runtime_kind::anthropic, "anthropic"},
    {runtime_kind::delivery, "delivery"},
    {runtime_kind::external, "external"},
  };
  return names;
}

template<>
const std::vector<enum_name<prompt_passing>>& enum_names<prompt_passing>() {
  static const std::vector<enum_name<prompt_passing>> names{
    {prompt_passing::on_stdin, "stdin"},
    {prompt_passing::as_argument, "argument"},
  };
  return names;
}

template<>
const std::vector<enum_name<fanout_kind>>& enum_names<fanout_kind>() {
  static const std::vector<enum_name<fanout_kind>> names{
    {fanout_kind::parallel, "parallel"},
    {fanout_kind::ordered, "ordered"},
    {fanout_kind::conditional, "conditional"},
  };
  return names;
}

template<>
const std::vector<enum_name<fairness_mode>>& enum_names<fairness_mode>() {
  static const std::vector<enum_name<fairness_mode>> names{
    {fairness_mode::sender, "sender"},
    {fairness_mode::channel, "channel"},
    {fairness_mode::off, "off"},
  };
  return names;
}

template<>
const std::vector<enum_name<adapter_kind>>& enum_names<adapter_kind>() {
  static const std::vector<enum_name<adapter_kind>> names{
    {adapter_kind::webhook, "webhook"},   // POST the notify
    {adapter_kind::outbox, "outbox"},     // append to a file
    {adapter_kind::telegram, "telegram"}, // Bot API
    {adapter_kind::smtp, "smtp"},         // a mail relay
    {adapter_kind::slack, "slack"},       // Web API
  };
  return names;
}

template<>
const std::vector<enum_name<connector_type>>& enum_names<connector_type>() {
  static const std::vector<enum_name<connector_type>> names{
    {connector_type::http, "http"},
    {connector_type::jsonl, "jsonl"},
    {connector_type::maildir, "maildir"},
    {connector_type::telegram, "telegram"},
    {connector_type::slack, "slack"},
  };
  return names;
}

template<>
const std::vector<enum_name<connector_mode>>& enum_names<connector_mode>() {
  static const std::vector<enum_name<connector_mode>> names{
    {connector_mode::webhook, "webhook"},
    {connector_mode::poll, "poll"},
  };
  return names;
}

template<>
const std::vector<enum_name<scheduler_policy>>& enum_names<scheduler_policy>() {
  static const std::vector<enum_name<scheduler_policy>> names{
    {scheduler_policy::stealing, "stealing"},
    {scheduler_policy::sharing, "sharing"},
  };
  return names;
}

template<>
const std::vector<enum_name<otlp_encoding>>& enum_names<otlp_encoding>() {
  static const std::vector<enum_name<otlp_encoding>> names{
    {otlp_encoding::json, "json"},
    {otlp_encoding::protobuf, "protobuf"},
  };
  return names;
}

template<>
const std::vector<enum_name<butlers_errc>>& enum_names<butlers_errc>() {
  // Named by butlers_errc's own to_string, so the two cannot drift apart.
  static const std::vector<enum_name<butlers_errc>> names = [] {
    std::vector<enum_name<butlers_errc>> xs;
    for (auto x :
         {butlers_errc::classification_error, butlers_errc::validation_error,
          butlers_errc::routing_error, butlers_errc::target_unavailable,
          butlers_errc::timeout, butlers_errc::overload_rejected,
          butlers_errc::internal_error})
      xs.push_back({x, to_string(x)});
    return xs;
  }();
  return names;
}

} // namespace butlers
