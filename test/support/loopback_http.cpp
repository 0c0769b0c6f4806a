#include "test/support/loopback_http.hpp"

#include <http_parser.h>

#include <cctype>
#include <string_view>

namespace butlers::test {

std::string http_request_in::header(const std::string& lower_name) const {
  auto i = headers.find(lower_name);
  return i == headers.end() ? std::string{} : i->second;
}

namespace {

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Parser state for one connection; the parser pauses after each request.
struct http_session {
  http_parser parser{};
  http_parser_settings settings{};
  loopback_connection* conn = nullptr;
  http_request_in current;
  std::string field;
  std::string value;
  bool in_value = false;
  bool complete = false;

  void flush_header() {
    if (!field.empty())
      current.headers[lower(field)] = value;
    field.clear();
    value.clear();
    in_value = false;
  }
};

http_session& session_of(http_parser* p) {
  return *static_cast<http_session*>(p->data);
}

int on_message_begin(http_parser* p) {
  auto& s = session_of(p);
  s.current = http_request_in{};
  s.field.clear();
  s.value.clear();
  s.in_value = false;
  return 0;
}

int on_url(http_parser* p, const char* at, size_t len) {
  session_of(p).current.target.append(at, len);
  return 0;
}

int on_header_field(http_parser* p, const char* at, size_t len) {
  auto& s = session_of(p);
  if (s.in_value)
    s.flush_header();
  s.field.append(at, len);
  return 0;
}

int on_header_value(http_parser* p, const char* at, size_t len) {
  auto& s = session_of(p);
  s.in_value = true;
  s.value.append(at, len);
  return 0;
}

int on_headers_complete(http_parser* p) {
  auto& s = session_of(p);
  s.flush_header();
  s.current.method = http_method_str(static_cast<http_method>(p->method));
  auto q = s.current.target.find('?');
  s.current.path = percent_decode(s.current.target.substr(0, q), false);
  if (q != std::string::npos)
    s.current.query = s.current.target.substr(q + 1);
  // libcurl sends larger POST bodies only after "100 Continue" (or a 1 s
  // wait); answer at once, as a real server would.
  if (lower(s.current.header("expect")) == "100-continue")
    s.conn->write_all("HTTP/1.1 100 Continue\r\n\r\n");
  return 0;
}

int on_body(http_parser* p, const char* at, size_t len) {
  session_of(p).current.body.append(at, len);
  return 0;
}

int on_message_complete(http_parser* p) {
  session_of(p).complete = true;
  http_parser_pause(p, 1);
  return 0;
}

std::string render(const http_reply_out& r, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " "
                    + reason_phrase(r.status) + "\r\n";
  out += "Server: butlers-test-fake\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [k, v] : r.headers)
    out += k + ": " + v + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  out += r.body;
  return out;
}

} // namespace

void serve_http(loopback_connection& conn, const http_handler& handler) {
  http_session s;
  s.conn = &conn;
  http_parser_init(&s.parser, HTTP_REQUEST);
  s.parser.data = &s;
  s.settings.on_message_begin = on_message_begin;
  s.settings.on_url = on_url;
  s.settings.on_header_field = on_header_field;
  s.settings.on_header_value = on_header_value;
  s.settings.on_headers_complete = on_headers_complete;
  s.settings.on_body = on_body;
  s.settings.on_message_complete = on_message_complete;
  std::string buf;
  size_t used = 0;
  for (;;) {
    if (used == buf.size()) {
      buf.clear();
      used = 0;
      if (!conn.read_some(buf))
        return;
    }
    used += http_parser_execute(&s.parser, &s.settings, buf.data() + used,
                                buf.size() - used);
    auto err = HTTP_PARSER_ERRNO(&s.parser);
    if (err != HPE_OK && err != HPE_PAUSED) {
      http_reply_out bad{400, "text/plain", "malformed request\n", {}};
      conn.write_all(render(bad, false));
      return;
    }
    if (!s.complete)
      continue;
    s.complete = false;
    bool keep_alive = http_should_keep_alive(&s.parser) != 0;
    http_parser_pause(&s.parser, 0);
    auto reply = handler(s.current);
    if (!reply || !conn.write_all(render(*reply, keep_alive)) || !keep_alive)
      return;
  }
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0
        && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_form(
  std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!s.empty()) {
    auto amp = s.find('&');
    auto part = s.substr(0, amp);
    s = amp == std::string_view::npos ? std::string_view{} : s.substr(amp + 1);
    if (part.empty())
      continue;
    auto eq = part.find('=');
    auto key = part.substr(0, eq);
    auto val = eq == std::string_view::npos ? std::string_view{}
                                            : part.substr(eq + 1);
    out.emplace_back(percent_decode(key, true), percent_decode(val, true));
  }
  return out;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 413: return "Request Entity Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

} // namespace butlers::test
