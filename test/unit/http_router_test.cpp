// The HTTP route table: patterns with path parameters, method checks, the
// order of rows, and what a path that fits no row reports.

#include <gtest/gtest.h>

#include "runtime/http_router.hpp"

namespace butlers {
namespace {

using m = route_methods;

/// Rows name themselves: a match tells which row it was.
using table = http_route_table<const char*>;

std::string_view hit(const table& t, http_method method,
                     std::string_view path) {
  auto r = t.match(method, path);
  return r.route ? r.route->handler : "none";
}

TEST(HttpMethod, ReadsGetAndPostAndNothingElse) {
  EXPECT_EQ(parse_http_method("GET"), http_method::get);
  EXPECT_EQ(parse_http_method("POST"), http_method::post);
  EXPECT_EQ(parse_http_method("DELETE"), http_method::other);
  EXPECT_EQ(parse_http_method("get"), http_method::other);
  EXPECT_STREQ(to_string(http_method::post), "POST");
}

TEST(SplitPath, KeepsEmptySegmentsAndRefusesRelativePaths) {
  std::vector<std::string_view> xs;
  ASSERT_TRUE(split_path("/a/b/", xs));
  EXPECT_EQ(xs, (std::vector<std::string_view>{"a", "b", ""}));
  ASSERT_TRUE(split_path("/", xs));
  EXPECT_EQ(xs, (std::vector<std::string_view>{""}));
  ASSERT_TRUE(split_path("/a//b", xs));
  EXPECT_EQ(xs, (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_FALSE(split_path("a/b", xs));
  EXPECT_TRUE(xs.empty());
  EXPECT_FALSE(split_path("", xs));
}

TEST(PathPattern, BindsOneSegmentParameters) {
  path_pattern p{"/v1/threads/{id}/turns"};
  std::vector<std::string_view> segs;
  path_params params;
  split_path("/v1/threads/chat-9/turns", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["id"], "chat-9");
  EXPECT_EQ(params["other"], "");
  split_path("/v1/threads/a/b/turns", segs);
  EXPECT_FALSE(p.match(segs, params));
  split_path("/v1/threads/chat-9/turns/", segs);
  EXPECT_FALSE(p.match(segs, params));
  split_path("/v1/threads/chat-9", segs);
  EXPECT_FALSE(p.match(segs, params));
}

TEST(PathPattern, AOneSegmentParameterMayBeEmpty) {
  path_pattern p{"/v1/runs/{id}/cancel"};
  std::vector<std::string_view> segs;
  path_params params;
  split_path("/v1/runs//cancel", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["id"], "");
}

TEST(PathPattern, AManySegmentParameterTakesSlashesAndTheLongestFit) {
  path_pattern p{"/b/{name}/work/{work_id...}/cancel"};
  std::vector<std::string_view> segs;
  path_params params;
  split_path("/b/n/work/a/b/cancel", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["name"], "n");
  EXPECT_EQ(params["work_id"], "a/b");
  split_path("/b/n/work/x/cancel/cancel", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["work_id"], "x/cancel");
  // At least one segment, so `work/cancel` has no work id to bind.
  split_path("/b/n/work/cancel", segs);
  EXPECT_FALSE(p.match(segs, params));
}

TEST(PathPattern, ATrailingManyParameterTakesTheRestEvenIfEmpty) {
  path_pattern p{"/v1/requests/{rest...}"};
  std::vector<std::string_view> segs;
  path_params params;
  split_path("/v1/requests/", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["rest"], "");
  split_path("/v1/requests/x/y/", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["rest"], "x/y/");
  split_path("/v1/requests", segs);
  EXPECT_FALSE(p.match(segs, params));
}

TEST(PathPattern, ComparesPathsRawWithoutPercentDecoding) {
  path_pattern p{"/v1/threads/{id}/events"};
  std::vector<std::string_view> segs;
  path_params params;
  split_path("/v1/threads/a%2Fb/events", segs);
  ASSERT_TRUE(p.match(segs, params));
  EXPECT_EQ(params["id"], "a%2Fb");
  split_path("/v1/threads/x/%65vents", segs);
  EXPECT_FALSE(p.match(segs, params));
}

TEST(RouteTable, FindsTheRowOfMethodAndPathAndItsParameters) {
  table t{{m::get, "/healthz", http_roles::open(), "health"},
          {m::post, "/v1/runs/{id}/cancel", http_roles{http_role::read},
           "cancel"}};
  auto r = t.match(http_method::post, "/v1/runs/r-1/cancel");
  ASSERT_NE(r.route, nullptr);
  EXPECT_STREQ(r.route->handler, "cancel");
  EXPECT_TRUE(r.route->roles.has(http_role::read));
  EXPECT_EQ(r.params["id"], "r-1");
  EXPECT_TRUE(r.allowed.empty());
  EXPECT_EQ(hit(t, http_method::get, "/healthz"), "health");
}

TEST(RouteTable, TellsAnUnknownPathFromAKnownPathWithAnotherMethod) {
  table t{{m::get, "/v1/threads/{id}/events", http_roles{http_role::read},
           "events"},
          {m::post, "/v1/threads/{id}/turns", http_roles{http_role::read},
           "turns"},
          {m::get, "/v1/threads/{id}/turns", http_roles{http_role::read},
           "read"}};
  // 404: no pattern fits.
  auto unknown = t.match(http_method::get, "/v1/nothing");
  EXPECT_EQ(unknown.route, nullptr);
  EXPECT_TRUE(unknown.allowed.empty());
  // 405: patterns fit, their methods (an Allow list) do not.
  auto wrong = t.match(http_method::other, "/v1/threads/t/turns");
  EXPECT_EQ(wrong.route, nullptr);
  EXPECT_EQ(wrong.allowed, (std::vector<route_methods>{m::post, m::get}));
  auto put = t.match(http_method::post, "/v1/threads/t/events");
  EXPECT_EQ(put.route, nullptr);
  EXPECT_EQ(put.allowed, (std::vector<route_methods>{m::get}));
}

TEST(RouteTable, TheFirstFittingRowWinsSoAnAnyRowCatchesWhatOthersRefuse) {
  table t{{m::post, "/v1/ingest", http_roles{http_role::read}, "ingest"},
          {m::any, "/v1/ingest", http_roles{http_role::read}, "use-post"},
          {m::get, "/v1/requests/{id}", http_roles{http_role::read}, "inspect"},
          {m::any, "/v1/requests/{rest...}", http_roles{http_role::read},
           "other"}};
  EXPECT_EQ(hit(t, http_method::post, "/v1/ingest"), "ingest");
  EXPECT_EQ(hit(t, http_method::get, "/v1/ingest"), "use-post");
  EXPECT_EQ(hit(t, http_method::other, "/v1/ingest"), "use-post");
  EXPECT_EQ(hit(t, http_method::get, "/v1/requests/x"), "inspect");
  EXPECT_EQ(hit(t, http_method::post, "/v1/requests/x"), "other");
  EXPECT_EQ(hit(t, http_method::get, "/v1/requests/x/y"), "other");
  EXPECT_EQ(hit(t, http_method::get, "/v1/ingest/"), "none");
  auto r = t.match(http_method::post, "/v1/requests/x/y");
  EXPECT_EQ(r.params["rest"], "x/y");
  EXPECT_EQ(r.params["id"], "");
}

TEST(RouteTable, ARelativeOrEmptyPathFitsNothing) {
  table t{{m::any, "/{rest...}", http_roles{http_role::read}, "all"}};
  EXPECT_EQ(hit(t, http_method::get, "/x"), "all");
  EXPECT_EQ(hit(t, http_method::get, "x"), "none");
  EXPECT_EQ(hit(t, http_method::get, ""), "none");
  EXPECT_EQ(hit(t, http_method::get, "*"), "none");
}

} // namespace
} // namespace butlers
