// The decision for one request's credential (runtime/http_auth.hpp),
// without a server: roles, digests, and each role's scope.

#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/http_auth.hpp"

namespace butlers {
namespace {

http_credential_config cred(std::string name, std::string role,
                            const std::string& token) {
  http_credential_config c;
  c.name = std::move(name);
  c.role = std::move(role);
  c.token_sha256 = sha256_hex(token);
  return c;
}

class HttpAuth : public ::testing::Test {
 protected:
  HttpAuth() {
    http.token = "legacy";
    http.credentials.push_back(cred("dash", "read", "t-read"));
    auto relay = cred("relay", "ingest", "t-relay");
    relay.connector = "relay";
    http.credentials.push_back(relay);
    auto bot = cred("bot", "ingest", "t-bot");
    bot.endpoint_identity = "bot-1";
    http.credentials.push_back(bot);
    auto ext = cred("ext", "worker", "t-ext");
    ext.butler = "ext";
    http.credentials.push_back(ext);
    auto own = cred("own", "thread", "t-own");
    own.thread_id = "t1";
    http.credentials.push_back(own);
    auto alice = cred("alice", "thread", "t-alice");
    alice.sender = "web:alice";
    http.credentials.push_back(alice);
    creds = credential_set{http};
  }

  auth_decision ask(http_roles roles, const std::string& token,
                    std::string_view body = {}) {
    std::string header = "Bearer " + token;
    return authorize(creds, auth_request{roles, &params, body, header});
  }

  http_config http;
  credential_set creds;
  path_params params;
};

using kind = auth_decision::kind;
constexpr auto read = http_roles{http_role::read};
constexpr auto ingest = http_roles{http_role::ingest};
constexpr auto thread = http_roles{http_role::thread, http_role::read};

TEST(HttpRoles, NamesReadBackAndTheFirstRoleIsTheOneNeeded) {
  for (size_t i = 0; i < http_role_count; ++i) {
    auto r = static_cast<http_role>(i);
    EXPECT_EQ(parse_http_role(to_string(r)), r);
  }
  EXPECT_FALSE(parse_http_role("admin"));
  EXPECT_EQ(thread.describe(), "thread or read");
  EXPECT_TRUE(http_roles{}.unset());
  EXPECT_TRUE(http_roles::open().is_open());
  EXPECT_TRUE(http_roles::all().meets(read));
  EXPECT_FALSE(http_roles::open().meets(read));
}

TEST(HttpRoles, DigestsAreSixtyFourHexDigits) {
  EXPECT_EQ(sha256_hex("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  EXPECT_EQ(digest_of_hex(sha256_hex("x"))->size(), 32u);
  EXPECT_FALSE(digest_of_hex("abc"));
  EXPECT_FALSE(digest_of_hex(std::string(64, 'g')));
}

TEST_F(HttpAuth, WithNoCredentialEveryRouteIsOpen) {
  credential_set none{http_config{}};
  EXPECT_FALSE(none.required());
  auto d = authorize(none, auth_request{read, &params, {}, std::nullopt});
  EXPECT_EQ(d.what, kind::allow);
}

TEST_F(HttpAuth, AnUnknownOrMissingTokenIsUnauthorized) {
  EXPECT_EQ(ask(read, "nope").what, kind::unauthorized);
  auto d = authorize(creds, auth_request{read, &params, {}, std::nullopt});
  EXPECT_EQ(d.what, kind::unauthorized);
  d = authorize(creds, auth_request{read, &params, {}, "Basic t-read"});
  EXPECT_EQ(d.what, kind::unauthorized);
}

TEST_F(HttpAuth, TheLegacyTokenHasEveryRole) {
  EXPECT_EQ(ask(read, "legacy").what, kind::allow);
  EXPECT_EQ(ask(ingest, "legacy").what, kind::allow);
  params.push("id", "t9");
  EXPECT_EQ(ask(thread, "legacy").what, kind::allow);
}

TEST_F(HttpAuth, AWrongRoleIsForbiddenNamingTheRoleNeeded) {
  auto d = ask(ingest, "t-read");
  ASSERT_EQ(d.what, kind::forbidden);
  EXPECT_EQ(d.role_needed, "ingest");
  auto r = forbidden_reply(d);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("\"role_needed\":\"ingest\""), std::string::npos);
  EXPECT_NE(r.body.find("credential 'dash'"), std::string::npos);
  EXPECT_EQ(r.body.find("t-read"), std::string::npos);
  EXPECT_EQ(ask(http_roles{}, "legacy").what, kind::forbidden)
    << "a route without a role refuses everyone";
}

TEST_F(HttpAuth, AnIngestCredentialStaysWithItsConnectorOrSource) {
  params.push("name", "relay");
  EXPECT_EQ(ask(ingest, "t-relay").what, kind::allow);
  EXPECT_EQ(ask(ingest, "t-bot").what, kind::forbidden);
  params.clear();
  params.push("name", "other");
  EXPECT_EQ(ask(ingest, "t-relay").what, kind::forbidden);
  params.clear();
  EXPECT_EQ(ask(ingest, "t-relay", "{}").what, kind::forbidden);
  EXPECT_EQ(ask(ingest, "t-bot", R"({"source":{"endpoint_identity":"bot-1"}})")
              .what,
            kind::allow);
  EXPECT_EQ(ask(ingest, "t-bot", R"({"source":{"endpoint_identity":"bot-2"}})")
              .what,
            kind::forbidden);
}

TEST_F(HttpAuth, AWorkerWorksForItsButlerOnly) {
  auto worker = http_roles{http_role::worker};
  params.push("name", "ext");
  EXPECT_EQ(ask(worker, "t-ext").what, kind::allow);
  params.clear();
  params.push("name", "other");
  EXPECT_EQ(ask(worker, "t-ext").what, kind::forbidden);
}

TEST_F(HttpAuth, AThreadCredentialReachesItsThreadAndAsksForRuns) {
  params.push("id", "t1");
  EXPECT_EQ(ask(thread, "t-own").what, kind::allow);
  params.clear();
  params.push("id", "t2");
  EXPECT_EQ(ask(thread, "t-own").what, kind::forbidden);
  params.clear();
  params.push("run_id", "0190a000-0000-7000-8000-000000000001");
  auto d = ask(thread, "t-own");
  ASSERT_EQ(d.what, kind::lookup);
  EXPECT_EQ(d.lookup.stmt.query, "http_run_scope");
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {{"t1", ""}}).what,
            kind::allow);
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {{"t2", ""}}).what,
            kind::forbidden);
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {}).what,
            kind::forbidden);
  EXPECT_EQ(check_scope(*d.credential, d.lookup, false, {}).what,
            kind::forbidden);
}

TEST_F(HttpAuth, ASenderCredentialNamesItselfAndOwnsWhatItStarted) {
  params.push("id", "t5");
  EXPECT_EQ(ask(thread, "t-alice", R"({"text":"hi"})").what, kind::forbidden);
  EXPECT_EQ(ask(thread, "t-alice", R"({"sender":"web:bob"})").what,
            kind::forbidden);
  auto d = ask(thread, "t-alice", R"({"sender":"web:alice"})");
  ASSERT_EQ(d.what, kind::lookup);
  EXPECT_EQ(d.lookup.stmt.query, "http_thread_owner");
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {}).what, kind::allow)
    << "a thread without a run may be started";
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {{"web:alice"}}).what,
            kind::allow);
  EXPECT_EQ(check_scope(*d.credential, d.lookup, true, {{"web:bob"}}).what,
            kind::forbidden);
}

} // namespace
} // namespace butlers
