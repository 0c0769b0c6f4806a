// Tracing against a real node, the real PostgreSQL and a fake OTLP/HTTP
// receiver on loopback (test/support/fake_otlp_receiver): the spans of one
// request, a receiver that is down, and tracing off.

#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/fake_otlp_receiver.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

constexpr auto envelope_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr auto envelope_span = "00f067aa0ba902b7";
// The W3C spec's example of two tracing systems' entries.
constexpr auto envelope_state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

/// An ingest.v1 body with a W3C traceparent and tracestate in
/// control.trace_context.
std::string envelope(const std::string& key, bool with_traceparent) {
  std::string control = R"({"idempotency_key":")" + key + R"(")";
  if (with_traceparent)
    control += R"(,"trace_context":{"traceparent":"00-)"
               + std::string{envelope_trace} + "-" + envelope_span
               + R"(-01","tracestate":")" + envelope_state + R"("})";
  control += "}";
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{"k":")"
         + key + R"("},"normalized_text":"what is on my calendar"},)"
         + R"("control":)" + control + "}";
}

/// Reads one sample (`name` or `name{labels}`) from Prometheus text; -1
/// when absent.
double metric(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos)
    return -1;
  return std::stod(text.substr(pos + series.size() + 2));
}

std::string request_id_of(const http_response& r) {
  auto pos = r.body.find(R"("request_id":")");
  return pos == std::string::npos ? std::string{} : r.body.substr(pos + 14, 36);
}

const otlp_span* named(const std::vector<otlp_span>& spans,
                       const std::string& suffix) {
  for (auto& s : spans)
    if (s.name == "butlers.switchboard." + suffix)
      return &s;
  return nullptr;
}

class Tracing : public node_fixture {
 protected:
  /// Starts a node whose messages all go to a scripted `general`, with
  /// `telemetry` as its [telemetry] table ("" = none).
  void start(const std::string& telemetry) {
    use_database("tracing");
    use_files("tracing_outbox");
    ASSERT_TRUE(start_node(
      node_head("trace-node", 10) + telemetry
      + "[[butler]]\nname = \"general\"\n[butler.runtime]\nturn_ms = 0\n"
        "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
      + dir_ + "/outbox.jsonl\"\n"));
  }

  void TearDown() override {
    if (node_) {
      auto exit = stop_node();
      EXPECT_TRUE(exit) << "node did not exit after SIGTERM";
      if (exit) {
        EXPECT_EQ(exit->exit_code, 0) << exit->err;
      }
      node_.reset();
    }
    node_fixture::TearDown();
  }

  int64_t parsed() {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}
      .exec1("SELECT count(*) FROM message_inbox WHERE lifecycle_state = "
             "'parsed'")[0]
      .as<int64_t>();
  }

  std::string ingest(const std::string& key, bool with_traceparent) {
    auto r = http_->post("/v1/ingest", envelope(key, with_traceparent));
    EXPECT_EQ(r.status, 202) << r.body << r.error;
    return request_id_of(r);
  }
};

std::string telemetry_for(const std::string& endpoint) {
  return "[telemetry]\notlp_endpoint = \"" + endpoint
         + "\"\nbatch_interval_ms = 50\nexport_timeout_ms = 1000\n";
}

TEST_F(Tracing, OneRequestIsOneTraceUnderTheEnvelopesTraceparent) {
  fake_otlp_receiver receiver;
  start(telemetry_for(receiver.endpoint()));
  auto id = ingest("trace-1", true);
  ASSERT_EQ(id.size(), 36u);
  // The root is recorded once the terminal transition is written.
  auto spans = receiver.wait_for(
    [](auto& xs) {
      return named(xs, "message") != nullptr;
    },
    20s);
  auto root = named(spans, "message");
  ASSERT_NE(root, nullptr) << "spans received: " << spans.size();
  EXPECT_EQ(root->trace_id, envelope_trace);
  EXPECT_EQ(root->parent_span_id, envelope_span);
  EXPECT_EQ(root->trace_state, envelope_state) << "the envelope's tracestate";
  EXPECT_EQ(root->kind, 2) << "SPAN_KIND_SERVER";
  EXPECT_EQ(root->attr("request.id"), id);
  EXPECT_EQ(root->attr("request.source_channel"), "api");
  EXPECT_EQ(root->attr("request.source_endpoint_identity"), "tests");
  EXPECT_TRUE(root->has("request.source_thread_identity"));
  EXPECT_EQ(root->attr("request.schema_version"), "ingest.v1");
  EXPECT_NE(root->attr("request.received_at").find("T"), std::string::npos);
  EXPECT_TRUE(root->has("switchboard.policy_tier"));
  EXPECT_EQ(root->attr("switchboard.prompt_version"), "none");
  EXPECT_EQ(root->attr("switchboard.model_family"), "rules");
  EXPECT_EQ(root->attr("lifecycle.state"), "parsed");
  EXPECT_EQ(root->resource.at("service.name").text, "butlers");
  EXPECT_EQ(root->resource.at("service.instance.id").text, "trace-node");
  for (auto name :
       {"ingress.normalize", "ingress.dedupe", "routing.rules_decision",
        "routing.plan_fanout", "route.dispatch", "route.aggregate",
        "lifecycle.signal", "persistence.write"}) {
    auto s = named(spans, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->trace_id, envelope_trace) << name;
    EXPECT_EQ(s->parent_span_id, root->span_id) << name;
    EXPECT_EQ(s->trace_state, envelope_state) << name;
    EXPECT_EQ(s->attr("request.id"), id) << name;
    EXPECT_LE(std::stoull(s->start_ns), std::stoull(s->end_ns)) << name;
  }
  auto dispatch = named(spans, "route.dispatch");
  EXPECT_EQ(dispatch->attr("routing.destination_butler"), "general");
  EXPECT_EQ(dispatch->attr("routing.attempt"), "1");
  EXPECT_EQ(dispatch->attr("routing.outcome"), "ok");
  EXPECT_TRUE(dispatch->has("routing.segment_id"));
  EXPECT_TRUE(dispatch->has("routing.fanout_mode"));
  EXPECT_FALSE(dispatch->has("error.class"));
  // Stored with the request (the inbox's trace_state column).
  auto inspected = http_->get("/v1/requests/" + id);
  ASSERT_EQ(inspected.status, 200) << inspected.body;
  EXPECT_NE(inspected.body.find(R"("trace_state": ")"
                                + std::string{envelope_state} + "\""),
            std::string::npos)
    << inspected.body;
  // Three writes: the inbox append, the plan, the terminal transition.
  int writes = 0;
  for (auto& s : spans)
    writes += s.name == "butlers.switchboard.persistence.write" ? 1 : 0;
  EXPECT_EQ(writes, 3);
  EXPECT_TRUE(eventually(
    [&] {
      return metric(http_->get("/metrics").body,
                    "butlers_trace_spans_exported_total")
             >= 12;
    },
    10s))
    << http_->get("/metrics").body;
}

TEST_F(Tracing, WithTheReceiverDownRequestsCompleteAndDropsAreCounted) {
  start(telemetry_for("http://127.0.0.1:"
                      + std::to_string(fake_otlp_receiver::closed_port())));
  for (int i = 0; i < 3; ++i)
    ingest("down-" + std::to_string(i), i == 0);
  EXPECT_TRUE(eventually(
    [&] {
      return parsed() == 3;
    },
    20s));
  EXPECT_TRUE(eventually(
    [&] {
      return metric(
               http_->get("/metrics").body,
               R"(butlers_trace_spans_dropped_total{reason="export_failed"})")
             > 0;
    },
    20s))
    << http_->get("/metrics").body;
  EXPECT_EQ(metric(http_->get("/metrics").body,
                   "butlers_trace_spans_exported_total"),
            0);
}

TEST_F(Tracing, WithoutAnEndpointNothingIsExportedOrCounted) {
  fake_otlp_receiver receiver; // running, but nobody is told about it
  start("");
  ingest("off-1", true);
  EXPECT_TRUE(eventually(
    [&] {
      return parsed() == 1;
    },
    20s));
  auto m = http_->get("/metrics").body;
  EXPECT_EQ(m.find("butlers_trace_spans"), std::string::npos) << m;
  EXPECT_TRUE(receiver.requests().empty());
}

} // namespace
} // namespace butlers::test
