// Traces across cluster nodes (spec 001 §12.3, spec 000 §4.4): two real
// `butlers-node` processes sharing the test PostgreSQL and one fake OTLP
// receiver. A request with an envelope traceparent is routed by the
// switchboard on node-s to a butler that only node-b hosts; the receiver
// gets node-s's trace (continuing the envelope's) with its dispatch span,
// and node-b's trace of the work item: its root linked to that dispatch
// span, the same request id, the queue wait and the `invoke_agent` span
// with the GenAI attributes the scripted runtime's synthetic usage gives.

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/cluster_harness.hpp"
#include "test/support/fake_otlp_receiver.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

const std::string envelope_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string envelope_span = "00f067aa0ba902b7";
const std::string envelope_state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

std::string ingest_body(const std::string& key, const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(},"control":{"idempotency_key":")" + key
         + R"(","trace_context":{"traceparent":"00-)" + envelope_trace + "-"
         + envelope_span + R"(-01","tracestate":")" + envelope_state
         + R"("}}})";
}

/// Every node knows the health butler (scripted, reporting a model and
/// synthetic tokens); spans go to `otlp` in small, quick batches.
std::string common(const std::string& dir, const std::string& otlp) {
  return "[telemetry]\notlp_endpoint = \"" + otlp
         + "\"\nbatch_interval_ms = 50\n"
           "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n"
           "route_timeout_s = 5\n"
           "[messenger]\n[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
         + dir
         + "/outbox.jsonl\"\n"
           "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
           "[butler.runtime]\nturn_ms = 5\nmodel = \"scripted-model-1\"\n"
           "input_tokens = 12\ntokens_per_turn = 3\n";
}

cluster_node_spec spec(std::string name, bool switchboard,
                       std::vector<std::string> butlers,
                       std::vector<std::string> peers) {
  cluster_node_spec out;
  out.name = std::move(name);
  out.switchboard = switchboard;
  out.butlers = std::move(butlers);
  out.peers = std::move(peers);
  out.cluster_extra = "heartbeat_interval_ms = 200\n";
  return out;
}

const otlp_span* find_span(const std::vector<otlp_span>& spans,
                           const std::string& name,
                           const std::string& request_id) {
  // The messenger (on node-s) runs a work item of the same request too:
  // the butler spans wanted here are health's.
  for (auto& s : spans)
    if (s.name == name && s.attr("request.id") == request_id
        && (!s.has("butler.name") || s.attr("butler.name") == "health"))
      return &s;
  return nullptr;
}

std::vector<const otlp_span*> of_trace(const std::vector<otlp_span>& spans,
                                       const std::string& trace_id) {
  std::vector<const otlp_span*> out;
  for (auto& s : spans)
    if (s.trace_id == trace_id)
      out.push_back(&s);
  return out;
}

std::string resource(const otlp_span& s, const std::string& key) {
  auto i = s.resource.find(key);
  return i == s.resource.end() ? "<absent>" : i->second.text;
}

/// Every span of `trace` has a parent in the trace, except its root whose
/// parent is `root_parent` ("" for none).
void expect_parents_consistent(const std::vector<const otlp_span*>& trace,
                               const std::string& root_parent) {
  std::set<std::string> ids;
  for (auto* s : trace)
    ids.insert(s->span_id);
  EXPECT_EQ(ids.size(), trace.size()) << "span ids are unique";
  size_t roots = 0;
  for (auto* s : trace) {
    SCOPED_TRACE(s->name);
    if (s->parent_span_id == root_parent) {
      ++roots;
      continue;
    }
    EXPECT_EQ(ids.count(s->parent_span_id), 1u)
      << "parent " << s->parent_span_id << " is in the trace";
  }
  EXPECT_EQ(roots, 1u);
}

TEST(TracingCluster, ButlerOnAnotherNodeLinksItsTraceToTheDispatch) {
  fake_otlp_receiver otlp;
  auto url = fresh_database("tracing_cluster");
  auto dir = make_temp_dir("tracing-cluster");
  cluster_harness h{url, common(dir, otlp.endpoint())};
  auto sb = h.add(spec("node-s", true, {}, {}));
  auto b = h.add(spec("node-b", false, {"health"}, {"node-s"}));
  std::string why;
  ASSERT_TRUE(h.start_all(&why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"health", "node-b"}] == "active";
    },
    20s))
    << h.log(sb) << h.log(b);
  auto r = h.http(sb).post("/v1/ingest",
                           ingest_body("trace-1", "I took my pill at noon"));
  ASSERT_EQ(r.status, 202) << r.body;
  rapidjson::Document d;
  ASSERT_FALSE(json::parse(r.body, d));
  std::string id = d["request_id"].GetString();
  ASSERT_TRUE(eventually(
    [&] {
      auto q = h.http(sb).get("/v1/requests/" + id);
      return q.status == 200 && !json::parse(q.body, d)
             && std::string{d["lifecycle_state"].GetString()} == "parsed";
    },
    30s))
    << h.log(sb) << h.log(b);

  // Both traces arrive: node-s's root and node-b's agent span.
  auto spans = otlp.wait_for(
    [&](const std::vector<otlp_span>& got) {
      return find_span(got, "butlers.switchboard.message", id) != nullptr
             && find_span(got, "invoke_agent health", id) != nullptr
             && find_span(got, "butlers.butler.route.process", id) != nullptr;
    },
    20s);
  auto* root = find_span(spans, "butlers.switchboard.message", id);
  auto* dispatch = find_span(spans, "butlers.switchboard.route.dispatch", id);
  auto* broot = find_span(spans, "butlers.butler.route.process", id);
  auto* wait = find_span(spans, "butlers.butler.queue_wait", id);
  auto* agent = find_span(spans, "invoke_agent health", id);
  ASSERT_NE(root, nullptr) << h.log(sb);
  ASSERT_NE(dispatch, nullptr) << h.log(sb);
  ASSERT_NE(broot, nullptr) << h.log(b);
  ASSERT_NE(wait, nullptr) << h.log(b);
  ASSERT_NE(agent, nullptr) << h.log(b);

  // node-s: the envelope's trace, its root a child of the envelope's span,
  // the dispatch to health in it.
  EXPECT_EQ(root->trace_id, envelope_trace);
  EXPECT_EQ(root->parent_span_id, envelope_span);
  EXPECT_EQ(resource(*root, "service.instance.id"), "node-s");
  EXPECT_EQ(resource(*root, "service.name"), "butlers");
  EXPECT_EQ(dispatch->trace_id, envelope_trace);
  EXPECT_EQ(root->trace_state, envelope_state);
  EXPECT_EQ(dispatch->trace_state, envelope_state);
  EXPECT_EQ(dispatch->parent_span_id, root->span_id);
  EXPECT_EQ(dispatch->attr("routing.destination_butler"), "health");
  auto strace = of_trace(spans, envelope_trace);
  EXPECT_GE(strace.size(), 3u);
  expect_parents_consistent(strace, envelope_span);
  for (auto* s : strace)
    EXPECT_EQ(resource(*s, "service.instance.id"), "node-s") << s->name;

  // node-b: a trace of its own, linked to node-s's dispatch span.
  EXPECT_NE(broot->trace_id, envelope_trace);
  EXPECT_EQ(broot->parent_span_id, "");
  EXPECT_EQ(resource(*broot, "service.instance.id"), "node-b");
  ASSERT_EQ(broot->links.size(), 1u);
  EXPECT_EQ(broot->links[0].first, envelope_trace);
  EXPECT_EQ(broot->links[0].second, dispatch->span_id);
  ASSERT_EQ(broot->link_trace_states.size(), 1u);
  EXPECT_EQ(broot->link_trace_states[0], envelope_state)
    << "the link continues the dispatch's tracestate (route.v1)";
  EXPECT_EQ(broot->attr("butler.name"), "health");
  EXPECT_EQ(broot->attr("outcome"), "ok");
  EXPECT_NE(broot->attr("work.id"), "<absent>");
  EXPECT_EQ(wait->trace_id, broot->trace_id);
  EXPECT_EQ(wait->parent_span_id, broot->span_id);
  EXPECT_EQ(agent->trace_id, broot->trace_id);
  EXPECT_EQ(agent->parent_span_id, broot->span_id);
  EXPECT_EQ(agent->attr("gen_ai.operation.name"), "invoke_agent");
  EXPECT_EQ(agent->attr("gen_ai.agent.name"), "health");
  EXPECT_EQ(agent->attr("gen_ai.request.model"), "scripted-model-1");
  EXPECT_EQ(agent->attr("gen_ai.response.model"), "scripted-model-1");
  EXPECT_EQ(agent->attr("gen_ai.usage.input_tokens"), "12");
  EXPECT_EQ(agent->attr("gen_ai.usage.output_tokens"), "3");
  auto btrace = of_trace(spans, broot->trace_id);
  EXPECT_EQ(btrace.size(), 3u);
  expect_parents_consistent(btrace, "");
  for (auto* s : btrace) {
    EXPECT_EQ(resource(*s, "service.instance.id"), "node-b") << s->name;
    EXPECT_EQ(s->attr("request.id"), id) << s->name;
  }
}

} // namespace
} // namespace butlers::test
