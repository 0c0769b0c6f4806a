#pragma once

// The body limit of the HTTP server (`http.max_body_bytes`) at the parser,
// so that every request over it gets 413 without its body being read.
//
// restinio 0.6.16 checks its `max_body_size` inside its parser callbacks and,
// when a body is over it, fails the parse: the connection is closed without
// an answer. Its other hooks come too late (the request handler and the
// extra-data factory see a complete message) or see no HTTP at all (the
// connection state listener, the socket type). The parser callbacks are made
// by `restinio::impl::create_parser_settings<Traits::http_methods_mapper_t>`,
// and the methods mapper is a documented traits type: with a mapper of our
// own, the specialization below installs callbacks that end the message
// early instead of failing it:
// - a Content-Length over the limit: the headers tell the parser to skip
//   the body (1 from on_headers_complete), so the message is complete with
//   its headers and an empty body, before a byte of the body is read;
// - a body without a length (chunked) that grows past the limit: the
//   message is completed at the first piece that crosses it, with what was
//   read so far (at most one read buffer past the limit).
// The server's handler sees either (`over_body_limit`) and answers 413 with
// `Connection: close`; the rest of the body is never read.

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

#include <restinio/all.hpp>

namespace butlers {

/// restinio's mapping of HTTP methods, under a type of our own (see above).
struct body_limited_methods : restinio::default_http_methods_t {};

/// Whether a request as the parser above completed it is over `max_bytes`:
/// its declared length (`content_length`, the header's value if any) or
/// what was read of a body without one. The declared length, when known,
/// is returned in `*declared`.
inline bool over_body_limit(std::optional<std::string_view> content_length,
                            size_t body_size, uint64_t max_bytes,
                            std::optional<uint64_t>* declared) {
  if (content_length) {
    uint64_t n = 0;
    auto v = *content_length;
    auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec == std::errc{} && r.ptr == v.data() + v.size()) {
      *declared = n;
      if (n > max_bytes)
        return true;
    }
  }
  return body_size > max_bytes;
}

} // namespace butlers

namespace restinio::impl {

template<>
inline http_parser_settings create_parser_settings<
  butlers::body_limited_methods>() noexcept {
  using methods = butlers::body_limited_methods;
  auto s = create_parser_settings<default_http_methods_t>();
  s.on_headers_complete = [](http_parser* parser) -> int {
    auto* ctx = static_cast<http_parser_ctx_t*>(parser->data);
    if (parser->content_length != ULLONG_MAX
        && parser->content_length > ctx->m_limits.max_body_size()) {
      // What restinio's callback would do first; then: no body.
      ctx->m_leading_headers_completed = true;
      return 1;
    }
    return restinio_headers_complete_cb(parser);
  };
  s.on_body = [](http_parser* parser, const char* at, size_t length) -> int {
    auto* ctx = static_cast<http_parser_ctx_t*>(parser->data);
    auto max = ctx->m_limits.max_body_size();
    if (ctx->m_body.size() + length <= max)
      return restinio_body_cb(parser, at, length);
    // One byte past the limit is enough to tell; the message ends here.
    auto keep = std::min<size_t>(length, max + 1 - ctx->m_body.size());
    ctx->m_body.append(at, keep);
    return restinio_message_complete_cb<methods>(parser);
  };
  s.on_message_complete = [](http_parser* parser) -> int {
    return restinio_message_complete_cb<methods>(parser);
  };
  return s;
}

} // namespace restinio::impl
