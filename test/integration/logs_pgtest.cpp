// Log correlation end to end (spec 001 §12.4): a real node writing its JSON
// log, the real PostgreSQL and real HTTP. The lines about one errored
// request carry `request_id`, `source`, `destination_butler`,
// `lifecycle_state`, `error_class`, stage latencies and the `trace_id` of
// the request's trace, so logs, traces and the stored lifecycle join.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

const std::string envelope_trace = "0af7651916cd43dd8448eb211c80319c";
const std::string envelope_tp = "00-" + envelope_trace + "-b7ad6b7169203331-01";

std::string ingest_body(const std::string& key, const std::string& text,
                        const std::string& traceparent) {
  std::string control = R"({"idempotency_key":")" + key + '"';
  if (!traceparent.empty())
    control += R"(,"trace_context":{"traceparent":")" + traceparent + "\"}";
  control += '}';
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(},"control":)" + control + "}";
}

/// The node's log lines (JSON objects) whose `request_id` is `id`.
std::vector<rapidjson::Document> lines_of(const std::string& log,
                                          const std::string& id) {
  std::vector<rapidjson::Document> out;
  size_t pos = 0;
  while (pos < log.size()) {
    auto nl = log.find('\n', pos);
    if (nl == std::string::npos)
      nl = log.size();
    rapidjson::Document d;
    if (!json::parse(std::string_view{log}.substr(pos, nl - pos), d)
        && d.IsObject() && d.HasMember("request_id")
        && d["request_id"].IsString() && d["request_id"].GetString() == id)
      out.push_back(std::move(d));
    pos = nl + 1;
  }
  return out;
}

std::string str(const rapidjson::Value& d, const char* key) {
  if (!d.IsObject() || !d.HasMember(key) || !d[key].IsString())
    return "<missing>";
  return d[key].GetString();
}

const rapidjson::Document* line_with_msg(
  const std::vector<rapidjson::Document>& lines, const std::string& prefix) {
  for (auto& d : lines)
    if (str(d, "msg").rfind(prefix, 0) == 0)
      return &d;
  return nullptr;
}

class Logs : public node_fixture {
 protected:
  void start() {
    use_database("logs");
    use_files("logs");
    ASSERT_TRUE(start_node(
      node_head("logs-test", 5)
      + "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n"
        "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
        "[butler.runtime]\nturn_ms = 5\nfail_rate = 1.0\n"
        "fail_class = \"validation_error\"\n"
        "[messenger]\n[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
      + dir_ + "/outbox.jsonl\"\n"));
  }

  std::string ingest(const std::string& key, const std::string& text,
                     const std::string& traceparent) {
    auto r = http_->post("/v1/ingest", ingest_body(key, text, traceparent));
    EXPECT_EQ(r.status, 202) << r.body;
    rapidjson::Document d;
    json::parse(r.body, d);
    return d.IsObject() && d.HasMember("request_id")
             ? d["request_id"].GetString()
             : std::string{};
  }

  /// Waits until request `id` is stored as `state`.
  bool reaches(const std::string& id, const std::string& state) {
    return eventually(
      [&] {
        auto r = http_->get("/v1/requests/" + id);
        rapidjson::Document d;
        return r.status == 200 && !json::parse(r.body, d) && d.IsObject()
               && str(d, "lifecycle_state") == state;
      },
      30s);
  }
};

TEST_F(Logs, LinesOfAnErroredRequestCarryItsFieldsAndTraceId) {
  start();
  auto id = ingest("logs-1", "I took my pill late.", envelope_tp);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(reaches(id, "errored")) << node_->log();
  auto lines = lines_of(node_->log(), id);
  ASSERT_GE(lines.size(), 2u) << node_->log();
  // Every line about the request names its source and its trace: the
  // envelope's trace id, as the request's trace has it.
  for (auto& d : lines) {
    SCOPED_TRACE(str(d, "msg"));
    EXPECT_EQ(str(d, "source"), "api");
    // Known gap: notify.v1 carries no trace context, so the messenger's
    // delivery of the error reply logs the id derived from the request id.
    if (str(d, "destination_butler") == "messenger")
      continue;
    EXPECT_EQ(str(d, "trace_id"), envelope_trace);
    EXPECT_EQ(str(d, "node"), "logs-test");
  }
  // The butler's line: destination, its work item's state, error class,
  // queue wait and session latencies.
  auto* work = line_with_msg(lines, "butler health: work ");
  ASSERT_NE(work, nullptr) << node_->log();
  EXPECT_EQ(str(*work, "destination_butler"), "health");
  EXPECT_EQ(str(*work, "lifecycle_state"), "error");
  EXPECT_EQ(str(*work, "error_class"), "validation_error");
  EXPECT_EQ(str(*work, "level"), "warning");
  EXPECT_TRUE((*work)["queue_wait_ms"].IsInt64());
  EXPECT_TRUE((*work)["session_ms"].IsInt64());
  EXPECT_GE((*work)["session_ms"].GetInt64(), 0);
  EXPECT_NE(str(*work, "work_id"), "<missing>");
  // The switchboard's terminal line: the stored lifecycle state and class,
  // and the time from receipt to the end.
  auto* done = line_with_msg(lines, "request " + id + ": errored");
  ASSERT_NE(done, nullptr) << node_->log();
  EXPECT_EQ(str(*done, "lifecycle_state"), "errored");
  EXPECT_EQ(str(*done, "error_class"), "validation_error");
  ASSERT_TRUE((*done)["total_ms"].IsInt64());
  EXPECT_GE((*done)["total_ms"].GetInt64(), 0);
  // A plain line (about no request) has none of these fields.
  auto log = node_->log();
  auto first = log.substr(0, log.find('\n'));
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(first, d)) << first;
  EXPECT_FALSE(d.HasMember("request_id")) << first;
}

} // namespace
} // namespace butlers::test
