#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include "actors/node_context.hpp"
#include "runtime/config.hpp"
#include "runtime/http_auth.hpp"

namespace butlers {

class counter;
class gauge;

/// The HTTP API's door: holds the node's credentials (reloaded on SIGHUP
/// and by POST /v1/operator/credentials/reload), decides each request
/// against its route's roles (runtime/http_auth.hpp), reads what a scoped
/// thread credential needs from the database, and logs and counts every
/// refusal without the token. Safe from any HTTP thread.
class http_guard {
 public:
  /// A decision that waits for the database (see `resolve`).
  struct pending;

  /// What to do with a request.
  struct verdict {
    /// Set: answer this (401 or 403) instead of running the route.
    std::optional<http_reply> refusal;
    /// Set: ask `resolve` first.
    std::shared_ptr<pending> lookup;
  };

  /// `settings` and `ctx` outlive this.
  http_guard(caf::actor_system& sys, const node_settings& settings,
             node_context_ptr ctx);

  /// Decides `method path` on a route admitting `roles` (`params` null: no
  /// route matched, which any known credential may learn).
  verdict check(http_roles roles, const path_params* params,
                std::string_view body,
                std::optional<std::string_view> authorization,
                std::string_view method, std::string_view path);

  /// Reads the scope `p` needs through the node's reader and calls `done`
  /// once, on a CAF thread: nullopt to run the route, else the refusal.
  void resolve(std::shared_ptr<pending> p,
               std::function<void(std::optional<http_reply>)> done);

  /// What a reload did.
  struct reload_result {
    bool ok = false;
    /// Credentials in force afterwards.
    size_t credentials = 0;
    /// Why not, when not ok (config errors, one a line).
    std::string message;
  };

  /// Reads the node's config file again and, when it is valid, takes its
  /// `[http] token` and `[[http.credential]]`s; else keeps the old ones.
  /// Nothing else of the file changes the running node.
  reload_result reload();

  /// 200 with the count, or 422 naming why the old set stays.
  static http_reply reload_reply(const reload_result& r);

 private:
  credential_set_ptr current() const;

  /// Logs and counts a refusal; returns its reply.
  http_reply refused(const auth_decision& d, std::string_view method,
                     std::string_view path);

  caf::actor_system& sys_;
  const node_settings& settings_;
  node_context_ptr ctx_;
  mutable std::mutex mtx_;
  /// The credentials in force; swapped whole by `reload`.
  credential_set_ptr creds_;
  /// butlers_http_unauthorized_total.
  counter* unauthorized_ = nullptr;
  /// butlers_auth_refusals_total{role_needed=...}, by role, then "none".
  counter* refusals_[http_role_count + 1] = {};
  /// butlers_auth_reloads_total{outcome="ok"} and {outcome="failed"}.
  counter* reloads_ok_ = nullptr;
  counter* reloads_failed_ = nullptr;
  /// butlers_auth_credentials.
  gauge* credentials_ = nullptr;
};

} // namespace butlers
