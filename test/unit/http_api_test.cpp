// The API endpoints that answer through an actor, without restinio: what
// they refuse at once, which services they need, and what a round trip
// through a fake reader answers, in virtual time.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/typed_event_based_actor.hpp>
#include <gtest/gtest.h>

#include "actors/http_api.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

constexpr const char* some_uuid = "0190f4c2-7d1e-7a3b-9c4d-5e6f7a8b9c0d";

/// Records how a handler answered.
struct recorder : http_responder {
  std::optional<http_reply> at_once;
  /// What a `later` answer delivered (shared: the bridge outlives a call).
  std::shared_ptr<std::optional<http_reply>>
    afterwards = std::make_shared<std::optional<http_reply>>();
  int in_flight = 0;

  void now(http_reply r) override {
    at_once = std::move(r);
  }

  std::function<void(http_reply)> later() override {
    ++in_flight;
    return [slot = afterwards](http_reply r) {
      *slot = std::move(r);
    };
  }
};

/// Answers a read with a one-cell document naming the statement, no row
/// for the parameter "none"; records every statement.
db_reader_actor::behavior_type fake_reader(
  db_reader_actor::pointer,
  std::shared_ptr<std::vector<named_statement>> seen) {
  return {
    [seen](read_atom, named_statement& stmt) {
      seen->push_back(stmt);
      if (stmt.params.at(0) == "0190f4c2-0000-7a3b-9c4d-5e6f7a8b9c0d")
        return named_result{true, {}};
      return named_result{true, {{R"({"q":")" + stmt.query + R"("})"}}};
    },
  };
}

struct HttpApi : test::deterministic_fixture {
  node_settings settings;
  http_api api{sys, settings, ctx};
  std::shared_ptr<std::vector<named_statement>>
    reads = std::make_shared<std::vector<named_statement>>();
  recorder out;
  /// The request of the current call; `params` point into it.
  std::string path;
  std::string body;
  std::string query;
  std::vector<std::string_view> segments;
  path_params params;

  /// Calls `handler` as the server would for `method path` on the route
  /// `pattern`.
  template<class Handler>
  void call(Handler handler, const char* pattern, const char* method,
            std::string p, std::string b = {},
            std::optional<std::string_view> type = "application/json") {
    path = std::move(p);
    body = std::move(b);
    auto q = path.find('?');
    query = q == std::string::npos ? "" : path.substr(q + 1);
    path = path.substr(0, q);
    split_path(path, segments);
    // `params` views the pattern's names: it must outlive the call, as the
    // server's route table does.
    path_pattern route{pattern};
    ASSERT_TRUE(route.match(segments, params));
    (api.*handler)(http_call{method, path, query, type, body, {}}, out, params);
    sched.run();
  }

  void with_reader() {
    auto reader = sys.spawn(fake_reader, reads);
    ctx->set_reader(reader);
  }

  /// The answer, whichever way it came.
  const http_reply& answer() const {
    return out.at_once ? *out.at_once : out.afterwards->value();
  }

  bool says(std::string_view text) const {
    return answer().body.find(text) != std::string::npos;
  }

  ~HttpApi() override {
    if (auto r = ctx->reader())
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

TEST_F(HttpApi, InspectingARequestNamesABadIdAtOnce) {
  call(&http_api::request_inspect, "/v1/requests/{id}", "GET",
       "/v1/requests/nope");
  EXPECT_EQ(answer().status, 400);
  EXPECT_TRUE(says("request id must be a UUID"));
  EXPECT_EQ(out.in_flight, 0);
}

TEST_F(HttpApi, InspectingARequestWithoutAReaderIsUnavailable) {
  call(&http_api::request_inspect, "/v1/requests/{id}", "GET",
       std::string{"/v1/requests/"} + some_uuid);
  EXPECT_EQ(answer().status, 503);
  EXPECT_TRUE(answer().retry_after);
  EXPECT_TRUE(says("no database reader on this node"));
}

TEST_F(HttpApi, InspectingARequestAnswersTheDocumentTheReaderBuilt) {
  with_reader();
  call(&http_api::request_inspect, "/v1/requests/{id}", "GET",
       std::string{"/v1/requests/"} + some_uuid);
  EXPECT_FALSE(out.at_once);
  EXPECT_EQ(out.in_flight, 1);
  EXPECT_EQ(answer().status, 200);
  EXPECT_EQ(answer().body, R"({"q":"request_inspect"})");
  ASSERT_EQ(reads->size(), 1u);
  EXPECT_EQ(reads->at(0).params, (std::vector<std::string>{some_uuid}));
}

TEST_F(HttpApi, InspectingAnUnknownRequestIsNotFound) {
  with_reader();
  call(&http_api::request_inspect, "/v1/requests/{id}", "GET",
       "/v1/requests/0190f4c2-0000-7a3b-9c4d-5e6f7a8b9c0d");
  EXPECT_EQ(answer().status, 404);
  EXPECT_TRUE(says("no request 0190f4c2-0000-7a3b-9c4d-5e6f7a8b9c0d"));
}

TEST_F(HttpApi, TheTranscriptReadsTheWindowTheQueryAsksFor) {
  with_reader();
  call(&http_api::thread_transcript, "/v1/threads/{id}/transcript", "GET",
       "/v1/threads/chat-9/transcript?after=12&limit=3");
  EXPECT_EQ(answer().status, 200);
  ASSERT_EQ(reads->size(), 1u);
  EXPECT_EQ(reads->at(0).query, "thread_transcript_read");
  EXPECT_EQ(reads->at(0).params,
            (std::vector<std::string>{"chat-9", "12", "3"}));
}

TEST_F(HttpApi, TheTranscriptRefusesABadWindowOrThreadId) {
  with_reader();
  call(&http_api::thread_transcript, "/v1/threads/{id}/transcript", "GET",
       "/v1/threads/chat-9/transcript?limit=0");
  EXPECT_EQ(answer().status, 400);
  EXPECT_TRUE(says("limit (1..1000)"));
  call(&http_api::thread_transcript, "/v1/threads/{id}/transcript", "GET",
       "/v1/threads/a b/transcript");
  EXPECT_TRUE(says("thread id must be 1..128"));
  EXPECT_TRUE(reads->empty());
}

TEST_F(HttpApi, AnOperatorActionIsCheckedBeforeTheSwitchboardIsAsked) {
  auto op = &http_api::request_operate;
  auto pattern = "/v1/requests/{id}/{action}";
  auto base = std::string{"/v1/requests/"} + some_uuid;
  call(op, pattern, "POST", "/v1/requests/x/replay", "{}");
  EXPECT_TRUE(says("request id must be a UUID"));
  call(op, pattern, "POST", base + "/nope", "{}");
  EXPECT_EQ(answer().status, 404);
  EXPECT_TRUE(says("no route for POST " + base + "/nope"));
  call(op, pattern, "POST", base + "/replay", "[]");
  EXPECT_TRUE(says("body must be a JSON object with 'who' and 'why'"));
  call(op, pattern, "POST", base + "/force-complete", R"({"who":"a"})");
  EXPECT_EQ(answer().status, 503);
  EXPECT_TRUE(says("the switchboard is restarting"));
  EXPECT_EQ(out.in_flight, 0);
}

TEST_F(HttpApi, OtherPathsUnderRequestsNameABadIdBeforeTheMissingRoute) {
  auto pattern = "/v1/requests/{rest...}";
  call(&http_api::request_other, pattern, "DELETE", "/v1/requests/x/y");
  EXPECT_EQ(answer().status, 400);
  call(&http_api::request_other, pattern, "DELETE",
       std::string{"/v1/requests/"} + some_uuid);
  EXPECT_EQ(answer().status, 404);
  EXPECT_TRUE(
    says(std::string{"no route for DELETE /v1/requests/"} + some_uuid));
}

TEST_F(HttpApi, ButlerEndpointsWithoutARegistrySaySoFirst) {
  call(&http_api::butlers_list, "/v1/butlers", "GET", "/v1/butlers");
  EXPECT_EQ(answer().status, 503);
  EXPECT_TRUE(says("no database is configured on this node"));
  ctx->status.database_configured = true;
  call(&http_api::butlers_other, "/v1/butlers/{rest...}", "PUT",
       "/v1/butlers/x");
  EXPECT_TRUE(says("the butlers are restarting"));
  call(&http_api::butler_route, "/v1/butlers/{name}/route", "POST",
       "/v1/butlers/x/route", "{}", "text/plain");
  EXPECT_EQ(answer().status, 503);
}

TEST_F(HttpApi, ATurnIsCheckedInOrderBeforeTheDirectoryIsAsked) {
  auto turn = &http_api::thread_turn_post;
  auto pattern = "/v1/threads/{id}/turns";
  call(turn, pattern, "POST", "/v1/threads//turns", "{}");
  EXPECT_TRUE(says("thread id must be 1..128"));
  call(turn, pattern, "POST", "/v1/threads/t/turns", "{}", "text/plain");
  EXPECT_EQ(answer().status, 415);
  call(turn, pattern, "POST", "/v1/threads/t/turns", "{}", std::nullopt);
  EXPECT_EQ(answer().status, 415);
  call(turn, pattern, "POST", "/v1/threads/t/turns", R"({"text":"hi"})");
  EXPECT_EQ(answer().status, 400);
  EXPECT_TRUE(says("'message_id'"));
  call(turn, pattern, "POST", "/v1/threads/t/turns",
       R"({"message_id":"m","text":"hi"})");
  EXPECT_EQ(answer().status, 503);
  EXPECT_TRUE(says("no database is configured on this node"));
  ctx->status.draining = true;
  call(turn, pattern, "POST", "/v1/threads/t/turns", "{}", "text/plain");
  EXPECT_TRUE(says("the node is shutting down"));
  EXPECT_EQ(out.in_flight, 0);
}

TEST_F(HttpApi, ATurnBodyOverTheLimitIsTooLarge) {
  settings.http.max_body_bytes = 4;
  call(&http_api::thread_turn_post, "/v1/threads/{id}/turns", "POST",
       "/v1/threads/t/turns", R"({"message_id":"m","text":"hi"})");
  EXPECT_EQ(answer().status, 413);
  EXPECT_TRUE(says("body exceeds http.max_body_bytes"));
}

TEST_F(HttpApi, CancellingARunWantsAUuidAndTheDirectory) {
  call(&http_api::run_cancel, "/v1/runs/{run_id}/cancel", "POST",
       "/v1/runs/r-1/cancel");
  EXPECT_EQ(answer().status, 400);
  EXPECT_TRUE(says("run id must be a UUID"));
  ctx->status.database_configured = true;
  call(&http_api::run_cancel, "/v1/runs/{run_id}/cancel", "POST",
       std::string{"/v1/runs/"} + some_uuid + "/cancel");
  EXPECT_EQ(answer().status, 503);
  EXPECT_TRUE(says("the thread directory is restarting"));
}

} // namespace
} // namespace butlers
