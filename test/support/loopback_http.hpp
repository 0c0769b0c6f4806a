#pragma once

// HTTP/1.1 server side for the wire-protocol fakes: parses requests on a
// loopback_connection with the nodejs http_parser (keep-alive, pipelining,
// chunked bodies, `Expect: 100-continue`) and writes the handler's replies.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "test/support/loopback_server.hpp"

namespace butlers::test {

/// One parsed request.
struct http_request_in {
  /// "GET", "POST", ...
  std::string method;
  /// The request target as sent ("/bot123:abc/getMe?x=1").
  std::string target;
  /// `target` up to '?', percent-decoded.
  std::string path;
  /// The query string after '?', undecoded ("" when none).
  std::string query;
  /// Header names lower-cased; a repeated header keeps the last value.
  std::map<std::string, std::string> headers;
  std::string body;

  /// The value of header `lower_name`, or "" when absent.
  std::string header(const std::string& lower_name) const;
};

/// What to answer.
struct http_reply_out {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Extra headers.
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Returns the reply to send, or nullopt to close the connection without
/// answering (a lost reply).
using http_handler = std::function<std::optional<http_reply_out>(
  const http_request_in&)>;

/// Serves requests on `conn` until the peer closes, asks to close, a parse
/// error (answered 400) or the handler returns nullopt.
void serve_http(loopback_connection& conn, const http_handler& handler);

/// Decodes %XX escapes and, when `plus_is_space`, '+' (form encoding).
std::string percent_decode(std::string_view s, bool plus_is_space);

/// Splits `a=1&b=2` (application/x-www-form-urlencoded or a query string)
/// into decoded pairs, in order.
std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s);

/// The standard reason phrase of `status` ("OK", "Bad Request", ...).
const char* reason_phrase(int status);

} // namespace butlers::test
