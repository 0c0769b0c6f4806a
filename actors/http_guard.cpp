#include "actors/http_guard.hpp"

#include <caf/actor_system.hpp>
#include <spdlog/spdlog.h>

#include "actors/http_bridge.hpp"
#include "runtime/json.hpp"

namespace butlers {

struct http_guard::pending {
  /// Keeps `decision.credential` alive across a reload.
  credential_set_ptr creds;
  auth_decision decision;
  std::string method;
  std::string path;
};

http_guard::http_guard(caf::actor_system& sys, const node_settings& settings,
                       node_context_ptr ctx)
  : sys_(sys), settings_(settings), ctx_(std::move(ctx)),
    creds_(std::make_shared<credential_set>(settings.http)) {
  auto& m = ctx_->metrics;
  unauthorized_ = &m.get_counter("butlers_http_unauthorized_total",
                                 "HTTP requests rejected for a missing or "
                                 "unknown bearer token");
  for (size_t i = 0; i <= http_role_count; ++i) {
    auto role = i < http_role_count ? to_string(static_cast<http_role>(i))
                                    : "none";
    refusals_[i] = &m.get_counter("butlers_auth_refusals_total",
                                  "HTTP requests refused (403) for a "
                                  "credential without the role or outside "
                                  "its scope, by the role needed",
                                  std::string{"role_needed=\""} + role + "\"");
  }
  auto reloads = [&m](const char* outcome) {
    return &m.get_counter("butlers_auth_reloads_total",
                          "Credential reloads (SIGHUP or the operator API), "
                          "by outcome",
                          std::string{"outcome=\""} + outcome + "\"");
  };
  reloads_ok_ = reloads("ok");
  reloads_failed_ = reloads("failed");
  credentials_ = &m.get_gauge("butlers_auth_credentials",
                              "Bearer credentials the HTTP API accepts");
  credentials_->set(static_cast<int64_t>(creds_->size()));
}

credential_set_ptr http_guard::current() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return creds_;
}

http_guard::verdict http_guard::check(
  http_roles roles, const path_params* params, std::string_view body,
  std::optional<std::string_view> authorization, std::string_view method,
  std::string_view path) {
  verdict v;
  if (roles.is_open())
    return v;
  auto creds = current();
  auto d = authorize(*creds, auth_request{roles, params, body, authorization});
  switch (d.what) {
    case auth_decision::kind::allow: break;
    case auth_decision::kind::unauthorized:
      unauthorized_->inc();
      v.refusal = unauthorized_reply();
      break;
    case auth_decision::kind::forbidden:
      v.refusal = refused(d, method, path);
      break;
    case auth_decision::kind::lookup:
      v.lookup = std::make_shared<pending>(
        pending{std::move(creds), std::move(d), std::string{method},
                std::string{path}});
      break;
  }
  return v;
}

void http_guard::resolve(std::shared_ptr<pending> p,
                         std::function<void(std::optional<http_reply>)> done) {
  auto reader = ctx_->reader();
  auto finish = [this, p,
                 done](bool ok,
                       const std::vector<std::vector<std::string>>& rows) {
    auto d = check_scope(*p->decision.credential, p->decision.lookup, ok, rows);
    if (d.what == auth_decision::kind::allow)
      return done(std::nullopt);
    done(refused(d, p->method, p->path));
  };
  if (!reader)
    return finish(false, {});
  auto stmt = p->decision.lookup.stmt;
  bridge<named_result>(
    sys_, reader, std::chrono::milliseconds{settings_.http.request_timeout_ms},
    [finish](named_result& r) {
      finish(r.ok, r.rows);
    },
    [finish](const caf::error&) {
      finish(false, {});
    },
    read_atom_v, std::move(stmt));
}

http_reply http_guard::refused(const auth_decision& d, std::string_view method,
                               std::string_view path) {
  auto role = parse_http_role(d.role_needed);
  refusals_[role ? static_cast<size_t>(*role) : http_role_count]->inc();
  spdlog::warn("HTTP 403 {} {}: credential '{}' refused ({}), role needed: {}",
               method, path, d.credential ? d.credential->name : "", d.reason,
               d.role_needed);
  return forbidden_reply(d);
}

http_guard::reload_result http_guard::reload() {
  reload_result r;
  auto loaded = load_settings(settings_.path);
  if (!loaded.settings) {
    for (auto& e : loaded.errors)
      r.message += (r.message.empty() ? "" : "\n") + e.to_string();
    if (r.message.empty())
      r.message = "the configuration could not be read";
  } else if (!is_loopback(settings_.http.bind)
             && loaded.settings->http.token.empty()
             && loaded.settings->http.credentials.empty()) {
    r.message = "the node listens on " + settings_.http.bind
                + ", which needs http.token or an [[http.credential]]";
  } else {
    auto next = std::make_shared<credential_set>(loaded.settings->http);
    r.ok = true;
    r.credentials = next->size();
    std::lock_guard<std::mutex> guard{mtx_};
    creds_ = std::move(next);
  }
  if (!r.ok) {
    r.credentials = current()->size();
    reloads_failed_->inc();
    spdlog::warn("credentials not reloaded, the {} in force stay: {}",
                 r.credentials, r.message);
    return r;
  }
  reloads_ok_->inc();
  credentials_->set(static_cast<int64_t>(r.credentials));
  spdlog::info("credentials reloaded from {}: {} in force", settings_.path,
               r.credentials);
  return r;
}

http_reply http_guard::reload_reply(const reload_result& r) {
  auto count = std::to_string(r.credentials);
  if (r.ok)
    return json_reply(200, "{\"reloaded\":true,\"credentials\":" + count + "}");
  return json_reply(422, "{\"error\":\"validation_error\",\"reloaded\":false,"
                         "\"credentials\":"
                           + count + ",\"message\":" + json::quote(r.message)
                           + "}");
}

} // namespace butlers
