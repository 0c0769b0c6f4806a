#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "runtime/metrics.hpp"
#include "runtime/switchboard_trace.hpp"
#include "runtime/tracing.hpp"
#include "test/support/fake_otlp_receiver.hpp"
#include "test/support/poll.hpp"

using namespace butlers;
using namespace std::chrono_literals;
using butlers::test::eventually;
using butlers::test::fake_otlp_receiver;
using butlers::test::otlp_span;

namespace {

// The example of the W3C Trace Context recommendation.
constexpr auto w3c_example = "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                             "00f067aa0ba902b7-01";

std::string fixture(const std::string& name) {
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR} + "/test/fixtures/otlp/"
                   + name};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

tracer_options options_for(const std::string& endpoint) {
  tracer_options o;
  o.otlp_endpoint = endpoint;
  o.batch_interval = 20ms;
  o.retry_backoff = 10ms;
  o.export_timeout = 2000ms;
  o.resource.service_instance_id = "node-a";
  return o;
}

const otlp_span* find_span(const std::vector<otlp_span>& spans,
                           const std::string& name) {
  for (auto& s : spans)
    if (s.name == name)
      return &s;
  return nullptr;
}

} // namespace

// -- traceparent -----------------------------------------------------------

TEST(Traceparent, ParsesTheW3cExample) {
  auto ctx = parse_traceparent(w3c_example);
  ASSERT_TRUE(ctx);
  EXPECT_EQ(to_hex(ctx->trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(ctx->span), "00f067aa0ba902b7");
  EXPECT_TRUE(ctx->sampled());
  EXPECT_EQ(to_traceparent(*ctx), w3c_example);
}

TEST(Traceparent, RejectsWhatTheRecommendationRejects) {
  std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  std::string span = "00f067aa0ba902b7";
  EXPECT_FALSE(parse_traceparent("ff-" + trace + "-" + span + "-01"))
    << "version ff is invalid";
  EXPECT_FALSE(
    parse_traceparent("00-" + std::string(32, '0') + "-" + span + "-01"))
    << "all-zero trace id";
  EXPECT_FALSE(
    parse_traceparent("00-" + trace + "-" + std::string(16, '0') + "-01"))
    << "all-zero span id";
  EXPECT_FALSE(
    parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-" + span + "-01"))
    << "upper-case hex";
  EXPECT_FALSE(parse_traceparent("00-" + trace + "-" + span + "-01-extra"))
    << "version 00 has exactly four fields";
  EXPECT_FALSE(parse_traceparent("00_" + trace + "-" + span + "-01"));
  EXPECT_FALSE(parse_traceparent("00-" + trace + "-" + span + "-0"));
  EXPECT_FALSE(parse_traceparent(""));
  EXPECT_FALSE(parse_traceparent("0g-" + trace + "-" + span + "-01"));
}

TEST(Traceparent, AcceptsAHigherVersionWithMoreFields) {
  auto ctx = parse_traceparent(
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-later");
  ASSERT_TRUE(ctx);
  EXPECT_FALSE(ctx->sampled());
  EXPECT_EQ(to_traceparent(*ctx),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
}

// -- ids and sampling --------------------------------------------------------

TEST(TraceIds, DerivedIdsAreStableAndDistinct) {
  auto id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  EXPECT_EQ(derive_trace_id(id), derive_trace_id(id));
  EXPECT_NE(derive_trace_id(id), derive_trace_id("another"));
  EXPECT_EQ(derive_span_id(id, "root"), derive_span_id(id, "root"));
  EXPECT_NE(derive_span_id(id, "root"), derive_span_id(id, "dispatch"));
  EXPECT_FALSE(is_zero(derive_trace_id("")));
  EXPECT_EQ(to_hex(derive_trace_id(id)).size(), 32u);
  std::set<std::string> randoms;
  for (int i = 0; i < 100; ++i)
    randoms.insert(to_hex(random_span_id()));
  EXPECT_EQ(randoms.size(), 100u);
}

TEST(RequestTrace, ContinuesTheEnvelopeTraceparent) {
  auto t = request_trace_for("req-1", w3c_example, 0.0, "congo=t61");
  EXPECT_EQ(to_hex(t.root.trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(t.parent), "00f067aa0ba902b7");
  EXPECT_EQ(t.root.span, derive_span_id("req-1", "root"));
  EXPECT_TRUE(t.sampled()) << "the sampled flag decides, not the ratio";
  EXPECT_EQ(t.root.tracestate, "congo=t61");
  auto unsampled = request_trace_for(
    "req-1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 1.0);
  EXPECT_FALSE(unsampled.sampled());
}

TEST(RequestTrace, WithoutATraceparentDerivesFromTheRequestId) {
  auto a = request_trace_for("req-2", "", 1.0);
  auto b = request_trace_for("req-2", "garbage", 1.0);
  EXPECT_EQ(a.root.trace, derive_trace_id("req-2"));
  EXPECT_TRUE(is_zero(a.parent));
  EXPECT_TRUE(a.sampled());
  EXPECT_EQ(b.root.trace, a.root.trace) << "an invalid traceparent is none";
  EXPECT_EQ(b.root.span, a.root.span);
}

TEST(Sampling, IsDeterministicPerTraceAndNearTheRatio) {
  int sampled = 0;
  for (int i = 0; i < 4000; ++i) {
    auto id = derive_trace_id("request-" + std::to_string(i));
    bool x = sampled_by_ratio(id, 0.25);
    EXPECT_EQ(x, sampled_by_ratio(id, 0.25));
    EXPECT_TRUE(sampled_by_ratio(id, 1.0));
    EXPECT_FALSE(sampled_by_ratio(id, 0.0));
    if (x) {
      EXPECT_TRUE(sampled_by_ratio(id, 0.5)) << "a higher ratio keeps it";
      ++sampled;
    }
  }
  EXPECT_GT(sampled, 800);
  EXPECT_LT(sampled, 1200);
}

// -- OTLP encoding -----------------------------------------------------------

namespace {

span fixture_span() {
  span s;
  auto ctx = parse_traceparent(w3c_example);
  s.trace = ctx->trace;
  s.id = ctx->span;
  s.parent = span_id{1, 2, 3, 4, 5, 6, 7, 8};
  s.tracestate = "congo=t61rcWkgMzE";
  s.flags = 1;
  s.name = "butlers.switchboard.route.dispatch";
  s.kind = span_kind::producer;
  s.start_ns = 1700000000000000000ull;
  s.end_ns = 1700000000500000000ull;
  s.set("request.id", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
    .set("routing.attempt", 2)
    .set("routing.confidence", 0.75)
    .set("routing.fallback", false)
    .fail("timeout", "no answer");
  auto linked = parse_traceparent(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  s.links.push_back({*linked, {{"link.kind", std::string{"request"}}}});
  return s;
}

} // namespace

TEST(OtlpJson, EncodesTheFixture) {
  otlp_resource res;
  res.service_instance_id = "node-a";
  auto text = encode_otlp_json(res, {fixture_span()});
  rapidjson::Document got;
  rapidjson::Document want;
  ASSERT_FALSE(json::parse(text, got)) << text;
  ASSERT_FALSE(json::parse(fixture("butlers_export.json"), want));
  EXPECT_TRUE(got == want) << text;
}

TEST(OtlpJson, TheFakeReceiverReadsTheUpstreamExampleAndOurs) {
  std::vector<otlp_span> spans;
  ASSERT_EQ(test::parse_otlp_json(fixture("upstream_trace.json"), spans), "");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "I'm a server span");
  EXPECT_EQ(spans[0].kind, 2);
  EXPECT_EQ(spans[0].parent_span_id, "EEE19B7EC3C1B173");
  EXPECT_EQ(spans[0].attr("my.span.attr"), "some value");
  EXPECT_EQ(spans[0].resource.at("service.name").text, "my.service");
  spans.clear();
  otlp_resource res;
  res.service_instance_id = "node-a";
  ASSERT_EQ(test::parse_otlp_json(encode_otlp_json(res, {fixture_span()}),
                                  spans),
            "");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].attr("routing.attempt"), "2");
  EXPECT_EQ(spans[0].attributes.at("routing.attempt").type, "int");
  EXPECT_EQ(spans[0].attr("routing.fallback"), "false");
  EXPECT_EQ(spans[0].status_code, 2);
  EXPECT_EQ(spans[0].links.size(), 1u);
  EXPECT_EQ(spans[0].resource.at("service.instance.id").text, "node-a");
}

TEST(OtlpProtobuf, WritesTheFieldsByTheirNumbers) {
  otlp_resource res;
  res.service_instance_id = "node-a";
  auto bin = encode_otlp_protobuf(res, {fixture_span()});
  ASSERT_GT(bin.size(), 100u);
  EXPECT_EQ(static_cast<uint8_t>(bin[0]), 0x0a) << "resource_spans = 1, LEN";
  auto s = fixture_span();
  // Span.trace_id = 1 (0x0a, 16 bytes), span_id = 2 (0x12, 8 bytes).
  std::string trace_field = std::string{"\x0a\x10"}
                            + std::string(s.trace.begin(), s.trace.end())
                            + "\x12\x08"
                            + std::string(s.id.begin(), s.id.end());
  EXPECT_NE(bin.find(trace_field), std::string::npos);
  // name = 5 (0x2a), kind = 6 (0x30) = 4, start_time = 7 (0x39, fixed64).
  auto name = std::string{"\x2a\x22"} + s.name + "\x30\x04\x39";
  EXPECT_NE(bin.find(name), std::string::npos);
  // flags = 16 (fixed32: 0x85 0x01), value 1, little endian.
  EXPECT_NE(bin.find(std::string{"\x85\x01\x01\x00\x00\x00", 6}),
            std::string::npos);
  // service.instance.id as a KeyValue with an AnyValue string_value.
  EXPECT_NE(bin.find(std::string{"\x12\x08\x0a\x06node-a"}), std::string::npos);
}

// -- the tracer --------------------------------------------------------------

TEST(Tracer, DisabledRecordsNothing) {
  tracer t;
  EXPECT_FALSE(t.enabled());
  span s;
  EXPECT_FALSE(t.record(std::move(s)));
  metrics_registry m;
  tracer off{tracer_options{}, &m};
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(m.render().find("butlers_trace_spans"), std::string::npos)
    << "tracing off counts nothing";
}

TEST(Tracer, ExportsBatchesToTheReceiver) {
  fake_otlp_receiver receiver;
  metrics_registry m;
  {
    tracer t{options_for(receiver.endpoint()), &m};
    auto tr = t.trace_for("req-3", "");
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(
        t.record(std::move(span::child_of(tr, tr.root.span, random_span_id(),
                                          "s" + std::to_string(i))
                             .end())));
    auto unsampled = request_trace_for("req-4", "", 0.0);
    EXPECT_FALSE(t.record(span::root_of(unsampled, "x")));
    auto spans = receiver.wait_for(
      [](auto& xs) {
        return xs.size() >= 3;
      },
      5s);
    ASSERT_EQ(spans.size(), 3u);
    EXPECT_EQ(spans[0].trace_id, to_hex(tr.root.trace));
    EXPECT_EQ(spans[0].parent_span_id, to_hex(tr.root.span));
    EXPECT_EQ(spans[0].resource.at("service.name").text, "butlers");
    EXPECT_EQ(spans[0].resource.at("service.instance.id").text, "node-a");
    EXPECT_TRUE(eventually(
      [&] {
        return t.exported() == 3;
      },
      5s));
  }
  auto reqs = receiver.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs[0].path, "/v1/traces");
  EXPECT_EQ(reqs[0].content_type, "application/json");
  EXPECT_NE(m.render().find("butlers_trace_spans_exported_total 3"),
            std::string::npos)
    << m.render();
}

TEST(Tracer, SendsProtobufAndTheConfiguredHeaders) {
  fake_otlp_receiver receiver;
  auto o = options_for(receiver.endpoint());
  o.encoding = otlp_encoding::protobuf;
  o.headers = parse_otlp_headers("x-api-key=secret, Authorization: Bearer t");
  ASSERT_EQ(o.headers.size(), 2u);
  EXPECT_EQ(o.headers[1].first, "Authorization");
  EXPECT_EQ(o.headers[1].second, "Bearer t");
  tracer t{o, nullptr};
  auto tr = t.trace_for("req-5", "");
  t.record(std::move(span::root_of(tr, "root").end()));
  ASSERT_TRUE(eventually(
    [&] {
      return !receiver.requests().empty();
    },
    5s));
  auto req = receiver.requests()[0];
  EXPECT_EQ(req.content_type, "application/x-protobuf");
  EXPECT_EQ(req.headers["x-api-key"], "secret");
  EXPECT_EQ(req.headers["authorization"], "Bearer t");
  EXPECT_NE(req.body.find("root"), std::string::npos);
}

TEST(Tracer, RetriesA503ThenDropsTheBatchAndCountsIt) {
  fake_otlp_receiver receiver;
  receiver.respond_with(503);
  metrics_registry m;
  auto o = options_for(receiver.endpoint());
  o.max_attempts = 2;
  tracer t{o, &m};
  auto tr = t.trace_for("req-6", "");
  t.record(std::move(span::root_of(tr, "root").end()));
  ASSERT_TRUE(eventually(
    [&] {
      return t.dropped_export_failed() == 1;
    },
    5s));
  EXPECT_EQ(receiver.requests().size(), 2u) << "one retry";
  EXPECT_EQ(t.exported(), 0u);
  EXPECT_NE(m.render().find(
              R"(butlers_trace_spans_dropped_total{reason="export_failed"} 1)"),
            std::string::npos)
    << m.render();
}

TEST(Tracer, AFullQueueDropsAndCounts) {
  metrics_registry m;
  auto o = options_for("http://127.0.0.1:"
                       + std::to_string(fake_otlp_receiver::closed_port()));
  o.queue_capacity = 4;
  o.batch_max_spans = 1000;
  o.batch_interval = 60s; // nothing leaves the queue while we fill it
  {
    tracer t{o, &m};
    auto tr = t.trace_for("req-7", "");
    int taken = 0;
    for (int i = 0; i < 10; ++i)
      taken += t.record(std::move(span::root_of(tr, "root").end())) ? 1 : 0;
    EXPECT_EQ(taken, 4);
    EXPECT_EQ(t.dropped_queue_full(), 6u);
  } // the last flush finds the receiver down: counted as export_failed
  auto text = m.render();
  EXPECT_NE(text.find(
              R"(butlers_trace_spans_dropped_total{reason="queue_full"} 6)"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find(
              R"(butlers_trace_spans_dropped_total{reason="export_failed"} 4)"),
            std::string::npos)
    << text;
}

// -- tracestate ------------------------------------------------------------

namespace {

std::vector<std::string> tracestate_fixture(const std::string& name) {
  std::ifstream in{std::string{BUTLERS_SOURCE_DIR}
                   + "/test/fixtures/tracestate/" + name};
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

/// `n` list members `k<i>=<value>`, comma separated.
std::string members(size_t n, const std::string& value) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += (i == 0 ? "k" : ",k") + std::to_string(i) + "=" + value;
  return out;
}

} // namespace

TEST(Tracestate, UsableAsTheW3CSpecDefinesIt) {
  auto valid = tracestate_fixture("valid.txt");
  auto invalid = tracestate_fixture("invalid.txt");
  ASSERT_GE(valid.size(), 5u);
  ASSERT_GE(invalid.size(), 5u);
  for (auto& s : valid)
    EXPECT_TRUE(usable_tracestate(s)) << s;
  for (auto& s : invalid)
    EXPECT_FALSE(usable_tracestate(s)) << s;
  EXPECT_FALSE(usable_tracestate("")) << "none";
  EXPECT_FALSE(usable_tracestate(" , ")) << "only empty members: none";
}

TEST(Tracestate, KeepsAtMost512BytesAnd32Members) {
  EXPECT_TRUE(usable_tracestate(members(32, "v")));
  EXPECT_FALSE(usable_tracestate(members(33, "v")));
  auto at_limit = "k=" + std::string(256, 'v') + ",l=" + std::string(251, 'v');
  ASSERT_EQ(at_limit.size(), max_tracestate_bytes);
  EXPECT_TRUE(usable_tracestate(at_limit));
  EXPECT_FALSE(usable_tracestate(at_limit + "v"));
  EXPECT_FALSE(usable_tracestate("k=" + std::string(257, 'v')))
    << "a value is at most 256 characters";
}

TEST(Tracestate, ContinuesOnlyWithItsTraceparent) {
  auto with = request_trace_for("r-1", w3c_example, 1.0, "congo=t61rcWkgMzE");
  EXPECT_EQ(with.root.tracestate, "congo=t61rcWkgMzE");
  auto child = span::child_of(with, with.root.span, random_span_id(), "x",
                              unix_nanos_now());
  EXPECT_EQ(child.context().tracestate, "congo=t61rcWkgMzE");
  auto without = request_trace_for("r-1", "", 1.0, "congo=t61rcWkgMzE");
  EXPECT_EQ(without.root.tracestate, "")
    << "W3C: no tracestate without a traceparent";
}

// -- the switchboard's spans
// ---------------------------------------------------

TEST(SwitchboardTracing, BuildsTheRequestTreeAndCarriesTheDispatchContext) {
  fake_otlp_receiver receiver;
  auto t = std::make_shared<tracer>(options_for(receiver.endpoint()), nullptr);
  switchboard_tracing sb{t, router_kind::rules, cli_family::claude, "parallel"};
  ASSERT_TRUE(sb.on());
  inbox_record rec;
  rec.context.request_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  rec.context.received_at_us = 1700000000000000;
  rec.context.source_channel = "api";
  rec.context.source_endpoint_identity = "client-1";
  rec.context.trace_parent = w3c_example;
  rec.context.trace_state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
  rec.dedupe_key = "idem:abc";
  rec.policy_tier = "default";
  rec.schema_version = "ingest.v1";
  sb.stored(&rec, rec.dedupe_key, unix_nanos_now(), 1, false);
  sb.started(rec.context.request_id);
  routing_plan plan;
  plan.router = "rules";
  plan.segments.resize(1);
  sb.planned(rec, plan, "plan_store");
  sb.fanned_out(rec.context.request_id, false);
  dispatch_order d;
  d.request_id = rec.context.request_id;
  d.segment_id = "seg-1";
  d.butler = "health";
  d.envelope.segment_id = "seg-1:a1";
  d.envelope.fanout_mode = "parallel";
  d.envelope.trace_parent = w3c_example;
  sb.dispatching(d);
  auto carried = parse_traceparent(d.envelope.trace_parent);
  ASSERT_TRUE(carried) << d.envelope.trace_parent;
  EXPECT_EQ(to_hex(carried->trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(d.envelope.trace_state, rec.context.trace_state)
    << "the butler continues the envelope's tracestate";
  route_response r;
  r.status = "ok";
  r.request_id = rec.context.request_id;
  r.segment_id = "seg-1:a1";
  sb.outcome(r);
  finished_request f;
  f.context = rec.context;
  f.done.state = "parsed";
  sb.finished(f, false);
  sb.handed_over(rec.context.request_id, true);
  sb.completed(rec.context.request_id, true);
  EXPECT_EQ(sb.size(), 0u);
  auto spans = receiver.wait_for(
    [](auto& xs) {
      return xs.size() >= 12;
    },
    5s);
  ASSERT_EQ(spans.size(), 12u);
  auto root = find_span(spans, "butlers.switchboard.message");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->parent_span_id, "00f067aa0ba902b7");
  EXPECT_EQ(root->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(root->attr("request.source_channel"), "api");
  EXPECT_EQ(root->attr("switchboard.model_family"), "rules");
  for (auto& s : spans) {
    EXPECT_EQ(s.trace_id, root->trace_id) << s.name;
    EXPECT_EQ(s.trace_state, rec.context.trace_state) << s.name;
    if (&s != root) {
      EXPECT_EQ(s.parent_span_id, root->span_id) << s.name;
    }
  }
  auto dispatch = find_span(spans, "butlers.switchboard.route.dispatch");
  ASSERT_NE(dispatch, nullptr);
  EXPECT_EQ(dispatch->span_id, to_hex(carried->span));
  EXPECT_EQ(dispatch->attr("routing.destination_butler"), "health");
  EXPECT_EQ(dispatch->attr("routing.attempt"), "1");
  EXPECT_EQ(dispatch->attr("routing.outcome"), "ok");
  EXPECT_FALSE(dispatch->has("error.class"));
  for (auto name : {"ingress.normalize", "ingress.dedupe",
                    "routing.rules_decision", "routing.plan_fanout",
                    "route.aggregate", "lifecycle.signal", "persistence.write"})
    EXPECT_NE(find_span(spans, "butlers.switchboard." + std::string{name}),
              nullptr)
      << name;
}
