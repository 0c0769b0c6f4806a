#include <string>

#include <gtest/gtest.h>

#include "runtime/butler_trace.hpp"

namespace butlers {
namespace {

const char* dispatch_tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                          "00f067aa0ba902b7-01";

work_run_record routed_run() {
  work_run_record r;
  r.node = "node-b";
  r.butler = "health";
  r.work_id = "w-1";
  r.request_id = "r-1";
  r.subrequest_id = "s-1";
  r.segment_id = "seg-1";
  r.trigger_source = "route";
  r.traceparent = dispatch_tp;
  r.attempt = 0;
  r.lease_token = 7;
  r.provider = "scripted";
  r.request_model = "scripted-1";
  r.accepted_ns = 1'000'000'000;
  r.started_ns = 1'200'000'000;
  r.ended_ns = 1'500'000'000;
  r.state = "ok";
  r.usage.model = "scripted-1";
  r.usage.input_tokens = 11;
  r.usage.output_tokens = 5;
  r.usage.calls = 1;
  return r;
}

const attribute_value* find_attr(const span& s, const std::string& key) {
  for (auto& a : s.attributes)
    if (a.key == key)
      return &a.value;
  return nullptr;
}

std::string str_attr(const span& s, const std::string& key) {
  auto* v = find_attr(s, key);
  if (v == nullptr || !std::holds_alternative<std::string>(*v))
    return "<missing>";
  return std::get<std::string>(*v);
}

int64_t int_attr(const span& s, const std::string& key) {
  auto* v = find_attr(s, key);
  if (v == nullptr || !std::holds_alternative<int64_t>(*v))
    return -1;
  return std::get<int64_t>(*v);
}

} // namespace

TEST(butler_trace, a_routed_run_is_a_trace_linked_to_its_dispatch) {
  auto spans = butler_spans(routed_run(), 0.0);
  ASSERT_EQ(spans.size(), 3u);
  auto& root = spans[0];
  auto& wait = spans[1];
  auto& agent = spans[2];
  EXPECT_EQ(root.name, "butlers.butler.route.process");
  EXPECT_EQ(root.kind, span_kind::consumer);
  EXPECT_TRUE(is_zero(root.parent));
  // Its own trace, not the dispatch's: linked to the dispatch span.
  EXPECT_NE(to_hex(root.trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  ASSERT_EQ(root.links.size(), 1u);
  EXPECT_EQ(to_hex(root.links[0].context.trace),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(root.links[0].context.span), "00f067aa0ba902b7");
  EXPECT_EQ(str_attr(root, "request.id"), "r-1");
  EXPECT_EQ(str_attr(root, "butler.name"), "health");
  EXPECT_EQ(str_attr(root, "work.id"), "w-1");
  EXPECT_EQ(str_attr(root, "outcome"), "ok");
  EXPECT_EQ(int_attr(root, "attempt"), 1);
  EXPECT_EQ(root.start_ns, 1'000'000'000u);
  EXPECT_EQ(root.end_ns, 1'500'000'000u);
  // Children of the root, in the same trace.
  EXPECT_EQ(wait.name, "butlers.butler.queue_wait");
  EXPECT_EQ(wait.trace, root.trace);
  EXPECT_EQ(wait.parent, root.id);
  EXPECT_EQ(wait.start_ns, 1'000'000'000u);
  EXPECT_EQ(wait.end_ns, 1'200'000'000u);
  EXPECT_EQ(agent.name, "invoke_agent health");
  EXPECT_EQ(agent.kind, span_kind::internal);
  EXPECT_EQ(agent.trace, root.trace);
  EXPECT_EQ(agent.parent, root.id);
  EXPECT_EQ(agent.start_ns, 1'200'000'000u);
  EXPECT_EQ(agent.end_ns, 1'500'000'000u);
  EXPECT_EQ(str_attr(agent, "gen_ai.operation.name"), "invoke_agent");
  EXPECT_EQ(str_attr(agent, "gen_ai.agent.name"), "health");
  EXPECT_EQ(str_attr(agent, "gen_ai.request.model"), "scripted-1");
  EXPECT_EQ(str_attr(agent, "gen_ai.response.model"), "scripted-1");
  EXPECT_EQ(int_attr(agent, "gen_ai.usage.input_tokens"), 11);
  EXPECT_EQ(int_attr(agent, "gen_ai.usage.output_tokens"), 5);
  EXPECT_EQ(find_attr(agent, "gen_ai.conversation.id"), nullptr);
  EXPECT_EQ(root.status, span_status::unset);
}

TEST(butler_trace, the_dispatch_decides_sampling_else_the_ratio) {
  auto r = routed_run();
  // Sampled dispatch: sampled even at ratio 0.
  EXPECT_TRUE(butler_trace_of(r, 0.0).sampled());
  r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
  EXPECT_FALSE(butler_trace_of(r, 1.0).sampled());
  EXPECT_TRUE(butler_spans(r, 1.0).empty());
  r.traceparent.clear();
  EXPECT_TRUE(butler_trace_of(r, 1.0).sampled());
  EXPECT_FALSE(butler_trace_of(r, 0.0).sampled());
}

TEST(butler_trace, ids_are_stable_per_lease_and_differ_between_leases) {
  auto r = routed_run();
  auto a = butler_trace_of(r, 1.0);
  EXPECT_EQ(butler_trace_of(r, 1.0).root.trace, a.root.trace);
  r.lease_token = 8;
  EXPECT_NE(butler_trace_of(r, 1.0).root.trace, a.root.trace);
}

TEST(butler_trace, a_failed_run_marks_root_and_agent_with_the_error_class) {
  auto r = routed_run();
  r.state = "error";
  r.error_class = "timeout";
  r.error_message = "session exceeded session_timeout_s";
  auto spans = butler_spans(r, 1.0);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].status, span_status::error);
  EXPECT_EQ(str_attr(spans[0], "error.class"), "timeout");
  EXPECT_EQ(str_attr(spans[0], "outcome"), "error");
  EXPECT_EQ(spans[2].status, span_status::error);
}

TEST(butler_trace, a_thread_run_is_rooted_at_the_run_with_the_conversation) {
  auto r = routed_run();
  r.trigger_source = "thread";
  r.traceparent.clear();
  r.conversation_id = "thread-9";
  auto spans = butler_spans(r, 1.0);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "butlers.thread.run");
  EXPECT_TRUE(spans[0].links.empty());
  EXPECT_EQ(str_attr(spans[0], "gen_ai.conversation.id"), "thread-9");
  EXPECT_EQ(str_attr(spans[2], "gen_ai.conversation.id"), "thread-9");
}

} // namespace butlers
