// Every kind of answer of the HTTP API, as the server writes it: status,
// the headers that vary, and the body.

#include <caf/sec.hpp>
#include <gtest/gtest.h>

#include "runtime/http_render.hpp"
#include "runtime/messages.hpp"
#include "runtime/node_status.hpp"
#include "runtime/route.hpp"
#include "runtime/schema.hpp"
#include "runtime/threads.hpp"

namespace butlers {
namespace {

constexpr const char* json_type = "application/json";

TEST(HttpReply, ErrorsCarryTheirClassCodeMessageAndDetails) {
  auto r = error_reply(butlers_errc::payload_too_large, "too big");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.content_type, json_type);
  EXPECT_FALSE(r.no_store);
  EXPECT_FALSE(r.retry_after);
  EXPECT_FALSE(r.bearer_challenge);
  EXPECT_EQ(r.body,
            R"({"error":{"class":"validation_error","code":)"
            R"("payload_too_large","message":"too big","details":[]}})");
}

TEST(HttpReply, SaysRetryAfterOnOverloadUnavailableAndTimeout) {
  EXPECT_TRUE(error_reply(butlers_errc::overload_rejected, "").retry_after);
  EXPECT_TRUE(error_reply(butlers_errc::database_unavailable, "").retry_after);
  EXPECT_TRUE(draining_reply().retry_after);
  EXPECT_TRUE(ingest_timeout_reply().retry_after);
  EXPECT_EQ(ingest_timeout_reply().status, 504);
  EXPECT_FALSE(error_reply(butlers_errc::not_found, "").retry_after);
  EXPECT_FALSE(error_reply(butlers_errc::internal_error, "").retry_after);
}

TEST(HttpReply, UnauthorizedChallengesForABearerToken) {
  auto r = unauthorized_reply();
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(r.bearer_challenge);
  EXPECT_FALSE(r.retry_after);
  EXPECT_NE(r.body.find(R"("code":"unauthorized","message":"missing or )"
                        R"(wrong bearer token")"),
            std::string::npos);
}

TEST(HttpReply, AFailedRoundTripFallsBackToTheCodesName) {
  auto r = failure_reply(caf::error{butlers_errc::conflict});
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.body.find(R"("message":"conflict")"), std::string::npos);
  r = failure_reply(caf::error{butlers_errc::conflict, std::string{"taken"}});
  EXPECT_NE(r.body.find(R"("message":"taken")"), std::string::npos);
  r = failure_reply(caf::make_error(caf::sec::request_timeout));
  EXPECT_EQ(r.status, 504);
  EXPECT_TRUE(r.retry_after);
}

TEST(HttpReply, RoutesThatDoNotFitSayWhatWasAsked) {
  EXPECT_NE(no_route_reply("DELETE", "/v1/x")
              .body.find(R"("message":"no )"
                         R"(route for DELETE )"
                         R"(/v1/x")"),
            std::string::npos);
  auto r = wrong_method_reply("POST", "/v1/ingest");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find(R"("message":"use POST for /v1/ingest")"),
            std::string::npos);
}

TEST(HttpReply, ProbesAndMetricsAreNeverCached) {
  auto h = healthz_reply();
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(h.no_store);
  EXPECT_EQ(h.body, R"({"status":"ok"})");
  auto m = metrics_reply("x 1\n");
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4");
  EXPECT_TRUE(m.no_store);
  EXPECT_EQ(m.body, "x 1\n");
}

TEST(HttpReply, ReadyzNamesTheDatabaseStateAndItsError) {
  node_status st;
  auto r = readyz_reply(st);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body,
            R"({"ready":true,"draining":false,"database":"not configured"})");
  st.database_configured = true;
  st.set_database_error("refused");
  r = readyz_reply(st);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.no_store);
  EXPECT_FALSE(r.retry_after);
  EXPECT_EQ(r.body, R"({"ready":false,"draining":false,"database":)"
                    R"("unavailable","database_error":"refused"})");
}

TEST(HttpReply, IngestAnswersAcceptedOrDeduped) {
  auto r = ingest_reply(append_result{"r-1", false, 0, {}});
  EXPECT_EQ(r.status, 202);
  EXPECT_TRUE(r.no_store);
  EXPECT_EQ(r.body,
            R"({"request_id":"r-1","status":"accepted","duplicate":false})");
  r = ingest_reply(append_result{"r-0", true, 0, {}});
  EXPECT_EQ(r.body,
            R"({"request_id":"r-0","status":"deduped","duplicate":true})");
}

TEST(HttpReply, ABatchedIngestAnswersEachRecordsOwnResult) {
  auto r = ingest_result_reply(append_result{"r-1", true, 0, {}});
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, ingest_reply(append_result{"r-1", true, 0, {}}).body);
  r = ingest_result_reply(
    append_result{"", false, static_cast<uint8_t>(butlers_errc::draining),
                  "going"});
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);
  EXPECT_NE(r.body.find(R"("code":"draining","message":"going")"),
            std::string::npos);
}

TEST(HttpReply, IngestRefusalsSayWhy) {
  auto r = ingest_too_large_reply(20, 10);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("body of 20 bytes exceeds http.max_body_bytes (10)"),
            std::string::npos);
  r = ingest_violations_reply({violation{"/text", "required", "missing"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find(R"("message":"1 schema violation(s) against )"
                        R"(ingest.v1","details":[{"pointer":"/text",)"
                        R"("keyword":"required","message":"missing"}])"),
            std::string::npos);
  r = ingest_not_json_reply("at 3");
  EXPECT_NE(r.body.find("body is not valid JSON: at 3"), std::string::npos);
  r = ingest_failure_reply(butlers_errc::overload_rejected, "");
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.body.find(R"("message":"overload_rejected")"), std::string::npos);
}

TEST(HttpReply, AMissingServiceIsNamed) {
  auto r = no_ingest_switchboard_reply(false, true);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find(R"("code":"target_unavailable","message":"no )"
                        R"(database is configured on this node")"),
            std::string::npos);
  r = no_ingest_switchboard_reply(true, true);
  EXPECT_NE(r.body.find(R"("code":"database_unavailable","message":"the )"
                        R"(switchboard is restarting")"),
            std::string::npos);
  r = no_ingest_switchboard_reply(true, false);
  EXPECT_NE(r.body.find("this butler-only node has no switchboard node "
                        "connected"),
            std::string::npos);
  EXPECT_NE(no_registry_reply(true).body.find("the butlers are restarting"),
            std::string::npos);
  EXPECT_NE(no_directory_reply(true).body.find(R"("database_unavailable",)"
                                               R"("message":"the thread )"
                                               R"(directory is restarting")"),
            std::string::npos);
  EXPECT_NE(no_directory_reply(false).body.find(R"("target_unavailable")"),
            std::string::npos);
  EXPECT_NE(no_reader_reply().body.find("no database reader on this node"),
            std::string::npos);
}

TEST(HttpReply, TheButlerListHasOneEntryPerHost) {
  registry_entry a;
  a.name = "health";
  a.description = "d";
  a.node = "n1";
  a.max_concurrent_sessions = 2;
  auto b = a;
  b.node = "n2";
  b.status = "stale";
  auto r = butlers_reply({a, b});
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.no_store);
  EXPECT_EQ(r.body, R"({"butlers":[{"name":"health","description":"d",)"
                    R"("node":"n1","status":"active",)"
                    R"("max_concurrent_sessions":2},{"name":"health",)"
                    R"("description":"d","node":"n2","status":"stale",)"
                    R"("max_concurrent_sessions":2}]})");
  EXPECT_EQ(butlers_reply({}).body, R"({"butlers":[]})");
}

TEST(HttpReply, ARouteAnswersAcceptedOrTheStatusOfItsErrorClass) {
  route_response ok;
  ok.status = "accepted";
  auto r = route_reply(ok);
  EXPECT_EQ(r.status, 202);
  EXPECT_FALSE(r.no_store);
  EXPECT_EQ(r.body, to_json(ok));
  auto busy = make_error_response("r", "overload_rejected", "full", true);
  EXPECT_EQ(route_reply(busy).status, 429);
  EXPECT_TRUE(route_reply(busy).retry_after);
  auto down = make_error_response("r", "target_unavailable", "down", true);
  EXPECT_TRUE(route_reply(down).retry_after);
  auto late = make_error_response("r", "timeout", "late", true);
  EXPECT_EQ(route_reply(late).status, 504);
  EXPECT_FALSE(route_reply(late).retry_after);
  auto odd = make_error_response("r", "made_up", "?", false);
  EXPECT_EQ(route_reply(odd).status, 500);
}

TEST(HttpReply, CancelsSayWhetherSomethingWasCancelled) {
  EXPECT_EQ(work_cancel_reply(true).status, 200);
  EXPECT_EQ(work_cancel_reply(true).body, R"({"cancelled":true})");
  EXPECT_EQ(work_cancel_reply(false).status, 404);
  EXPECT_EQ(work_cancel_reply(false).body, R"({"cancelled":false})");
  EXPECT_EQ(thread_cancel_reply(0).status, 200);
  EXPECT_EQ(thread_cancel_reply(3).body, R"({"cancelled":3})");
  EXPECT_EQ(run_cancel_reply(1).status, 200);
  EXPECT_EQ(run_cancel_reply(0).status, 404);
  EXPECT_EQ(run_cancel_reply(0).body, R"({"cancelled":0})");
  EXPECT_TRUE(run_cancel_reply(0).no_store);
}

TEST(HttpReply, ATurnAnswersItsRunOrItsRefusal) {
  turn_result ok;
  ok.run_id = "run-1";
  ok.kind = "steer";
  ok.cursor = 7;
  auto r = turn_reply(ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.no_store);
  EXPECT_EQ(r.body, R"({"run_id":"run-1","kind":"steer","cursor":7,)"
                    R"("duplicate":false})");
  turn_result busy;
  busy.status = 409;
  busy.error = "run_active";
  busy.message = "a run is active";
  busy.active_run_id = "run-0";
  r = turn_reply(busy);
  EXPECT_EQ(r.status, 409);
  EXPECT_FALSE(r.no_store);
  EXPECT_FALSE(r.retry_after);
  EXPECT_EQ(r.body, R"({"error":{"class":"validation_error","code":)"
                    R"("run_active","message":"a run is active","details":)"
                    R"([{"active_run_id":"run-0"}]}})");
  busy.status = 429;
  busy.active_run_id.clear();
  r = turn_reply(busy);
  EXPECT_TRUE(r.retry_after);
  EXPECT_NE(r.body.find(R"("class":"overload_rejected")"), std::string::npos);
  EXPECT_NE(r.body.find(R"("details":[])"), std::string::npos);
  busy.status = 503;
  EXPECT_NE(turn_reply(busy).body.find(R"("class":"target_unavailable")"),
            std::string::npos);
  busy.status = 500;
  EXPECT_NE(turn_reply(busy).body.find(R"("class":"internal_error")"),
            std::string::npos);
}

TEST(HttpReply, AReadAnswersTheDocumentOrWhatIsMissing) {
  auto r = read_reply(named_result{true, {{R"({"a":1})"}}},
                      butlers_errc::not_found, "no request x");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.no_store);
  EXPECT_EQ(r.body, R"({"a":1})");
  r = read_reply(named_result{true, {}}, butlers_errc::not_found,
                 "no request x");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find(R"("message":"no request x")"), std::string::npos);
  r = read_reply(named_result{false, {{"x"}}}, butlers_errc::internal_error,
                 "transcript query failed");
  EXPECT_EQ(r.status, 500);
}

TEST(HttpReply, EventStreamsGreetAndRefuseByName) {
  EXPECT_EQ(stream_greeting(""), ": summary stream\n\n");
  EXPECT_EQ(stream_greeting("t-1"), ": thread stream t-1\n\n");
  EXPECT_EQ(no_streams_reply().status, 503);
  EXPECT_EQ(too_many_streams_reply().status, 429);
  EXPECT_NE(too_many_streams_reply().body.find(
              "threads.max_subscribers event streams are open"),
            std::string::npos);
  EXPECT_EQ(stream_overload_frame(),
            sse_frame("error", R"({"code":"overload_rejected"})"));
}

TEST(HttpReply, ReasonPhrasesCoverEveryStatusWeAnswer) {
  EXPECT_STREQ(reason_phrase(200), "OK");
  EXPECT_STREQ(reason_phrase(202), "Accepted");
  EXPECT_STREQ(reason_phrase(413), "Payload Too Large");
  EXPECT_STREQ(reason_phrase(504), "Gateway Timeout");
  EXPECT_STREQ(reason_phrase(500), "Internal Server Error");
}

TEST(HttpReply, ABodyOverTheLimitNamesItAndClosesTheConnection) {
  auto r = body_over_limit_reply(3000000, 1048576);
  EXPECT_EQ(r.status, 413);
  EXPECT_TRUE(r.close_connection);
  EXPECT_NE(r.body.find("body of 3000000 bytes exceeds http.max_body_bytes "
                        "(1048576)"),
            std::string::npos)
    << r.body;
  r = body_over_limit_reply(std::nullopt, 10);
  EXPECT_NE(r.body.find("body without a length exceeds http.max_body_bytes "
                        "(10)"),
            std::string::npos)
    << r.body;
  EXPECT_FALSE(ingest_too_large_reply(20, 10).close_connection);
}

} // namespace
} // namespace butlers
