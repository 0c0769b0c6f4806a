// The thread API a chat client is built on, against a real node process,
// real PostgreSQL and real HTTP over loopback: GET /v1/threads (pages,
// newest first, no duplicates or gaps while threads are added), GET
// /v1/threads/{id} during and after a run, the 404 and the 400s, and the
// digest the summary events carry.

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/json.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"
#include "test/support/thread_node.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

/// A `broken` butler whose every session fails with class `timeout`.
const std::string broken_butler
  = "[[butler]]\nname = \"broken\"\n[butler.runtime]\nturn_ms = 10\n"
    "turns = 1\nfail_rate = 1.0\nfail_class = \"timeout\"\n";

class ThreadList : public thread_node {
 protected:
  /// GET `path` as a JSON document (asserting a 200).
  rapidjson::Document get_json(const std::string& path) {
    auto r = http_->get(path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    rapidjson::Document doc;
    EXPECT_FALSE(json::parse(r.body, doc)) << r.body;
    return doc;
  }

  /// The thread ids of one page and its next cursor ("" on the last).
  std::pair<std::vector<std::string>, std::string> page(
    const std::string& query) {
    auto doc = get_json("/v1/threads?" + query);
    std::vector<std::string> ids;
    for (auto& t : doc["threads"].GetArray())
      ids.push_back(str(t, "thread_id"));
    return {ids, str(doc, "next_cursor")};
  }

  /// Sends one turn to `thread` and waits until its run has finished.
  void converse(const std::string& thread, const std::string& text,
                const std::string& more = {}) {
    auto a = turn(thread, "m-" + thread + "-" + std::to_string(unix_us_now()),
                  text, more);
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_TRUE(eventually(
      [&] {
        return finished(a.run_id);
      },
      20s));
  }

  /// A 400 that names query parameter `name` for `path`.
  void expect_bad_parameter(const std::string& path, const std::string& name) {
    auto r = http_->get(path);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_NE(r.body.find(R"("parameter":")" + name + "\""), std::string::npos)
      << path << ": " << r.body;
  }
};

TEST_F(ThreadList, PagesAreNewestFirstWithoutDuplicatesOrGapsUnderInserts) {
  start(10, 1, 4);
  std::vector<std::string> made;
  for (int i = 1; i <= 7; ++i) {
    made.push_back("t-page-" + std::to_string(i));
    converse(made.back(), "hello number " + std::to_string(i));
  }
  // Newest first: the reverse of the order they were made in.
  std::vector<std::string> expected(made.rbegin(), made.rend());
  std::vector<std::string> seen;
  auto [first, cursor] = page("limit=3");
  EXPECT_EQ(first.size(), 3u);
  seen.insert(seen.end(), first.begin(), first.end());
  int pages = 1;
  while (!cursor.empty()) {
    // A thread started between two pages goes before the cursor: it shifts
    // nothing after it.
    converse("t-new-" + std::to_string(pages), "a newcomer");
    auto [ids, next] = page("limit=3&cursor=" + cursor);
    seen.insert(seen.end(), ids.begin(), ids.end());
    cursor = next;
    ASSERT_LT(++pages, 10) << "the pages never end";
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(),
            seen.size());
  // From the top again, the newcomers lead.
  auto [top, more] = page("limit=2");
  EXPECT_EQ(top, (std::vector<std::string>{"t-new-2", "t-new-1"}));
  EXPECT_FALSE(more.empty());
  // The default page holds them all, with a digest each.
  auto doc = get_json("/v1/threads");
  ASSERT_EQ(doc["threads"].Size(), 9u);
  EXPECT_TRUE(doc["next_cursor"].IsNull());
  auto& oldest = doc["threads"][8];
  EXPECT_EQ(str(oldest, "thread_id"), "t-page-1");
  EXPECT_EQ(str(oldest, "title"), "hello number 1");
  EXPECT_FALSE(str(oldest, "last_message_preview").empty());
  EXPECT_EQ(str(oldest, "run_status"), "ok");
  EXPECT_TRUE(oldest["run_error"].IsNull());
  EXPECT_GT(oldest["last_message_at_unix_ms"].GetInt64(), 0);
  EXPECT_LE(oldest["last_message_at_unix_ms"].GetInt64(),
            doc["threads"][7]["last_message_at_unix_ms"].GetInt64());
}

TEST_F(ThreadList, BadQueryParametersAre400NamingTheParameter) {
  start(10, 1, 1);
  converse("t-q", "something");
  expect_bad_parameter("/v1/threads?limit=0", "limit");
  expect_bad_parameter("/v1/threads?limit=201", "limit");
  expect_bad_parameter("/v1/threads?limit=ten", "limit");
  expect_bad_parameter("/v1/threads?cursor=nonsense", "cursor");
  expect_bad_parameter("/v1/threads?cursor=", "cursor");
  // A real cursor with one digit changed is refused, not passed on.
  converse("t-q2", "something else");
  auto [ids, cursor] = page("limit=1");
  ASSERT_FALSE(cursor.empty());
  auto tampered = cursor;
  tampered[2] = tampered[2] == '3' ? '4' : '3';
  expect_bad_parameter("/v1/threads?cursor=" + tampered, "cursor");
  expect_bad_parameter("/v1/threads?cursor=%27%3B--", "cursor");
  EXPECT_EQ(http_->get("/v1/threads?cursor=" + cursor).status, 200);
}

TEST_F(ThreadList, ASnapshotShowsTheActiveAndQueuedRunsThenTheOutcome) {
  // One slow run: two scripted turns of 700 ms.
  start(700, 2, 1);
  auto first = turn("t-snap", "m1", "plan my week\\nin detail");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(eventually(
    [&] {
      return run_state(first.run_id) == "running";
    },
    10s));
  auto queued = turn("t-snap", "m2", "then my month", R"(,"mode":"queue")");
  ASSERT_EQ(queued.kind, "queued") << queued.body;
  auto doc = get_json("/v1/threads/t-snap");
  EXPECT_EQ(str(doc, "thread_id"), "t-snap");
  EXPECT_TRUE(doc["live"].GetBool());
  EXPECT_EQ(str(doc, "title"), "plan my week");
  EXPECT_EQ(str(doc, "last_message_preview"), "then my month");
  EXPECT_EQ(str(doc, "run_status"), "running");
  ASSERT_EQ(doc["active_runs"].Size(), 1u) << json::to_string(doc);
  EXPECT_EQ(str(doc["active_runs"][0], "run_id"), first.run_id);
  EXPECT_EQ(str(doc["active_runs"][0], "state"), "running");
  ASSERT_EQ(doc["queued_runs"].Size(), 1u);
  EXPECT_EQ(str(doc["queued_runs"][0], "run_id"), queued.run_id);
  EXPECT_EQ(doc["last_event_cursor"].GetInt64(),
            scalar("SELECT max(cursor) FROM thread_transcript "
                   "WHERE thread_id = 't-snap'"));
  ASSERT_TRUE(eventually(
    [&] {
      return finished(first.run_id) && finished(queued.run_id);
    },
    20s));
  ASSERT_TRUE(eventually(
    [&] {
      return str(get_json("/v1/threads/t-snap"), "run_status") == "ok";
    },
    10s));
  doc = get_json("/v1/threads/t-snap");
  EXPECT_EQ(doc["active_runs"].Size(), 0u);
  EXPECT_EQ(doc["queued_runs"].Size(), 0u);
  EXPECT_EQ(doc["last_event_cursor"].GetInt64(),
            scalar("SELECT max(cursor) FROM thread_transcript "
                   "WHERE thread_id = 't-snap'"));
  // The list agrees.
  auto list = get_json("/v1/threads");
  ASSERT_EQ(list["threads"].Size(), 1u);
  EXPECT_EQ(str(list["threads"][0], "title"), "plan my week");
  EXPECT_EQ(list["threads"][0]["last_cursor"].GetInt64(),
            doc["last_event_cursor"].GetInt64());
}

TEST_F(ThreadList, AnUnknownThreadIs404AndABadIdIs400) {
  start(10, 1, 1);
  auto r = http_->get("/v1/threads/t-nobody");
  EXPECT_EQ(r.status, 404) << r.body;
  rapidjson::Document doc;
  ASSERT_FALSE(json::parse(r.body, doc)) << r.body;
  EXPECT_EQ(str(doc["error"], "code"), "not_found");
  EXPECT_NE(str(doc["error"], "message").find("t-nobody"), std::string::npos);
  EXPECT_EQ(http_->get("/v1/threads/bad%20id").status, 400);
  // An empty node lists nothing.
  auto list = get_json("/v1/threads");
  EXPECT_EQ(list["threads"].Size(), 0u);
  EXPECT_TRUE(list["next_cursor"].IsNull());
}

TEST_F(ThreadList, AFailedRunShowsItsErrorEverywhere) {
  start(10, 1, 1, broken_butler);
  sse_client summary{port_, "/v1/events/summary"};
  ASSERT_TRUE(eventually(
    [&] {
      return summary.open();
    },
    10s));
  converse("t-fail", "  please   break\\nthis", R"(,"butler":"broken")");
  ASSERT_TRUE(eventually(
    [&] {
      return summary.count(R"("run_status":"error")") >= 1;
    },
    10s))
    << summary.text();
  auto sum = summary.text();
  auto at = sum.rfind("event: summary");
  ASSERT_NE(at, std::string::npos);
  auto frame = sum.substr(at);
  EXPECT_NE(frame.find(R"("title":"please break")"), std::string::npos)
    << frame;
  EXPECT_NE(frame.find(R"("last_message_preview":"timeout: )"),
            std::string::npos)
    << frame;
  EXPECT_NE(frame.find(R"("last_message_at_unix_ms":)"), std::string::npos);
  EXPECT_NE(frame.find(R"("run_error":{"class":"timeout","message":")"),
            std::string::npos)
    << frame;
  auto doc = get_json("/v1/threads/t-fail");
  EXPECT_EQ(str(doc, "run_status"), "error");
  ASSERT_TRUE(doc["run_error"].IsObject()) << json::to_string(doc);
  EXPECT_EQ(str(doc["run_error"], "class"), "timeout");
  auto list = get_json("/v1/threads");
  ASSERT_EQ(list["threads"].Size(), 1u);
  EXPECT_EQ(str(list["threads"][0]["run_error"], "class"), "timeout");
}

TEST_F(ThreadList, TheRoutesTakeTheNodesBearerToken) {
  use_database("threads");
  use_files("threads");
  ASSERT_TRUE(start_node(
    node_head("threads-test", 5, "token = \"bearer-1\"\n")
    + "[[butler]]\nname = \"general\"\n[butler.runtime]\nturn_ms = 10\n"));
  EXPECT_EQ(http_->get("/v1/threads").status, 401);
  EXPECT_EQ(http_->get("/v1/threads/t-1").status, 401);
  http_->token("bearer-1");
  EXPECT_EQ(http_->get("/v1/threads").status, 200);
  EXPECT_EQ(http_->get("/v1/threads/t-1").status, 404);
}

} // namespace
} // namespace butlers::test
