#include "runtime/error.hpp"

#include <caf/atom.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace butlers {

namespace {

constexpr butlers_errc taxonomy[] = {
  butlers_errc::classification_error,
  butlers_errc::validation_error,
  butlers_errc::routing_error,
  butlers_errc::target_unavailable,
  butlers_errc::timeout,
  butlers_errc::overload_rejected,
  butlers_errc::internal_error,
};

} // namespace

const char* to_string(butlers_errc x) {
  switch (x) {
    case butlers_errc::none: return "none";
    case butlers_errc::classification_error: return "classification_error";
    case butlers_errc::validation_error: return "validation_error";
    case butlers_errc::routing_error: return "routing_error";
    case butlers_errc::target_unavailable: return "target_unavailable";
    case butlers_errc::timeout: return "timeout";
    case butlers_errc::overload_rejected: return "overload_rejected";
    case butlers_errc::internal_error: return "internal_error";
    case butlers_errc::database_unavailable: return "database_unavailable";
    case butlers_errc::draining: return "draining";
    case butlers_errc::conflict: return "conflict";
    case butlers_errc::unauthorized: return "unauthorized";
    case butlers_errc::payload_too_large: return "payload_too_large";
    case butlers_errc::unsupported_media_type: return "unsupported_media_type";
    case butlers_errc::not_found: return "not_found";
    case butlers_errc::invalid_config: return "invalid_config";
    case butlers_errc::sender_rate_limited: return "sender_rate_limited";
    case butlers_errc::connector_rate_limited: return "connector_rate_limited";
  }
  return "internal_error";
}

butlers_errc error_class(butlers_errc x) {
  switch (x) {
    case butlers_errc::none:
    case butlers_errc::classification_error:
    case butlers_errc::validation_error:
    case butlers_errc::routing_error:
    case butlers_errc::target_unavailable:
    case butlers_errc::timeout:
    case butlers_errc::overload_rejected:
    case butlers_errc::internal_error: return x;
    case butlers_errc::database_unavailable:
    case butlers_errc::draining: return butlers_errc::target_unavailable;
    case butlers_errc::unauthorized:
    case butlers_errc::payload_too_large:
    case butlers_errc::unsupported_media_type:
    case butlers_errc::not_found:
    case butlers_errc::invalid_config: return butlers_errc::validation_error;
    case butlers_errc::sender_rate_limited:
    case butlers_errc::connector_rate_limited:
      return butlers_errc::overload_rejected;
    case butlers_errc::conflict: return butlers_errc::internal_error;
  }
  return butlers_errc::internal_error;
}

butlers_errc normalize_error_class(std::string_view name) {
  for (auto x : taxonomy)
    if (name == to_string(x))
      return x;
  return butlers_errc::internal_error;
}

int http_status(butlers_errc x) {
  switch (x) {
    case butlers_errc::none: return 200;
    case butlers_errc::validation_error:
    case butlers_errc::invalid_config: return 400;
    case butlers_errc::unauthorized: return 401;
    case butlers_errc::not_found: return 404;
    case butlers_errc::conflict: return 409;
    case butlers_errc::payload_too_large: return 413;
    case butlers_errc::unsupported_media_type: return 415;
    case butlers_errc::overload_rejected:
    case butlers_errc::sender_rate_limited:
    case butlers_errc::connector_rate_limited: return 429;
    case butlers_errc::target_unavailable:
    case butlers_errc::database_unavailable:
    case butlers_errc::draining: return 503;
    case butlers_errc::timeout: return 504;
    case butlers_errc::classification_error:
    case butlers_errc::routing_error:
    case butlers_errc::internal_error: return 500;
  }
  return 500;
}

butlers_errc code_of(const caf::error& err) {
  if (!err)
    return butlers_errc::none;
  if (err.category() == caf::atom("butlers"))
    return static_cast<butlers_errc>(err.code());
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      case caf::sec::request_timeout: return butlers_errc::timeout;
      case caf::sec::request_receiver_down:
      case caf::sec::remote_linking_failed:
        return butlers_errc::target_unavailable;
      default: break;
    }
  }
  return butlers_errc::internal_error;
}

std::string message_of(const caf::error& err) {
  if (!err)
    return {};
  auto& ctx = err.context();
  if ((ctx.size() == 1 || ctx.size() == 2) && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return {};
}

caf::error rate_limited_error(butlers_errc code, std::string message,
                              uint32_t retry_after_s) {
  return caf::error{static_cast<uint8_t>(code), caf::atom("butlers"),
                    caf::make_message(std::move(message), retry_after_s)};
}

uint32_t retry_after_of(const caf::error& err) {
  if (!err || err.category() != caf::atom("butlers"))
    return 0;
  auto& ctx = err.context();
  if (ctx.size() == 2 && ctx.match_element<uint32_t>(1))
    return ctx.get_as<uint32_t>(1);
  return 0;
}

} // namespace butlers
