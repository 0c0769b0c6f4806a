// The web dashboard's pieces without a node (runtime/dashboard.hpp): its
// embedded files with their headers, the list query parameters, the answer
// wrappers and the overview computed from metrics.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/dashboard.hpp"
#include "runtime/json.hpp"

namespace butlers {
namespace {

std::string header(const http_reply& r, const std::string& name) {
  for (auto& [k, v] : r.headers)
    if (k == name)
      return v;
  return {};
}

TEST(Dashboard, ServesItsEmbeddedFilesWithTypeEtagAndCsp) {
  auto page = dashboard_file("/", std::nullopt);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("/assets/app.js"), std::string::npos);
  // No inline script: the page loads app.js, and the CSP forbids inline.
  EXPECT_EQ(page->body.find("<script>"), std::string::npos);
  EXPECT_EQ(header(*page, "Content-Security-Policy"), dashboard_csp);
  EXPECT_EQ(std::string{dashboard_csp}.find("unsafe-inline"),
            std::string::npos);
  EXPECT_EQ(header(*page, "Cache-Control"), "no-cache");
  auto etag = header(*page, "ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(etag.front(), '"');
  // Revalidation: the same ETag is a 304 without a body.
  auto again = dashboard_file("/", std::string_view{etag});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  EXPECT_EQ(dashboard_file("/", std::string_view{"\"other\""})->status, 200);

  auto js = dashboard_file("/assets/app.js", std::nullopt);
  ASSERT_TRUE(js);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(header(js.value(), "ETag"), etag);
  auto css = dashboard_file("/assets/app.css", std::nullopt);
  ASSERT_TRUE(css);
  EXPECT_EQ(css->content_type, "text/css; charset=utf-8");

  EXPECT_FALSE(dashboard_file("/assets/missing.js", std::nullopt));
  EXPECT_FALSE(dashboard_file("/assets/../sql/0001_inbox.sql", std::nullopt));
  EXPECT_FALSE(dashboard_file("/assets/index.html", std::nullopt));
  EXPECT_FALSE(dashboard_file("/sql/0001_inbox.sql", std::nullopt));
}

TEST(Dashboard, ServesTheChatPageAndItsAssets) {
  auto page = dashboard_file("/chat", std::nullopt);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("/assets/chat.js"), std::string::npos);
  EXPECT_NE(page->body.find("/assets/app.css"), std::string::npos)
    << "the dashboard's style";
  EXPECT_EQ(page->body.find("<script>"), std::string::npos);
  EXPECT_EQ(header(*page, "Content-Security-Policy"), dashboard_csp);
  auto js = dashboard_file("/assets/chat.js", std::nullopt);
  ASSERT_TRUE(js);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  // Built with textContent only.
  EXPECT_EQ(js->body.find("innerHTML"), std::string::npos);
  auto css = dashboard_file("/assets/chat.css", std::nullopt);
  ASSERT_TRUE(css);
  EXPECT_EQ(css->content_type, "text/css; charset=utf-8");
  EXPECT_FALSE(dashboard_file("/assets/chat.html", std::nullopt));
  EXPECT_FALSE(dashboard_file("/chat/", std::nullopt));
}

TEST(Dashboard, ListQueriesAreBoundedAndNameWhatTheyRefuse) {
  auto q = parse_dashboard_query("");
  EXPECT_EQ(q.offset, 0);
  EXPECT_EQ(q.limit, 50);
  EXPECT_TRUE(q.bad.empty());
  q = parse_dashboard_query("offset=40&limit=200&q=ab%2Dcd&_=123");
  EXPECT_EQ(q.offset, 40);
  EXPECT_EQ(q.limit, 200);
  EXPECT_EQ(q.q, "ab-cd");
  EXPECT_TRUE(q.bad.empty());
  for (auto bad : {"limit=201", "limit=0", "limit=x", "offset=-1",
                   "offset=9999999999", "q=%zz"}) {
    SCOPED_TRACE(bad);
    auto r = parse_dashboard_query(bad);
    auto key = std::string{bad}.substr(0, std::string{bad}.find('='));
    EXPECT_EQ(r.bad, key);
    auto reply = dashboard_query_reply(r);
    EXPECT_EQ(reply.status, 400);
    EXPECT_NE(reply.body.find(key), std::string::npos) << reply.body;
  }
  auto s = parse_dashboard_query("state=open", {"open", "replayed"});
  EXPECT_EQ(s.state, "open");
  s = parse_dashboard_query("state=gone", {"open", "replayed"});
  EXPECT_EQ(s.bad, "state");
  EXPECT_EQ(s.bad_value, "gone");
  EXPECT_EQ(s.allowed, "one of open, replayed");
  EXPECT_FALSE(parse_dashboard_query("state=open").bad.empty());
}

TEST(Dashboard, ReadsPagesAsPaginatedResponses) {
  auto page = api_page_from_read(R"({"items":[{"x":1}],"total":3})", 0, 1);
  ASSERT_TRUE(page);
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(*page, d));
  EXPECT_EQ(d["data"][0]["x"].GetInt(), 1);
  EXPECT_TRUE(d["meta"]["has_more"].GetBool());
  EXPECT_FALSE(api_page_from_read("not json", 0, 1));
  EXPECT_FALSE(api_page_from_read(R"({"items":{}})", 0, 1));
}

TEST(Dashboard, OverviewComesFromTheMetricsWithRatesOverSamples) {
  metrics_registry m;
  auto& received = m.get_counter("butlers_switchboard_message_received", "");
  auto& parsed = m.get_counter("butlers_switchboard_lifecycle_transition", "",
                               "lifecycle_state=\"parsed\"");
  m.get_counter("butlers_switchboard_lifecycle_transition", "",
                "lifecycle_state=\"errored\"")
    .inc(2);
  m.get_counter("butlers_switchboard_dead_letters_total", "").inc();
  m.get_gauge("butlers_switchboard_requests_in_progress", "").set(4);
  m.get_gauge("butlers_buffer_queue_depth", "").set(7);
  m.get_gauge("butlers_spawner_active_sessions", "", "butler=\"health\"")
    .set(2);
  m.get_gauge("butlers_route_queue_depth", "", "butler=\"health\"").set(3);
  m.get_gauge("butlers_switchboard_circuit_open", "", "butler=\"health\"")
    .set(1);
  m.get_gauge("butlers_switchboard_circuit_open", "", "butler=\"finance\"")
    .set(0);
  received.inc(10);
  parsed.inc(6);
  dashboard_overview o{-1, 8, 1000};
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(o.render(m.samples(), "n1", 1000000), d));
  EXPECT_STREQ(d["node"].GetString(), "n1");
  EXPECT_EQ(d["totals"]["received"].GetInt(), 10);
  EXPECT_EQ(d["totals"]["completed"].GetInt(), 6);
  EXPECT_EQ(d["totals"]["errored"].GetInt(), 2);
  EXPECT_EQ(d["totals"]["dead_letters"].GetInt(), 1);
  EXPECT_EQ(d["in_flight"]["requests"].GetInt(), 4);
  EXPECT_EQ(d["queues"]["buffer"].GetInt(), 7);
  // One sample: no rate yet.
  EXPECT_TRUE(d["rates"].IsNull());
  ASSERT_EQ(d["open_circuits"].Size(), 1u);
  EXPECT_STREQ(d["open_circuits"][0].GetString(), "health");
  ASSERT_EQ(d["butlers"].Size(), 2u);
  auto& health = d["butlers"][1];
  EXPECT_STREQ(health["name"].GetString(), "health");
  EXPECT_EQ(health["active_sessions"].GetInt(), 2);
  EXPECT_EQ(health["queue_depth"].GetInt(), 3);
  EXPECT_TRUE(health["circuit_open"].GetBool());
  // Thirty seconds later, 5 more received and 3 more completed: per minute
  // twice that.
  received.inc(5);
  parsed.inc(3);
  ASSERT_FALSE(json::parse(o.render(m.samples(), "n1", 1030000), d));
  ASSERT_TRUE(d["rates"].IsObject());
  EXPECT_EQ(d["rates"]["window_s"].GetInt(), 30);
  EXPECT_DOUBLE_EQ(d["rates"]["received_per_min"].GetDouble(), 10.0);
  EXPECT_DOUBLE_EQ(d["rates"]["completed_per_min"].GetDouble(), 6.0);
  EXPECT_DOUBLE_EQ(d["rates"]["errored_per_min"].GetDouble(), 0.0);
}

TEST(Dashboard, OverviewRatesCountFromTheNodesStart) {
  metrics_registry m;
  m.get_counter("butlers_switchboard_message_received", "").inc(3);
  // Started a minute ago with every counter at zero: 3 a minute at once.
  dashboard_overview o{1000000, 8, 1000};
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(o.render(m.samples(), "n1", 1060000), d));
  ASSERT_TRUE(d["rates"].IsObject());
  EXPECT_EQ(d["rates"]["window_s"].GetInt(), 60);
  EXPECT_DOUBLE_EQ(d["rates"]["received_per_min"].GetDouble(), 3.0);
  // Past five minutes, the start falls out of the window.
  ASSERT_FALSE(json::parse(o.render(m.samples(), "n1", 1400000), d));
  EXPECT_EQ(d["rates"]["window_s"].GetInt(), 340);
}

} // namespace
} // namespace butlers
