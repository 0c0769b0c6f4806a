#include "runtime/http_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "runtime/config.hpp"
#include "runtime/http_checks.hpp"
#include "runtime/json.hpp"

namespace butlers {

namespace {

/// SHA-256 of `data`, 32 raw bytes.
std::string sha256_raw(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return std::string{reinterpret_cast<const char*>(md), n};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// The role a (single-role) credential acts in on a route that admits it.
http_role acting_role(const http_credential& cred, http_roles route) {
  for (auto r : route.list())
    if (cred.roles.has(r))
      return r;
  return http_role::read;
}

auth_decision refuse(const http_credential* cred, http_roles needed,
                     std::string reason) {
  auth_decision d;
  d.what = auth_decision::kind::forbidden;
  d.credential = cred;
  auto roles = needed.list();
  d.role_needed = roles.empty() ? "none" : to_string(roles.front());
  d.reason = std::move(reason);
  return d;
}

auth_decision allow(const http_credential* cred) {
  auth_decision d;
  d.credential = cred;
  return d;
}

/// The string member `key` of the JSON object `body`; nullopt when `body`
/// is no object or has no such string.
std::optional<std::string> json_string(std::string_view body,
                                       std::initializer_list<const char*> at) {
  rapidjson::Document doc;
  if (json::parse(body, doc) || !doc.IsObject())
    return std::nullopt;
  const rapidjson::Value* v = &doc;
  for (auto key : at) {
    if (!v->IsObject())
      return std::nullopt;
    auto i = v->FindMember(key);
    if (i == v->MemberEnd())
      return std::nullopt;
    v = &i->value;
  }
  if (!v->IsString())
    return std::nullopt;
  return std::string{v->GetString(), v->GetStringLength()};
}

/// An ingest credential's scope: a route of one connector (`{name}`), or
/// envelopes of one source.endpoint_identity.
auth_decision ingest_scope(const http_credential& cred,
                           const auth_request& rq) {
  auto needed = http_roles{http_role::ingest};
  auto name = (*rq.params)["name"];
  if (!name.empty() || !cred.connector.empty()) {
    if (cred.connector.empty() && !cred.endpoint_identity.empty())
      return refuse(&cred, needed,
                    "it ingests only envelopes of endpoint_identity '"
                      + cred.endpoint_identity + "' through POST /v1/ingest");
    if (!cred.connector.empty() && name != cred.connector)
      return refuse(&cred, needed,
                    "it ingests only through connector '" + cred.connector
                      + "'");
    return allow(&cred);
  }
  if (cred.endpoint_identity.empty())
    return allow(&cred);
  auto got = json_string(rq.body, {"source", "endpoint_identity"});
  if (!got || *got != cred.endpoint_identity)
    return refuse(&cred, needed,
                  "it ingests only envelopes whose source.endpoint_identity "
                  "is '"
                    + cred.endpoint_identity + "'");
  return allow(&cred);
}

/// A thread credential's scope: its thread, or the threads its sender
/// started; a run's thread comes from the database.
auth_decision thread_scope(const http_credential& cred,
                           const auth_request& rq) {
  auto needed = http_roles{http_role::thread};
  if (cred.thread_id.empty() && cred.sender.empty())
    return allow(&cred);
  if (!cred.sender.empty() && !rq.body.empty()) {
    auto sender = json_string(rq.body, {"sender"});
    if (!sender || *sender != cred.sender)
      return refuse(&cred, needed,
                    "its requests name \"sender\": \"" + cred.sender
                      + "\" in the body");
  }
  auto run_id = (*rq.params)["run_id"];
  auto thread_id = (*rq.params)["id"];
  auth_decision d;
  d.credential = &cred;
  d.what = auth_decision::kind::lookup;
  if (!run_id.empty()) {
    if (!is_uuid(run_id))
      return refuse(&cred, needed, "no run it may reach has this id");
    d.lookup.stmt = named_statement{"http_run_scope", {std::string{run_id}}};
    return d;
  }
  if (thread_id.empty())
    return refuse(&cred, needed, "it reaches one thread only");
  if (!cred.thread_id.empty())
    return thread_id == cred.thread_id
             ? allow(&cred)
             : refuse(&cred, needed,
                      "it reaches thread '" + cred.thread_id + "' only");
  d.lookup.thread_id = std::string{thread_id};
  d.lookup.stmt = named_statement{"http_thread_owner", {d.lookup.thread_id}};
  return d;
}

} // namespace

std::optional<std::string> digest_of_hex(std::string_view hex) {
  if (hex.size() != 64)
    return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto hi = hex_value(hex[i]);
    auto lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

credential_set::credential_set(const http_config& http) {
  if (!http.token.empty()) {
    http_credential all;
    all.name = "http.token";
    all.roles = http_roles::all();
    all.digest = sha256_raw(http.token);
    xs_.push_back(std::move(all));
  }
  for (auto& c : http.credentials) {
    auto digest = digest_of_hex(c.token_sha256);
    auto role = parse_http_role(c.role);
    if (!digest || !role)
      continue;
    http_credential x;
    x.name = c.name;
    x.roles = http_roles{*role};
    x.digest = std::move(*digest);
    x.connector = c.connector;
    x.endpoint_identity = c.endpoint_identity;
    x.butler = c.butler;
    x.thread_id = c.thread_id;
    x.sender = c.sender;
    xs_.push_back(std::move(x));
  }
}

const http_credential* credential_set::find(
  std::optional<std::string_view> authorization) const {
  constexpr std::string_view scheme = "Bearer ";
  if (!authorization || authorization->substr(0, scheme.size()) != scheme)
    return nullptr;
  auto digest = sha256_raw(authorization->substr(scheme.size()));
  const http_credential* found = nullptr;
  // Every digest is compared, in constant time, whichever matches.
  for (auto& x : xs_)
    if (CRYPTO_memcmp(x.digest.data(), digest.data(), digest.size()) == 0)
      found = &x;
  return found;
}

auth_decision authorize(const credential_set& creds, const auth_request& rq) {
  if (rq.roles.is_open() || !creds.required())
    return allow(nullptr);
  auto* cred = creds.find(rq.authorization);
  if (cred == nullptr) {
    auth_decision d;
    d.what = auth_decision::kind::unauthorized;
    return d;
  }
  if (rq.params == nullptr)
    return allow(cred);
  if (rq.roles.unset())
    return refuse(cred, rq.roles, "the route declares no role");
  if (!cred->roles.meets(rq.roles))
    return refuse(cred, rq.roles,
                  "its role " + cred->roles.describe() + " may not; it needs "
                    + rq.roles.describe());
  switch (acting_role(*cred, rq.roles)) {
    case http_role::ingest: return ingest_scope(*cred, rq);
    case http_role::worker: {
      auto name = (*rq.params)["name"];
      if (cred->butler.empty() || name == cred->butler)
        return allow(cred);
      return refuse(cred, http_roles{http_role::worker},
                    "it works for butler '" + cred->butler + "' only");
    }
    case http_role::thread: return thread_scope(*cred, rq);
    case http_role::operate:
    case http_role::read: break;
  }
  return allow(cred);
}

auth_decision check_scope(const http_credential& cred, const scope_lookup& l,
                          bool ok,
                          const std::vector<std::vector<std::string>>& rows) {
  auto needed = http_roles{http_role::thread};
  if (!ok)
    return refuse(&cred, needed, "its scope could not be read");
  bool run = l.thread_id.empty();
  if (rows.empty())
    // No thread yet: a sender may start it. No such run: nothing to reach.
    return run ? refuse(&cred, needed, "no run it may reach has this id")
               : allow(&cred);
  auto& row = rows.front();
  auto thread_id = run ? row.at(0) : l.thread_id;
  auto owner = run ? row.at(1) : row.at(0);
  if (!cred.thread_id.empty())
    return thread_id == cred.thread_id
             ? allow(&cred)
             : refuse(&cred, needed,
                      "it reaches thread '" + cred.thread_id + "' only");
  if (owner == cred.sender)
    return allow(&cred);
  return refuse(&cred, needed,
                "it reaches the threads sender '" + cred.sender
                  + "' started only");
}

http_reply forbidden_reply(const auth_decision& d) {
  auto name = d.credential ? d.credential->name : std::string{};
  auto message = "credential '" + name + "' may not do this: " + d.reason;
  auto r = json_reply(403, "{\"error\":\"forbidden\",\"message\":"
                             + json::quote(message) + ",\"role_needed\":"
                             + json::quote(d.role_needed) + "}");
  r.no_store = true;
  return r;
}

} // namespace butlers
