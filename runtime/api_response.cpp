#include "runtime/api_response.hpp"

#include "runtime/http_checks.hpp"
#include "runtime/json.hpp"

namespace butlers {

std::string api_response_body(std::string_view data, std::string_view meta) {
  std::string out;
  out.reserve(data.size() + meta.size() + 20);
  out += R"({"data":)";
  out += data;
  out += R"(,"meta":)";
  out += meta;
  out += '}';
  return out;
}

http_reply api_response(std::string_view data, std::string_view meta,
                        int status) {
  return json_reply(status, api_response_body(data, meta));
}

std::string page_meta_json(const page_meta& m, std::string_view extra) {
  std::string out = R"({"total":)" + std::to_string(m.total) + R"(,"offset":)"
                    + std::to_string(m.offset) + R"(,"limit":)"
                    + std::to_string(m.limit) + R"(,"has_more":)"
                    + (m.has_more() ? "true" : "false");
  if (!extra.empty()) {
    out += ',';
    out += extra;
  }
  return out + "}";
}

std::string paginated_body(std::string_view items, const page_meta& m,
                           std::string_view extra_meta) {
  return api_response_body(items, page_meta_json(m, extra_meta));
}

http_reply paginated_response(std::string_view items, const page_meta& m,
                              std::string_view extra_meta) {
  return json_reply(200, paginated_body(items, m, extra_meta));
}

std::optional<page_window> parse_page_window(std::string_view query,
                                             int64_t default_limit,
                                             int64_t max_limit) {
  auto offset = query_int(query, "offset", 0);
  auto limit = query_int(query, "limit", default_limit);
  if (!offset || !limit || *limit < 1 || *limit > max_limit)
    return std::nullopt;
  return page_window{*offset, *limit};
}

http_reply bad_page_reply(int64_t max_limit) {
  return validation_reply("query parameters: offset (a non-negative integer) "
                          "and limit (1.."
                          + std::to_string(max_limit) + ")");
}

std::optional<std::string_view> query_param(std::string_view query,
                                            std::string_view key) {
  size_t pos = 0;
  while (pos <= query.size()) {
    auto end = query.find('&', pos);
    if (end == std::string_view::npos)
      end = query.size();
    auto part = query.substr(pos, end - pos);
    if (part.size() >= key.size() && part.substr(0, key.size()) == key) {
      if (part.size() == key.size())
        return std::string_view{};
      if (part[key.size()] == '=')
        return part.substr(key.size() + 1);
    }
    pos = end + 1;
  }
  return std::nullopt;
}

http_reply bad_query_param_reply(std::string_view name, std::string_view value,
                                 std::string_view allowed) {
  std::string n{name};
  std::string details = R"([{"parameter":)" + json::quote(name) + R"(,"value":)"
                        + json::quote(value) + R"(,"allowed":)"
                        + json::quote(allowed) + "}]";
  return error_reply(butlers_errc::validation_error,
                     "query parameter " + n + ": got '" + std::string{value}
                       + "', takes " + std::string{allowed},
                     details);
}

http_reply api_not_found_reply(std::string_view what, std::string_view id) {
  return error_reply(butlers_errc::not_found,
                     std::string{what} + " " + std::string{id} + " not found");
}

} // namespace butlers
