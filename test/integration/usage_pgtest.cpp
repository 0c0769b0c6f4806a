// Tokens, cost and budgets against a real node process, real PostgreSQL and
// real HTTP over loopback, with the scripted runtime's synthetic usage
// (runtime keys model, input_tokens, tokens_per_turn, cost_per_turn_usd,
// stream_reply): usage stored per session and shown by GET
// /v1/requests/{id} and /metrics; a per-request budget stopping a run that
// streams past it; the daily budget refusing the next request before its
// session starts; and a thread subscriber receiving `delta` events while a
// reply is streamed, then the transcript entry.

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"
#include "test/support/sse_client.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string ingest_body(const std::string& key, const std::string& sender,
                        const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":")"
         + sender + R"("},"payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(},"control":{"idempotency_key":")" + key
         + R"("}})";
}

std::string str(const rapidjson::Value& v, const char* key) {
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsString() ? i->value.GetString()
                                                   : std::string{};
}

int64_t num(const rapidjson::Value& v, const char* key) {
  auto i = v.FindMember(key);
  return i != v.MemberEnd() && i->value.IsNumber() ? i->value.GetInt64() : -1;
}

class Usage : public node_fixture {
 protected:
  /// Starts a node whose only specialist is `general`, scripted with
  /// `runtime` (keys of [butler.runtime]), and `extra` (e.g. budgets).
  void start(const std::string& runtime, const std::string& extra = {}) {
    use_database("usage");
    use_files("usage");
    ASSERT_TRUE(start_node(
      node_head("usage-test", 5, "request_timeout_ms = 10000\n")
      + "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n" + extra
      + "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
        "[butler.runtime]\n"
      + runtime + "[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir_
      + "/outbox.jsonl\"\n"));
  }

  /// Ingests `text` from `sender`; returns the request id.
  std::string ingest(const std::string& text,
                     const std::string& sender = "user-1") {
    auto key = "k-" + std::to_string(++seq_);
    auto r = http_->post("/v1/ingest", ingest_body(key, sender, text));
    EXPECT_EQ(r.status, 202) << r.body;
    rapidjson::Document d;
    json::parse(r.body, d);
    return d.IsObject() ? str(d, "request_id") : std::string{};
  }

  /// GET /v1/requests/{id} once it is terminal and every work item of it
  /// finished; an empty object on timeout.
  rapidjson::Document terminal(const std::string& id) {
    rapidjson::Document d;
    eventually(
      [&] {
        auto r = http_->get("/v1/requests/" + id);
        if (r.status != 200 || json::parse(r.body, d) || !d.IsObject())
          return false;
        auto state = str(d, "lifecycle_state");
        if (state != "parsed" && state != "errored")
          return false;
        for (auto& w : d["work_items"].GetArray())
          if (str(w, "state") == "queued" || str(w, "state") == "running")
            return false;
        return true;
      },
      30s);
    if (!d.IsObject() || !d.HasMember("work_items"))
      d.SetObject();
    return d;
  }

  /// The work item of `butler` in an inspected request (null object when
  /// none).
  static const rapidjson::Value& work_of(const rapidjson::Value& d,
                                         const std::string& butler) {
    static rapidjson::Value none{rapidjson::kObjectType};
    if (!d.HasMember("work_items"))
      return none;
    for (auto& w : d["work_items"].GetArray())
      if (str(w, "butler") == butler)
        return w;
    return none;
  }

  /// A series' value from /metrics (-1 when absent).
  double metric(const std::string& series) {
    auto text = http_->get("/metrics").body;
    auto pos = text.find("\n" + series + " ");
    return pos == std::string::npos
             ? -1
             : std::stod(text.substr(pos + series.size() + 2));
  }

  int64_t scalar(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec1(sql);
    return r[0].is_null() ? -1 : r[0].as<int64_t>();
  }

  std::string outbox() {
    std::ifstream in{dir_ + "/outbox.jsonl"};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  int seq_ = 0;
};

TEST_F(Usage, UsageIsStoredPerSessionAndShownByRequestsAndMetrics) {
  start("turn_ms = 5\nturns = 3\nmodel = \"scripted-large\"\n"
        "input_tokens = 10\ntokens_per_turn = 20\n"
        "cost_per_turn_usd = 0.001\n");
  auto id = ingest("hello there");
  ASSERT_FALSE(id.empty());
  auto d = terminal(id);
  ASSERT_EQ(str(d, "lifecycle_state"), "parsed");
  auto& w = work_of(d, "general");
  ASSERT_TRUE(w.HasMember("usage") && w["usage"].IsObject());
  EXPECT_EQ(str(w, "model"), "scripted-large");
  EXPECT_EQ(str(w, "prompt_version").size(), 16u);
  auto& u = w["usage"];
  EXPECT_EQ(num(u, "input_tokens"), 30);
  EXPECT_EQ(num(u, "output_tokens"), 60);
  EXPECT_EQ(num(u, "cache_read_tokens"), 0);
  EXPECT_EQ(num(u, "model_calls"), 3);
  ASSERT_TRUE(u["cost_usd"].IsNumber());
  EXPECT_NEAR(u["cost_usd"].GetDouble(), 0.003, 1e-9);
  // The messenger's delivery made no model call: no usage.
  auto& delivery = work_of(d, "messenger");
  ASSERT_TRUE(delivery.HasMember("usage"));
  EXPECT_TRUE(delivery["usage"].IsNull());
  // The subrequest shows its work item's usage, and the request the total.
  ASSERT_EQ(d["subrequests"].Size(), 1u);
  auto& sub = d["subrequests"][0];
  EXPECT_EQ(str(sub, "model"), "scripted-large");
  ASSERT_TRUE(sub["usage"].IsObject());
  EXPECT_EQ(num(sub["usage"], "output_tokens"), 60);
  auto& total = d["usage"];
  EXPECT_EQ(num(total, "total_tokens"), 90);
  EXPECT_EQ(num(total, "model_calls"), 3);
  ASSERT_EQ(total["models"].Size(), 1u);
  EXPECT_EQ(std::string{total["models"][0].GetString()}, "scripted-large");
  // The daily totals were added up by the same statement.
  EXPECT_EQ(scalar("SELECT output_tokens FROM usage_daily WHERE sender = "
                   "'user-1' AND butler = 'general' AND day = "
                   "(now() AT TIME ZONE 'UTC')::date"),
            60);
  EXPECT_EQ(scalar("SELECT sessions FROM usage_daily"), 1);
  std::string labels = R"({butler="general",)"
                       R"(gen_ai_response_model="scripted-large",)";
  EXPECT_EQ(metric("gen_ai_client_token_usage_count" + labels
                   + R"(gen_ai_token_type="input"})"),
            1);
  EXPECT_EQ(metric("gen_ai_client_token_usage_sum" + labels
                   + R"(gen_ai_token_type="input"})"),
            30);
  EXPECT_EQ(metric("gen_ai_client_token_usage_sum" + labels
                   + R"(gen_ai_token_type="output"})"),
            60);
  EXPECT_EQ(metric("gen_ai_client_operation_duration_seconds_count"
                   + labels.substr(0, labels.size() - 1) + "}"),
            1);
}

TEST_F(Usage, APerRequestTokenBudgetStopsARunThatStreamsPastIt) {
  start("turn_ms = 50\nturns = 10\ntokens_per_turn = 40\nmodel = \"m\"\n",
        "[[budget]]\nrequest_tokens = 100\n");
  auto id = ingest("write me a long essay");
  auto d = terminal(id);
  ASSERT_EQ(str(d, "lifecycle_state"), "errored");
  auto& w = work_of(d, "general");
  EXPECT_EQ(str(w, "state"), "error");
  EXPECT_EQ(str(w, "error_class"), "validation_error");
  // Stopped after the third turn (120 tokens > 100), not after ten.
  ASSERT_TRUE(w["usage"].IsObject());
  EXPECT_EQ(num(w["usage"], "output_tokens"), 120);
  EXPECT_EQ(num(w["usage"], "model_calls"), 3);
  ASSERT_EQ(d["subrequests"].Size(), 1u);
  auto& sub = d["subrequests"][0];
  EXPECT_EQ(num(sub, "attempts"), 1) << "a budget stop is not retried";
  EXPECT_NE(str(sub, "error_message").find("token budget of 100 per request"),
            std::string::npos)
    << str(sub, "error_message");
  EXPECT_EQ(metric(R"(butlers_budget_stopped_total{butler="general"})"), 1);
  // The user is told, through the messenger.
  EXPECT_TRUE(eventually(
    [&] {
      return outbox().find("This request was stopped: it reached its token "
                           "budget of 100 per request.")
             != std::string::npos;
    },
    10s))
    << outbox();
}

TEST_F(Usage, TheDailyBudgetRefusesTheNextRequestBeforeItStarts) {
  start("turn_ms = 5\nturns = 2\ntokens_per_turn = 25\nmodel = \"m\"\n",
        "[[budget]]\nbutlers = [\"general\"]\ndaily_tokens = 50\n");
  auto first = terminal(ingest("first question"));
  ASSERT_EQ(str(first, "lifecycle_state"), "parsed")
    << "50 tokens is at the daily budget, not past it";
  auto d = terminal(ingest("second question"));
  ASSERT_EQ(str(d, "lifecycle_state"), "errored");
  auto& w = work_of(d, "general");
  EXPECT_EQ(str(w, "error_class"), "validation_error");
  EXPECT_TRUE(w["usage"].IsNull()) << "no model call was made";
  ASSERT_EQ(d["subrequests"].Size(), 1u) << json::to_string(d);
  auto& sub = d["subrequests"][0];
  EXPECT_EQ(num(sub, "attempts"), 1);
  EXPECT_NE(str(sub, "error_message")
              .find("daily token budget of 50 per sender and butler"),
            std::string::npos)
    << json::to_string(d);
  EXPECT_EQ(
    metric(R"(butlers_budget_refused_total{butler="general",budget="daily"})"),
    1);
  // Only the first session ran its runtime.
  EXPECT_EQ(metric(R"(gen_ai_client_token_usage_count{butler="general",)"
                   R"(gen_ai_response_model="m",gen_ai_token_type="output"})"),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM route_work WHERE butler = 'general' "
                   "AND model_calls IS NOT NULL"),
            1);
  EXPECT_TRUE(eventually(
    [&] {
      return outbox().find("This request was stopped: it reached its daily "
                           "token budget of 50 per sender and butler.")
             != std::string::npos;
    },
    10s))
    << outbox();
  // The budget is per sender: another one's request runs.
  auto other = terminal(ingest("third question", "user-2"));
  EXPECT_EQ(str(other, "lifecycle_state"), "parsed");
}

TEST_F(Usage, AThreadSubscriberReceivesDeltasWhileTheReplyStreams) {
  start("turn_ms = 150\nturns = 4\nstream_reply = true\n"
        "reply = \"{prompt}: one two three four five six seven\"\n");
  sse_client events{port_, "/v1/threads/t-stream/events"};
  ASSERT_TRUE(eventually(
    [&] {
      return events.open();
    },
    10s));
  auto r = http_->post("/v1/threads/t-stream/turns",
                       R"({"message_id":"m1","text":"count"})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(eventually(
    [&] {
      return events.text().find(R"("role":"assistant")") != std::string::npos;
    },
    20s))
    << events.text();
  auto text = events.text();
  // Every delta's text, in order, is the reply.
  std::string streamed;
  size_t deltas = 0;
  size_t first_delta = std::string::npos;
  for (size_t at = text.find("event: delta\n"); at != std::string::npos;
       at = text.find("event: delta\n", at + 1)) {
    if (first_delta == std::string::npos)
      first_delta = at;
    auto data = text.find("data: ", at);
    ASSERT_NE(data, std::string::npos);
    auto end = text.find('\n', data);
    rapidjson::Document d;
    ASSERT_FALSE(json::parse(text.substr(data + 6, end - data - 6), d));
    streamed += str(d, "text");
    ++deltas;
  }
  EXPECT_GE(deltas, 2u) << text;
  EXPECT_EQ(streamed, "count: one two three four five six seven");
  auto transcript = text.find(R"("role":"assistant")");
  EXPECT_LT(first_delta, transcript)
    << "the deltas came while the reply was written, before the transcript";
}

} // namespace
} // namespace butlers::test
