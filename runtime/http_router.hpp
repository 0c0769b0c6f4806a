#pragma once

// The HTTP API's route table: which handler a method and a path reach, and
// the path parameters it gets. No restinio and no actors here, so the
// matching rules are unit-tested on their own.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace butlers {

/// The request methods the API tells apart; every other one is `other`.
enum class http_method : uint8_t { get, post, other };

/// Reads a request line's method name ("GET", "POST", anything else).
http_method parse_http_method(std::string_view name);

/// "GET", "POST" or "OTHER".
const char* to_string(http_method x);

/// The methods a route answers.
enum class route_methods : uint8_t {
  get,
  post,
  /// Every method: a route that answers what the other routes of its path
  /// refuse (declared after them, since the first matching route wins).
  any,
};

/// What a credential may do (config `[[http.credential]]` `role`).
enum class http_role : uint8_t {
  /// Send messages in: POST /v1/ingest and a connector's routes.
  ingest,
  /// An external worker of one butler: its work items.
  worker,
  /// One thread, or one sender's threads: turns, cancel, stream, runs,
  /// approvals.
  thread,
  /// Operator actions: replay, reroute, cancel, force-complete, direct
  /// routes, reloading the credentials.
  operate,
  /// Read-only inspection: the dashboard's /api, requests, metrics, lists.
  read,
};

/// Number of roles.
constexpr size_t http_role_count = 5;

/// "ingest", "worker", "operator", "read" or "thread".
const char* to_string(http_role x);

/// Reads a role's name; nullopt for anything else.
std::optional<http_role> parse_http_role(std::string_view name);

/// The roles a route admits (one column of the route table), or `open`:
/// the first of them in enum order is the one a refusal names as needed.
/// anyone, no credential asked. No bit at all means nobody set it: such a
/// route refuses every caller (the route test fails on it first).
struct http_roles {
  uint8_t bits = 0;

  constexpr http_roles() = default;

  constexpr http_roles(std::initializer_list<http_role> xs) {
    for (auto x : xs)
      bits |= static_cast<uint8_t>(1u << static_cast<unsigned>(x));
  }

  /// Anyone, without a credential: the probes, the dashboard's shell, and
  /// the routes that check a secret of their own (webhooks, /mcp).
  static constexpr http_roles open() {
    http_roles r;
    r.bits = open_bit;
    return r;
  }

  /// Every role: the `[http] token`.
  static constexpr http_roles all() {
    http_roles r;
    r.bits = (1u << http_role_count) - 1;
    return r;
  }

  constexpr bool is_open() const {
    return bits == open_bit;
  }

  constexpr bool unset() const {
    return bits == 0;
  }

  constexpr bool has(http_role x) const {
    return (bits & (1u << static_cast<unsigned>(x))) != 0;
  }

  constexpr bool meets(http_roles other) const {
    return (bits & other.bits & ~open_bit) != 0;
  }

  /// The roles, in enum order.
  std::vector<http_role> list() const;

  /// "thread or read"; "open"; "none".
  std::string describe() const;

  static constexpr uint8_t open_bit = 0x80;
};

/// The values a matched pattern bound, by parameter name. They point into
/// the path that was matched and live as long as it does.
class path_params {
 public:
  /// The value bound to `name`; empty when the pattern has no such
  /// parameter.
  std::string_view operator[](std::string_view name) const;

  void push(std::string_view name, std::string_view value);
  void pop();
  void clear();

 private:
  std::vector<std::pair<std::string_view, std::string_view>> xs_;
};

/// A path pattern: `/`-separated segments, each literal text, `{name}`
/// (exactly one segment, possibly empty) or `{name...}` (one or more
/// segments with the slashes between them; the longest that lets the rest
/// match). A pattern ending in `/` wants an empty last segment, as a path
/// ending in `/` has. Paths are compared raw: the API has never
/// percent-decoded them.
class path_pattern {
 public:
  /// `text` starts with `/`.
  explicit path_pattern(std::string_view text);

  /// Lets the rows of a route table spell their patterns as literals.
  path_pattern(const char* text) // NOLINT(google-explicit-constructor)
    : path_pattern(std::string_view{text}) {
    // nop
  }

  /// Binds the parameters of a matching path into `out` (cleared first).
  bool match(const std::vector<std::string_view>& segments,
             path_params& out) const;

  const std::string& text() const {
    return text_;
  }

 private:
  enum class kind : uint8_t { literal, one, many };

  struct segment {
    kind what;
    /// The literal text, or the parameter's name.
    std::string text;
  };

  bool match_from(size_t pi, const std::vector<std::string_view>& segments,
                  size_t si, path_params& out) const;

  std::string text_;
  std::vector<segment> segments_;
};

/// Splits an absolute path at its slashes: "/a/b/" is {"a", "b", ""}.
/// Returns false (and no segments) for a path not starting with `/`.
bool split_path(std::string_view path, std::vector<std::string_view>& out);

/// One row of a route table.
template<class Handler>
struct http_route {
  route_methods methods;
  path_pattern pattern;
  /// Who may call it (runtime/http_auth.hpp decides).
  http_roles roles;
  Handler handler;
};

/// The outcome of looking a request up in a route table.
template<class Handler>
struct route_match {
  /// The first route whose methods and pattern fit; null when none does.
  const http_route<Handler>* route = nullptr;
  /// What `route`'s pattern bound.
  path_params params;
  /// With no route: the methods of the routes whose pattern fits the path
  /// (what an `Allow` header would list); empty when no pattern fits.
  std::vector<route_methods> allowed;
};

/// Routes in declaration order; the first that fits a request wins.
template<class Handler>
class http_route_table {
 public:
  http_route_table(std::initializer_list<http_route<Handler>> routes)
    : routes_(routes) {
    // nop
  }

  /// Every row, in order (the route test walks them).
  const std::vector<http_route<Handler>>& rows() const {
    return routes_;
  }

  route_match<Handler> match(http_method method, std::string_view path) const {
    route_match<Handler> result;
    std::vector<std::string_view> segments;
    if (!split_path(path, segments))
      return result;
    for (auto& r : routes_) {
      if (!r.pattern.match(segments, result.params))
        continue;
      if (fits(r.methods, method)) {
        result.route = &r;
        result.allowed.clear();
        return result;
      }
      result.allowed.push_back(r.methods);
    }
    result.params.clear();
    return result;
  }

 private:
  static bool fits(route_methods ms, http_method m) {
    switch (ms) {
      case route_methods::get: return m == http_method::get;
      case route_methods::post: return m == http_method::post;
      case route_methods::any: return true;
    }
    return false;
  }

  std::vector<http_route<Handler>> routes_;
};

} // namespace butlers
