#pragma once

// Who may call what on the HTTP API: the roles a route admits, the
// credentials a node knows (bearer tokens stored as SHA-256 digests), and
// the decision for one request. No restinio and no actors here; the HTTP
// server asks, and carries out a database look-up when the decision needs
// one (a run's thread, a thread's sender). actors/README.md "Roles".

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dedupe.hpp"
#include "runtime/http_render.hpp"
#include "runtime/http_router.hpp"
#include "runtime/messages.hpp"

namespace butlers {

struct http_config;

/// One bearer token the node accepts, and what it may do.
struct http_credential {
  /// Names it in logs and refusals (never the token).
  std::string name;
  /// One role, or all of them (`[http] token`).
  http_roles roles;
  /// SHA-256 of the token, 32 raw bytes.
  std::string digest;
  /// ingest: only `/v1/connectors/{connector}/...`.
  std::string connector;
  /// ingest: only POST /v1/ingest envelopes whose source.endpoint_identity
  /// is this.
  std::string endpoint_identity;
  /// worker: only `/v1/butlers/{butler}/work/...`.
  std::string butler;
  /// thread: only this thread (and its runs).
  std::string thread_id;
  /// thread: only threads this sender started (and their runs); turns and
  /// approval answers must name it as `sender`.
  std::string sender;
};

/// 32 raw bytes from 64 hex digits; nullopt when `hex` is not that.
std::optional<std::string> digest_of_hex(std::string_view hex);

/// The credentials of a node: `[http] token` (named "http.token", every
/// role) and each `[[http.credential]]`. Immutable; a reload builds a new
/// set.
class credential_set {
 public:
  credential_set() = default;

  /// From validated settings (a digest that is not hex is skipped).
  explicit credential_set(const http_config& http);

  /// False when the node has no credential at all: then every route is
  /// open, as on loopback without a token.
  bool required() const {
    return !xs_.empty();
  }

  size_t size() const {
    return xs_.size();
  }

  /// The credential whose token `authorization` (`Bearer <token>`)
  /// carries; null when none does. Compares digests in constant time.
  const http_credential* find(
    std::optional<std::string_view> authorization) const;

 private:
  std::vector<http_credential> xs_;
};

using credential_set_ptr = std::shared_ptr<const credential_set>;

/// The database look-up a scoped `thread` credential needs before a route
/// may run: `http_run_scope` (a run's thread and the sender who started
/// that thread) or `http_thread_owner` (the sender who started a thread).
struct scope_lookup {
  named_statement stmt;
  /// The thread whose owner the answer names ("" for a run: its row
  /// names the thread).
  std::string thread_id;
};

/// The answer to one request's credential.
struct auth_decision {
  enum class kind : uint8_t {
    /// The route may run.
    allow,
    /// 401: no credential, or one the node does not know.
    unauthorized,
    /// 403: a credential without the role or outside its scope.
    forbidden,
    /// Ask the database (`lookup`), then `check_scope`.
    lookup,
  };
  kind what = kind::allow;
  /// The credential (null with none).
  const http_credential* credential = nullptr;
  /// forbidden: the role the route needs (the metric's label) and why.
  std::string role_needed;
  std::string reason;
  scope_lookup lookup;
};

/// What one request asks: the route's roles, the parameters its path bound
/// (null when no route matched: any known credential may learn that), its
/// body and its Authorization header.
struct auth_request {
  http_roles roles;
  const path_params* params = nullptr;
  std::string_view body;
  std::optional<std::string_view> authorization;
};

/// Decides a request against `creds`. Routes that are open, and every
/// route when `creds` holds no credential, are allowed.
auth_decision authorize(const credential_set& creds, const auth_request& rq);

/// Decides a `lookup` once its rows arrived (`ok` false: the read failed).
auth_decision check_scope(const http_credential& cred, const scope_lookup& l,
                          bool ok,
                          const std::vector<std::vector<std::string>>& rows);

/// 403 for a refused request: names the role needed and why, never the
/// token.
http_reply forbidden_reply(const auth_decision& d);

} // namespace butlers
