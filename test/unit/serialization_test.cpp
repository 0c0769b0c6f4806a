// Every message type must survive CAF's binary serializer: remote actors
// (the cluster) depend on it, and an unregistered or mis-inspected type only
// fails once it crosses a node boundary.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>
#include <gtest/gtest.h>

#include "actors/type_ids.hpp"

namespace butlers {
namespace {

struct Serialization : ::testing::Test {
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    register_types(cfg);
    return cfg;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};

  /// Serializes `x` inside a caf::message (as the middleman does) and reads
  /// it back, so the type must be registered under its name.
  template<class T>
  T round_trip(const T& x) {
    std::vector<char> buf;
    auto msg = caf::make_message(x);
    caf::binary_serializer sink{sys, buf};
    if (auto err = sink(msg))
      ADD_FAILURE() << "serialize: " << sys.render(err);
    caf::message copy;
    caf::binary_deserializer source{sys, buf};
    if (auto err = source(copy))
      ADD_FAILURE() << "deserialize: " << sys.render(err);
    if (!copy.match_elements<T>()) {
      ADD_FAILURE() << "wrong type after round trip";
      return T{};
    }
    return copy.get_as<T>(0);
  }

  request_context sample_context() {
    request_context ctx;
    ctx.request_id = "0190f3a2-7c4e-7abc-8def-0123456789ab";
    ctx.received_at_us = 1'732'000'000'123'456;
    ctx.source_channel = "telegram";
    ctx.source_endpoint_identity = "bot-1";
    ctx.source_sender_identity = "user-7";
    ctx.source_thread_identity = "chat-9";
    ctx.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-"
                       "01";
    return ctx;
  }
};

TEST_F(Serialization, RequestContext) {
  auto x = sample_context();
  EXPECT_EQ(round_trip(x), x);
}

TEST_F(Serialization, OperatorAction) {
  operator_action x;
  x.verb = operator_verb::reroute;
  x.request_id = "r-1";
  x.who = "ops";
  x.why = "wrong butler";
  x.segment_id = "seg-2";
  x.butler = "health";
  auto y = round_trip(x);
  EXPECT_EQ(y.verb, operator_verb::reroute);
  EXPECT_EQ(y.request_id, "r-1");
  EXPECT_EQ(y.who, "ops");
  EXPECT_EQ(y.why, "wrong butler");
  EXPECT_EQ(y.segment_id, "seg-2");
  EXPECT_EQ(y.butler, "health");
}

TEST_F(Serialization, DbStatus) {
  db_status x{true, true, "last: broken pipe", 42, 4200};
  auto y = round_trip(x);
  EXPECT_EQ(y.connected, x.connected);
  EXPECT_EQ(y.migrated, x.migrated);
  EXPECT_EQ(y.last_error, x.last_error);
  EXPECT_EQ(y.commits, x.commits);
  EXPECT_EQ(y.rows, x.rows);
}

TEST_F(Serialization, InboxRecord) {
  inbox_record x;
  x.context = sample_context();
  x.dedupe_key = "tg:5:bot-1:42";
  x.raw_payload = R"({"schema_version":"ingest.v1","x":"\u00e9"})";
  x.normalized_text = "héllo \n world";
  x.policy_tier = "interactive";
  x.schema_version = "ingest.v1";
  auto y = round_trip(x);
  EXPECT_EQ(y.context, x.context);
  EXPECT_EQ(y.dedupe_key, x.dedupe_key);
  EXPECT_EQ(y.raw_payload, x.raw_payload);
  EXPECT_EQ(y.normalized_text, x.normalized_text);
  EXPECT_EQ(y.policy_tier, x.policy_tier);
  EXPECT_EQ(y.schema_version, x.schema_version);
}

TEST_F(Serialization, AppendResult) {
  auto x = stored_as("0190f3a2-7c4e-7abc-8def-0123456789ab", true);
  auto y = round_trip(x);
  EXPECT_EQ(y.request_id, x.request_id);
  EXPECT_EQ(y.duplicate, x.duplicate);
  EXPECT_EQ(y.error_code, 0);
}

TEST_F(Serialization, VectorOfAppendResultsWithAnError) {
  append_result failed;
  failed.error_code = static_cast<uint8_t>(butlers_errc::database_unavailable);
  failed.error_message = "database unavailable: connection lost";
  std::vector<append_result> x{stored_as("id-1", false), failed};
  auto y = round_trip(x);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0].request_id, "id-1");
  EXPECT_EQ(y[1].error_code, failed.error_code);
  EXPECT_EQ(y[1].error_message, failed.error_message);
}

TEST_F(Serialization, VectorOfInboxRecords) {
  inbox_record r;
  r.context = sample_context();
  r.dedupe_key = "k";
  std::vector<inbox_record> x{r, r};
  auto y = round_trip(x);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[1].context, r.context);
}

TEST_F(Serialization, InboxRef) {
  inbox_ref x{"0190f3a2-7c4e-7abc-8def-0123456789ab", 1'732'000'000'123'456};
  auto y = round_trip(x);
  EXPECT_EQ(y.request_id, x.request_id);
  EXPECT_EQ(y.received_at_us, x.received_at_us);
  auto v = round_trip(std::vector<inbox_ref>{x, x});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].received_at_us, x.received_at_us);
}

TEST_F(Serialization, ClaimResult) {
  claim_result x{true, 7, {}};
  x.record.normalized_text = "take my pill";
  x.record.context.request_id = "r-9";
  auto y = round_trip(x);
  EXPECT_EQ(y.claimed, true);
  EXPECT_EQ(y.lease_token, 7);
  EXPECT_EQ(y.record.normalized_text, "take my pill");
  EXPECT_EQ(y.record.context.request_id, "r-9");
}

TEST_F(Serialization, Completion) {
  completion x{{"0190f3a2-7c4e-7abc-8def-0123456789ab", 42},
               9,
               "errored",
               "timeout",
               "no answer from health",
               R"([{"segment_id":"seg-1"}])",
               R"({"state":"errored"})"};
  auto y = round_trip(x);
  EXPECT_EQ(y.ref.request_id, x.ref.request_id);
  EXPECT_EQ(y.ref.received_at_us, 42);
  EXPECT_EQ(y.lease_token, 9);
  EXPECT_EQ(y.state, "errored");
  EXPECT_EQ(y.error_class, "timeout");
  EXPECT_EQ(y.error_message, "no answer from health");
  EXPECT_EQ(y.dispatch_outcomes, x.dispatch_outcomes);
  EXPECT_EQ(y.response_summary, x.response_summary);
}

TEST_F(Serialization, WorkItemOpAndResult) {
  work_item item{"w-1",     "health",     "r-1", "seg-1", "sub-1", "trigger",
                 "finance", R"({"x":1})", 3,     2,       1234};
  auto y = round_trip(item);
  EXPECT_EQ(y.work_id, "w-1");
  EXPECT_EQ(y.origin_butler, "finance");
  EXPECT_EQ(y.envelope, R"({"x":1})");
  EXPECT_EQ(y.lease_token, 3);
  EXPECT_EQ(y.attempts, 2);
  EXPECT_EQ(y.created_at_us, 1234);
  work_op op;
  op.kind = work_op_kind::finish;
  op.item = item;
  op.state = "ok";
  op.response = "{}";
  op.limit = 4;
  op.own = true;
  auto z = round_trip(op);
  EXPECT_EQ(z.kind, work_op_kind::finish);
  EXPECT_EQ(z.item.work_id, "w-1");
  EXPECT_EQ(z.state, "ok");
  EXPECT_EQ(z.limit, 4u);
  EXPECT_TRUE(z.own);
  work_result r{true, true, 5, {item, item}, "ok", R"({"status":"ok"})"};
  auto rr = round_trip(r);
  EXPECT_TRUE(rr.duplicate);
  EXPECT_EQ(rr.attempts, 5);
  EXPECT_EQ(rr.items.size(), 2u);
  EXPECT_EQ(rr.state, "ok");
  EXPECT_EQ(rr.response, R"({"status":"ok"})");
}

TEST_F(Serialization, RouteRequestAndResponse) {
  route_request req{"{}", "trigger", "health", {}};
  auto a = round_trip(req);
  EXPECT_EQ(a.trigger_source, "trigger");
  EXPECT_EQ(a.origin_butler, "health");
  route_response resp;
  resp.status = "error";
  resp.request_id = "r-1";
  resp.work_id = "w-1";
  resp.error_class = "timeout";
  resp.error_message = "slow";
  resp.retryable = true;
  resp.duration_ms = 12.5;
  auto b = round_trip(resp);
  EXPECT_EQ(b.status, "error");
  EXPECT_EQ(b.error_class, "timeout");
  EXPECT_TRUE(b.retryable);
  EXPECT_DOUBLE_EQ(b.duration_ms, 12.5);
}

TEST_F(Serialization, SessionTypes) {
  adapter_result ar;
  ar.ok = true;
  ar.text = "answer";
  ar.usage.input_tokens = 7;
  ar.usage.model = "m";
  EXPECT_EQ(round_trip(ar).text, "answer");
  EXPECT_EQ(round_trip(ar).usage.input_tokens, 7u);
  EXPECT_EQ(round_trip(ar).usage.model, "m");
  session_outcome out;
  out.work_id = "w-1";
  out.lease_token = 4;
  out.state = "ok";
  out.reply = "hello";
  out.response.status = "ok";
  auto o = round_trip(out);
  EXPECT_EQ(o.lease_token, 4);
  EXPECT_EQ(o.reply, "hello");
  EXPECT_EQ(o.response.status, "ok");
  butler_status st;
  st.name = "health";
  st.fenced = 3;
  EXPECT_EQ(round_trip(st).fenced, 3u);
  registry_entry e;
  e.name = "health";
  e.keywords = {"pill"};
  e.status = "stale";
  auto v = round_trip(std::vector<registry_entry>{e});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].keywords, std::vector<std::string>{"pill"});
  EXPECT_EQ(v[0].status, "stale");
}

TEST_F(Serialization, ClusterHello) {
  // Handles are null here: without a middleman there is no proxy to make;
  // the cluster tests send live ones between real nodes.
  cluster_hello h;
  h.node = "node-a";
  registry_entry e;
  e.name = "health";
  e.node = "node-a";
  h.entries = {e, e};
  h.handles = {caf::actor{}, caf::actor{}};
  auto x = round_trip(h);
  EXPECT_EQ(x.node, "node-a");
  ASSERT_EQ(x.entries.size(), 2u);
  EXPECT_EQ(x.entries[1].name, "health");
  EXPECT_EQ(x.handles.size(), 2u);
  EXPECT_FALSE(x.cluster);
  EXPECT_FALSE(x.switchboard);
}

TEST_F(Serialization, NamedStatements) {
  named_statement st{"request_replay", {"r-1", "ops", "why"}, "thread-7"};
  auto a = round_trip(st);
  EXPECT_EQ(a.query, "request_replay");
  EXPECT_EQ(a.params.size(), 3u);
  EXPECT_EQ(a.key, "thread-7");
  named_result r{true, {{"1", ""}, {"2", "x"}}};
  auto b = round_trip(r);
  EXPECT_TRUE(b.ok);
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_EQ(b.rows[1][1], "x");
}

TEST_F(Serialization, ButlersErrors) {
  caf::error x{butlers_errc::database_unavailable, std::string{"down"}};
  auto y = round_trip(x);
  EXPECT_EQ(code_of(y), butlers_errc::database_unavailable);
  EXPECT_EQ(message_of(y), "down");
}

TEST_F(Serialization, ThreadMessages) {
  thread_turn t{"t-1",    "m-1",   "hello",   "queue", "run-0",
                "health", "web:1", "model-x", 9,       R"([{"sha256":"ab"}])"};
  auto t2 = round_trip(t);
  EXPECT_EQ(t2.sender, "web:1");
  EXPECT_EQ(t2.model, "model-x");
  EXPECT_EQ(t2.max_steps, 9u);
  EXPECT_EQ(t2.attachments, t.attachments);
  EXPECT_EQ(t2.thread_id, "t-1");
  EXPECT_EQ(t2.message_id, "m-1");
  EXPECT_EQ(t2.text, "hello");
  EXPECT_EQ(t2.mode, "queue");
  EXPECT_EQ(t2.expected_run_id, "run-0");
  EXPECT_EQ(t2.butler, "health");
  turn_result r;
  r.run_id = "run-1";
  r.kind = "steer";
  r.status = 409;
  r.error = "run_changed";
  r.message = "m";
  r.active_run_id = "run-2";
  r.cursor = 42;
  r.duplicate = true;
  auto r2 = round_trip(r);
  EXPECT_EQ(r2.run_id, "run-1");
  EXPECT_EQ(r2.kind, "steer");
  EXPECT_EQ(r2.status, 409u);
  EXPECT_EQ(r2.error, "run_changed");
  EXPECT_EQ(r2.active_run_id, "run-2");
  EXPECT_EQ(r2.cursor, 42);
  EXPECT_TRUE(r2.duplicate);
  steer_input in{"m-2", "more", 1, 2, 3};
  steer_applied a{"w-1", 4, 5, {in, in}};
  auto a2 = round_trip(a);
  EXPECT_EQ(a2.work_id, "w-1");
  EXPECT_EQ(a2.turn, 4u);
  EXPECT_EQ(a2.applied_us, 5);
  ASSERT_EQ(a2.inputs.size(), 2u);
  EXPECT_EQ(a2.inputs[1].message_id, "m-2");
  EXPECT_EQ(a2.inputs[1].text, "more");
  EXPECT_EQ(a2.inputs[1].accepted_us, 1);
  EXPECT_EQ(a2.inputs[1].arrived_us, 2);
  EXPECT_EQ(a2.inputs[1].arrived_turn, 3u);
  EXPECT_EQ(round_trip(std::vector<steer_input>{in}).size(), 1u);
  thread_live live{{{"r-1", "general", "running"}},
                   {{"r-2", "general", "queued"}},
                   3};
  auto live2 = round_trip(live);
  ASSERT_EQ(live2.active.size(), 1u);
  EXPECT_EQ(live2.active[0].run_id, "r-1");
  EXPECT_EQ(live2.active[0].state, "running");
  ASSERT_EQ(live2.queued.size(), 1u);
  EXPECT_EQ(live2.queued[0].butler, "general");
  EXPECT_EQ(live2.pending_turns, 3u);
}

TEST_F(Serialization, WorkerCallAndReply) {
  worker_call c;
  c.op = static_cast<uint8_t>(worker_op::nack);
  c.work_id = "w";
  c.lease_token = "t";
  c.max = 3;
  c.visibility_ms = 500;
  c.wait_ms = 7;
  c.response = "{}";
  c.reply = "r";
  c.retryable = false;
  c.delay_ms = 9;
  c.error = "e";
  c.error_class = "timeout";
  auto c2 = round_trip(c);
  EXPECT_EQ(c2.op, c.op);
  EXPECT_EQ(c2.work_id, "w");
  EXPECT_EQ(c2.lease_token, "t");
  EXPECT_EQ(c2.max, 3u);
  EXPECT_EQ(c2.visibility_ms, 500u);
  EXPECT_EQ(c2.wait_ms, 7u);
  EXPECT_EQ(c2.response, "{}");
  EXPECT_EQ(c2.reply, "r");
  EXPECT_FALSE(c2.retryable);
  EXPECT_EQ(c2.delay_ms, 9u);
  EXPECT_EQ(c2.error, "e");
  EXPECT_EQ(c2.error_class, "timeout");
  worker_reply r{5, "m", "b"};
  auto r2 = round_trip(r);
  EXPECT_EQ(r2.code, 5);
  EXPECT_EQ(r2.message, "m");
  EXPECT_EQ(r2.body, "b");
}

} // namespace
} // namespace butlers
