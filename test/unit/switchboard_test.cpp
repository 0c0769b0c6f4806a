// The switchboard's admission, hot path and cold-path intake, driven
// deterministically (CAF's test_coordinator: nothing runs until the test
// says so) against a fake inbox writer that implements the same typed
// interface as the real one.

#include <algorithm>
#include <memory>
#include <vector>

#include <caf/after.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "actors/switchboard.hpp"
#include "runtime/json.hpp"
#include "runtime/lifecycle.hpp"
#include "runtime/uuid.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/fake_actors.hpp"
#include "test/support/fake_writer.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;
using test::fake_butler;
using test::fake_registry;
using test::fake_writer;
using test::registry_fns;
using test::route_fn;
using test::writer_script;

/// A fanout plan as `fanout_plan_store` answers a new one: its segments,
/// pending, and whether their first dispatch is stored with the plan.
named_result stored_plan(const named_statement& st) {
  named_result out{true, {}};
  rapidjson::Document segs;
  if (json::parse(st.params.at(11), segs) || !segs.IsArray())
    return named_result{};
  for (auto& seg : segs.GetArray())
    out.rows.push_back({st.params.at(6), seg["segment_id"].GetString(),
                        std::to_string(seg["ordinal"].GetInt()),
                        seg["butler"].GetString(), seg["prompt"].GetString(),
                        "pending", "0", "0", "", "", "",
                        seg["dispatched"].GetBool() ? "true" : "false"});
  return out;
}

/// The shared fake writer as the switchboard needs it: appends
/// deduplicated by key (a duplicate answered as stored under
/// "original-id"), plans answered with their segments, and the test's hand
/// on a held claim (inside the actor, where promises are delivered):
/// {"release_claim", {request_id}} answers it "held elsewhere".
std::shared_ptr<writer_script> switchboard_writer() {
  auto s = std::make_shared<writer_script>();
  auto stored_keys = std::make_shared<std::vector<std::string>>();
  s->on_append =
    [stored_keys](inbox_record& rec) -> caf::expected<append_result> {
    auto& keys = *stored_keys;
    if (std::find(keys.begin(), keys.end(), rec.dedupe_key) != keys.end())
      return stored_as("original-id", true);
    keys.push_back(rec.dedupe_key);
    return stored_as(rec.context.request_id, false);
  };
  // The function lives in the script it reaches: a plain pointer, no cycle.
  auto* script = s.get();
  s->on_named = [script](named_statement& st) -> caf::expected<named_result> {
    if (st.query == "release_claim")
      script->answer_held_claims(st.params.at(0), claim_result{false, 0, {}});
    if (st.query == "fanout_plan_store")
      return stored_plan(st);
    return named_result{};
  };
  return s;
}

inbox_record record(const std::string& id, const std::string& key,
                    const std::string& thread = {}) {
  inbox_record r;
  r.context.request_id = id;
  r.context.received_at_us = 1;
  r.context.source_channel = "telegram";
  r.context.source_endpoint_identity = "bot";
  r.context.source_thread_identity = thread;
  r.dedupe_key = key;
  return r;
}

struct Switchboard : test::deterministic_fixture {
  std::shared_ptr<writer_script> script = switchboard_writer();
  inbox_writer_actor writer;
  switchboard_actor sb;

  void start(switchboard_config sc) {
    writer = sys.spawn(fake_writer, script);
    sb = sys.spawn(switchboard, sc, routing_settings{}, writer, ctx);
    sched.run();
  }

  ~Switchboard() override {
    self->send_exit(sb, caf::exit_reason::user_shutdown);
    self->send_exit(writer, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void ingest(const std::string& id, const std::string& key,
              const std::string& thread = {}) {
    self->send(sb, ingest_atom_v, record(id, key, thread));
    sched.run();
  }

  /// A registry without butlers, installed in the node context; counts the
  /// lists it answers in `lists` when given.
  registry_actor spawn_empty_registry(std::shared_ptr<int> lists = nullptr) {
    registry_fns fns;
    fns.list = [lists] {
      if (lists)
        ++*lists;
      return std::vector<registry_entry>{};
    };
    auto reg = sys.spawn(fake_registry, std::move(fns));
    ctx->set_registry(reg);
    return reg;
  }

  /// Parameter `at` of each statement `query` the writer ran, in order.
  std::vector<std::string> params_of(const std::string& query, size_t at) {
    std::vector<std::string> out;
    for (auto& st : script->named)
      if (st.query == query)
        out.push_back(st.params.at(at));
    return out;
  }

  /// Request ids of the plans stored, in order.
  std::vector<std::string> plans() {
    return params_of("fanout_plan_store", 0);
  }

  /// The segments JSON of each plan stored, in order.
  std::vector<std::string> plan_segments() {
    return params_of("fanout_plan_store", 11);
  }

  /// Each fanout_segment_update as "segment_id state attempts", in order.
  std::vector<std::string> segment_updates() {
    std::vector<std::string> out;
    for (auto& st : script->named)
      if (st.query == "fanout_segment_update")
        out.push_back(st.params.at(1) + " " + st.params.at(2) + " "
                      + st.params.at(3));
    return out;
  }

  /// Request ids of the claims so far, in order.
  std::vector<std::string> claimed() {
    std::vector<std::string> out;
    for (auto& c : script->claims)
      out.push_back(c.request_id);
    return out;
  }

  /// Answers the held claim of `id` ("held elsewhere": the worker lets go).
  void release(const std::string& id) {
    self->send(writer, exec_atom_v, named_statement{"release_claim", {id}});
    sched.run();
    self->receive([](named_result&) {}, caf::after(0s) >>
                                          [] {
                                            ADD_FAILURE() << "no reply";
                                          });
  }

  /// The next reply in our mailbox: an append_result or an error code.
  std::variant<append_result, butlers_errc> reply() {
    std::variant<append_result, butlers_errc> out = butlers_errc::none;
    self->receive(
      [&](append_result& r) {
        out = r;
      },
      [&](caf::error& err) {
        out = code_of(err);
      },
      caf::after(0s) >>
        [&] {
          ADD_FAILURE() << "no reply";
        });
    return out;
  }

  /// Ingests `id-0..n-1` (keys `k-0..`) and commits them in one group:
  /// their replies reach the switchboard back to back. Returns our replies.
  std::vector<std::variant<append_result, butlers_errc>> commit_together(
    int n) {
    for (int i = 0; i < n; ++i)
      ingest("id-" + std::to_string(i), "k-" + std::to_string(i));
    self->send(writer, flush_atom_v);
    sched.run();
    std::vector<std::variant<append_result, butlers_errc>> out;
    for (int i = 0; i < n; ++i)
      out.push_back(reply());
    return out;
  }

  uint64_t counter_value(const std::string& name,
                         const std::string& labels = "") {
    return ctx->metrics.get_counter(name, "", labels).value();
  }
};

TEST_F(Switchboard, AcceptsOnlyWhatTheWriterStored) {
  switchboard_config sc;
  start(sc);
  ingest("id-1", "k-1");
  auto r = reply();
  ASSERT_TRUE(std::holds_alternative<append_result>(r));
  EXPECT_EQ(std::get<append_result>(r).request_id, "id-1");
  EXPECT_FALSE(std::get<append_result>(r).duplicate);
  ingest("id-2", "k-1");
  r = reply();
  ASSERT_TRUE(std::holds_alternative<append_result>(r));
  EXPECT_EQ(std::get<append_result>(r).request_id, "original-id");
  EXPECT_TRUE(std::get<append_result>(r).duplicate);
  EXPECT_EQ(counter_value("butlers_switchboard_message_received"), 1u);
  EXPECT_EQ(counter_value("butlers_switchboard_message_deduplicated"), 1u);
  // Only the new message went onto the hot path and was claimed. With no
  // butler registry on this node it cannot be planned: the worker lets go
  // and the row stays claimed until its lease expires (the cold path then
  // hands it out again); nothing is completed.
  ASSERT_EQ(script->claims.size(), 1u);
  EXPECT_EQ(script->claims[0].request_id, "id-1");
  EXPECT_TRUE(script->completions.empty());
}

// With the rules router and the record kept from ingest, the plan is made
// before the claim and sent with it (one commit in the real writer), and
// the worker is free for the next request while they commit. A claim that
// fails ends the request here, whatever the plan's answer.
TEST_F(Switchboard, APlanGoesOutWithItsClaimAndTheWorkerIsFreeMeanwhile) {
  auto reg = spawn_empty_registry();
  switchboard_config sc;
  sc.workers = 1;
  sc.queue_capacity = 10;
  script->hold_claims = true;
  start(sc);
  ingest("id-1", "k-1");
  reply();
  sched.run();
  // Claim and plan are both out; the fake answers the plan at once, before
  // the claim (the real writer answers the claim first): the request waits
  // for its claim.
  ASSERT_EQ(claimed(), (std::vector<std::string>{"id-1"}));
  ASSERT_EQ(plans(), (std::vector<std::string>{"id-1"}));
  auto in_progress = [&] {
    return ctx->metrics
      .get_gauge("butlers_switchboard_requests_in_progress", "")
      .value();
  };
  EXPECT_EQ(in_progress(), 0) << "nothing is dispatched before the claim";
  // One worker, still the next request is planned and claimed.
  ingest("id-2", "k-2");
  reply();
  sched.run();
  EXPECT_EQ(claimed(), (std::vector<std::string>{"id-1", "id-2"}));
  EXPECT_EQ(plans(), (std::vector<std::string>{"id-1", "id-2"}));
  // Both claims fail (held elsewhere): neither request goes further.
  release("id-1");
  release("id-2");
  EXPECT_EQ(in_progress(), 0);
  EXPECT_TRUE(script->completions.empty());
  EXPECT_EQ(counter_value("butlers_switchboard_lifecycle_parsed"), 0u);
  self->send_exit(reg, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_F(Switchboard, TheRegistrysListIsReusedForAWhile) {
  auto lists = std::make_shared<int>(0);
  auto reg = spawn_empty_registry(lists);
  switchboard_config sc;
  sc.workers = 4;
  sc.queue_capacity = 10;
  script->hold_claims = true;
  start(sc);
  for (auto id : {"id-1", "id-2", "id-3"}) {
    ingest(id, std::string{"k-"} + id);
    reply();
    sched.run();
  }
  EXPECT_EQ(claimed(), (std::vector<std::string>{"id-1", "id-2", "id-3"}));
  EXPECT_EQ(*lists, 1) << "three plans, one question";
  sched.advance_time(registry_ttl);
  ingest("id-4", "k-4");
  reply();
  sched.run();
  EXPECT_EQ(*lists, 2) << "asked again once the answer is old";
  for (auto id : {"id-1", "id-2", "id-3", "id-4"})
    release(id);
  self->send_exit(reg, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_F(Switchboard, AdmissionRejectsBeyondMaxInFlight) {
  switchboard_config sc;
  sc.max_in_flight = 2;
  script->hold_appends = true;
  start(sc);
  ingest("id-1", "k-1");
  ingest("id-2", "k-2");
  ingest("id-3", "k-3");
  auto r = reply();
  ASSERT_TRUE(std::holds_alternative<butlers_errc>(r));
  EXPECT_EQ(std::get<butlers_errc>(r), butlers_errc::overload_rejected);
  EXPECT_EQ(counter_value("butlers_switchboard_message_overload_rejected"), 1u);
  EXPECT_EQ(script->appends.size(), 2u) << "the third never reached storage";
  EXPECT_EQ(ctx->metrics.get_gauge("butlers_switchboard_inflight_requests", "")
              .value(),
            2);
  // Commits free the slots.
  self->send(writer, flush_atom_v);
  sched.run();
  (void)reply();
  (void)reply();
  ingest("id-4", "k-4");
  EXPECT_EQ(script->appends.size(), 3u);
}

TEST_F(Switchboard, ABatchIsAdmittedRecordByRecordAndAnsweredInOrder) {
  switchboard_config sc;
  sc.max_in_flight = 2;
  start(sc);
  auto batch = [&](std::vector<inbox_record> recs) {
    self->send(sb, ingest_atom_v, std::move(recs));
    sched.run();
    std::vector<append_result> out;
    self->receive(
      [&](std::vector<append_result>& r) {
        out = std::move(r);
      },
      caf::after(0s) >>
        [] {
          ADD_FAILURE() << "no reply";
        });
    return out;
  };
  // Two slots: the first two records are stored, the others refused, each
  // in its own place in the reply.
  auto r = batch({record("id-1", "k-1"), record("id-2", "k-2"),
                  record("id-3", "k-3"), record("id-4", "k-4")});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].error_code, 0);
  EXPECT_EQ(r[0].request_id, "id-1");
  EXPECT_EQ(r[1].request_id, "id-2");
  for (size_t i : {2u, 3u}) {
    EXPECT_EQ(r[i].error_code,
              static_cast<uint8_t>(butlers_errc::overload_rejected));
    EXPECT_TRUE(r[i].request_id.empty());
    EXPECT_NE(r[i].error_message.find("admission full"), std::string::npos);
  }
  EXPECT_EQ(script->appends.size(), 2u)
    << "refused records never reach storage";
  EXPECT_EQ(counter_value("butlers_switchboard_message_overload_rejected"), 2u);
  // The commit freed both slots; a duplicate is answered with the original.
  r = batch({record("id-5", "k-1"), record("id-6", "k-6")});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].duplicate);
  EXPECT_EQ(r[0].request_id, "original-id");
  EXPECT_FALSE(r[1].duplicate);
  EXPECT_EQ(r[1].request_id, "id-6");
  EXPECT_EQ(counter_value("butlers_switchboard_message_received"), 3u);
  EXPECT_EQ(counter_value("butlers_switchboard_message_deduplicated"), 1u);
  EXPECT_EQ(ctx->metrics.get_gauge("butlers_switchboard_inflight_requests", "")
              .value(),
            0);
  // Draining refuses every record of a batch.
  ctx->status.draining = true;
  r = batch({record("id-7", "k-7")});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].error_code, static_cast<uint8_t>(butlers_errc::draining));
}

TEST_F(Switchboard, DrainingRefusesNewWork) {
  switchboard_config sc;
  start(sc);
  ctx->status.draining = true;
  ingest("id-1", "k-1");
  auto r = reply();
  ASSERT_TRUE(std::holds_alternative<butlers_errc>(r));
  EXPECT_EQ(std::get<butlers_errc>(r), butlers_errc::draining);
  EXPECT_TRUE(script->appends.empty());
}

TEST_F(Switchboard, FullQueueCountsBackpressureAndStillAccepts) {
  switchboard_config sc;
  sc.queue_capacity = 1;
  sc.workers = 1;
  script->grant_claims = true;
  script->hold_appends = true;
  start(sc);
  // All four replies reach the switchboard before the first worker's claim
  // is answered.
  for (auto& r : commit_together(4))
    EXPECT_TRUE(std::holds_alternative<append_result>(r))
      << "stored means accepted, queue or not";
  // One worker + one queue slot: the other two wait for the cold path.
  EXPECT_EQ(counter_value("butlers_buffer_enqueue_total", "path=\"hot\""), 2u);
  EXPECT_EQ(counter_value("butlers_buffer_backpressure_total"), 2u);
  EXPECT_EQ(script->claims.size(), 2u) << "the stored-but-unqueued are not";
}

// What overflowed is stored and `accepted`: once the queue has room again
// (half of it free; with a capacity of one, empty), the switchboard asks the
// cold path for a refill, once per overflow; not while the queue still holds
// work.
TEST_F(Switchboard, AnOverflowAsksTheColdPathForARefillOnceTheQueueRunsEmpty) {
  switchboard_config sc;
  sc.queue_capacity = 1;
  sc.workers = 1;
  script->hold_claims = true;
  script->hold_appends = true;
  start(sc);
  auto refills = std::make_shared<int>(0);
  // (The unused int: CAF 0.17 dereferences a null argument tuple when a
  // function-based actor takes no arguments besides self; UBSan objects.)
  inbox_scanner_actor scanner = sys.spawn(
    [refills](inbox_scanner_actor::pointer,
              int) -> inbox_scanner_actor::behavior_type {
      return {
        [](scan_atom, uint64_t) {},
        [refills](refill_atom) {
          ++*refills;
        },
      };
    },
    0);
  self->send(sb, refill_atom_v, scanner);
  commit_together(3);
  // One claimed (held), one queued, one overflowed.
  EXPECT_EQ(counter_value("butlers_buffer_backpressure_total"), 1u);
  ASSERT_EQ(claimed(), (std::vector<std::string>{"id-0"}));
  EXPECT_EQ(*refills, 0) << "the queue still holds work";
  // The worker lets go of id-0 and takes id-1: the queue runs empty.
  release("id-0");
  sched.run();
  ASSERT_EQ(claimed(), (std::vector<std::string>{"id-0", "id-1"}));
  EXPECT_EQ(*refills, 1);
  // Nothing overflowed since: no second refill.
  release("id-1");
  sched.run();
  EXPECT_EQ(*refills, 1);
  self->send_exit(scanner, caf::exit_reason::user_shutdown);
  sched.run();
}

// A dispatch whose transport fails (here: the host's actor is gone, as a
// killed node's are before the cluster notices) is retried on another host
// of the same butler: the retry's lookup names the host that failed, and
// the registry passes over it.
TEST_F(Switchboard, ARetryAfterATransportFailureAvoidsTheHostThatFailed) {
  // The registry: `general` on a dead host and on a live one. A lookup
  // without a host to avoid gets the dead one, as round robin could.
  butler_actor dead = sys.spawn(fake_butler, route_fn{});
  self->send_exit(dead, caf::exit_reason::kill);
  sched.run();
  auto routed = std::make_shared<int>(0);
  butler_actor live = sys.spawn(fake_butler, [routed](route_request&) {
    ++*routed;
    route_response r;
    r.status = "accepted";
    r.work_id = "work-1";
    return r;
  });
  auto lookups = std::make_shared<std::vector<butler_actor>>();
  registry_fns fns;
  fns.lookup = [dead, live, lookups](const std::string&,
                                     const butler_actor& avoid) {
    lookups->push_back(avoid);
    return avoid == dead ? live : dead;
  };
  auto reg = sys.spawn(fake_registry, std::move(fns));
  ctx->set_registry(reg);
  switchboard_config sc;
  sc.workers = 1;
  start(sc);
  // A request as the node makes them (the route.v1 envelopes and responses
  // built from it are validated), received now (its wall-clock budget
  // counts from then); no text: planned whole to general.
  auto rec = record(make_uuid_v7().to_string(), "k-1");
  rec.context.received_at_us = std::chrono::duration_cast<
                                 std::chrono::microseconds>(
                                 std::chrono::system_clock::now()
                                   .time_since_epoch())
                                 .count();
  self->send(sb, ingest_atom_v, rec);
  sched.run();
  reply();
  sched.run();
  ASSERT_EQ(lookups->size(), 1u) << "the first attempt looked up general";
  EXPECT_FALSE((*lookups)[0]) << "nothing to avoid on a first attempt";
  EXPECT_EQ(*routed, 0);
  // The first dispatch was stored with the plan, not by an update of its
  // own; the failed attempt's outcome was.
  ASSERT_EQ(plan_segments().size(), 1u);
  EXPECT_NE(plan_segments()[0].find(R"("dispatched":true)"), std::string::npos);
  for (auto& u : segment_updates())
    EXPECT_NE(u, "seg-1 dispatched 1");
  EXPECT_FALSE(segment_updates().empty());
  // The attempt failed on the dead host; its backoff passes.
  EXPECT_EQ(counter_value("butlers_switchboard_route_retries_total"), 1u);
  // The earliest timer is the backoff (the request's budget and the lease
  // tick come much later).
  ASSERT_TRUE(sched.trigger_timeout());
  sched.run();
  ASSERT_EQ(lookups->size(), 2u) << "the retry looked up general again";
  EXPECT_EQ((*lookups)[1], dead) << "naming the host that failed";
  EXPECT_EQ(*routed, 1) << "and went to the live host";
  // A second attempt is written when it goes out.
  EXPECT_EQ(segment_updates().back(), "seg-1 dispatched 2");
  self->send_exit(live, caf::exit_reason::user_shutdown);
  self->send_exit(reg, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_F(Switchboard, ColdPathTakesWhatFits) {
  switchboard_config sc;
  sc.queue_capacity = 3;
  sc.workers = 1;
  script->grant_claims = false; // rows held elsewhere: skipped, not processed
  start(sc);
  std::vector<inbox_record> refs;
  for (int i = 0; i < 5; ++i) {
    inbox_record r;
    r.context.request_id = "cold-" + std::to_string(i);
    r.context.received_at_us = i;
    refs.push_back(std::move(r));
  }
  self->send(sb, enqueue_atom_v, refs);
  sched.run();
  uint32_t taken = 0;
  self->receive(
    [&](uint32_t n) {
      taken = n;
    },
    caf::after(0s) >>
      [] {
        ADD_FAILURE() << "no reply";
      });
  EXPECT_EQ(taken, 3u);
  EXPECT_EQ(counter_value("butlers_buffer_scanner_recovered_total"), 3u);
  EXPECT_EQ(counter_value("butlers_buffer_enqueue_total", "path=\"cold\""), 3u);
  EXPECT_EQ(script->claims.size(), 3u) << "every taken row is claimed first";
  EXPECT_TRUE(script->completions.empty())
    << "a row someone else holds is never processed";
}

TEST_F(Switchboard, SameSourceThreadIsClassifiedInArrivalOrderWithAPoolOf3) {
  switchboard_config sc;
  sc.workers = 3;
  script->hold_claims = true;
  start(sc);
  // Arrival: a1 a2 b1 a3 b2 c1 (three source threads, interleaved).
  ingest("a1", "k-a1", "chat-a");
  ingest("a2", "k-a2", "chat-a");
  ingest("b1", "k-b1", "chat-b");
  ingest("a3", "k-a3", "chat-a");
  ingest("b2", "k-b2", "chat-b");
  ingest("c1", "k-c1", "chat-c");
  // Three workers, three threads: one message of each thread at a time;
  // a2, a3 and b2 wait for their predecessors although workers are free
  // of other keys.
  EXPECT_EQ(claimed(), (std::vector<std::string>{"a1", "b1", "c1"}));
  // b1 is done: b2 (next of chat-b) goes, not a2 (chat-a still busy).
  release("b1");
  EXPECT_EQ(claimed(), (std::vector<std::string>{"a1", "b1", "c1", "b2"}));
  release("c1");
  release("b2");
  EXPECT_EQ(claimed().size(), 4u) << "chat-a's next waits for a1";
  release("a1");
  EXPECT_EQ(claimed().back(), "a2");
  release("a2");
  EXPECT_EQ(claimed(),
            (std::vector<std::string>{"a1", "b1", "c1", "b2", "a2", "a3"}));
}

TEST_F(Switchboard, MessagesWithoutAThreadUseThePoolFreely) {
  switchboard_config sc;
  sc.workers = 3;
  script->hold_claims = true;
  start(sc);
  for (int i = 0; i < 4; ++i)
    ingest("n" + std::to_string(i), "k-n" + std::to_string(i));
  EXPECT_EQ(claimed(), (std::vector<std::string>{"n0", "n1", "n2"}));
  release("n1");
  EXPECT_EQ(claimed().back(), "n3");
}

// -- lifecycle reactions ------------------------------------------------------

/// What a fake messenger was handed: the notify of each route.execute, and
/// how many terminal writes the writer had seen when it came.
struct handed {
  std::string intent;
  std::string state;
  size_t completions_before = 0;
};

struct SwitchboardLifecycle : Switchboard {
  std::shared_ptr<std::vector<handed>>
    handovers = std::make_shared<std::vector<handed>>();
  std::shared_ptr<std::vector<route_envelope>>
    dispatched = std::make_shared<std::vector<route_envelope>>();
  /// The messenger's answer: accepted, or this error class (retryable).
  std::shared_ptr<std::string> refuse = std::make_shared<std::string>();
  butler_actor messenger;
  butler_actor general;
  registry_actor reg;

  /// A node whose messenger has a telegram adapter; `general` accepts
  /// every dispatch.
  void start_node() {
    delivery_adapter_config tg;
    tg.kind = adapter_kind::telegram;
    ctx->lifecycle = lifecycle_policy{{tg}};
    auto script_ptr = script;
    messenger = sys.spawn(fake_butler, [this, script_ptr](route_request& req) {
      route_envelope env;
      EXPECT_FALSE(parse_route(req.envelope, env));
      auto view = read_notify(env.notify_request);
      handovers->push_back(handed{view->intent, view->reaction_state,
                                  script_ptr->completions.size()});
      route_response r;
      r.status = refuse->empty() ? "accepted" : "error";
      r.error_class = *refuse;
      r.retryable = true;
      return r;
    });
    ctx->set_messenger(messenger);
    general = sys.spawn(fake_butler, [this](route_request& req) {
      dispatched->push_back(*req.parsed);
      route_response r;
      r.status = "accepted";
      r.work_id = "work-" + std::to_string(dispatched->size());
      return r;
    });
    registry_fns fns;
    fns.lookup = [this](const std::string&, const butler_actor&) {
      return general;
    };
    reg = sys.spawn(fake_registry, std::move(fns));
    ctx->set_registry(reg);
    switchboard_config sc;
    sc.workers = 1;
    start(sc);
  }

  ~SwitchboardLifecycle() override {
    for (auto* a : {&messenger, &general})
      self->send_exit(*a, caf::exit_reason::user_shutdown);
    self->send_exit(reg, caf::exit_reason::user_shutdown);
    sched.run();
  }

  /// Ingests a request from `channel` received now; answers its dispatch
  /// with `status` ("ok" or "error").
  void run_request(const std::string& channel, const std::string& status) {
    auto rec = record(make_uuid_v7().to_string(), "k-" + channel);
    rec.context.source_channel = channel;
    rec.context.source_sender_identity = "7";
    rec.context.received_at_us = unix_now_us();
    self->send(sb, ingest_atom_v, rec);
    sched.run();
    reply();
    sched.run();
    ASSERT_FALSE(dispatched->empty());
    auto& d = dispatched->back();
    route_response r;
    r.status = status;
    r.request_id = d.request_id;
    r.subrequest_id = d.subrequest_id;
    r.segment_id = d.segment_id;
    r.work_id = "work-" + std::to_string(dispatched->size());
    if (status == "error") {
      r.error_class = "validation_error";
      r.error_message = "scripted";
    }
    self->send(sb, done_atom_v, r);
    sched.run();
  }
};

TEST_F(SwitchboardLifecycle, ATerminalReactionIsOwedBeforeTheTerminalWrite) {
  start_node();
  run_request("telegram", "ok");
  ASSERT_EQ(handovers->size(), 2u);
  EXPECT_EQ((*handovers)[0].intent, "react");
  EXPECT_EQ((*handovers)[0].state, "progress") << "when the request starts";
  EXPECT_EQ((*handovers)[1].state, "parsed");
  EXPECT_EQ((*handovers)[1].completions_before, 0u)
    << "the messenger holds the reaction before the terminal write";
  ASSERT_EQ(script->completions.size(), 1u);
  EXPECT_EQ(script->completions[0].state, "parsed")
    << script->completions[0].error_class << ": "
    << script->completions[0].error_message;
}

TEST_F(SwitchboardLifecycle, AnErroredRequestOwesItsReactionAndItsErrorReply) {
  start_node();
  run_request("telegram", "error");
  ASSERT_EQ(handovers->size(), 3u);
  EXPECT_EQ((*handovers)[1].state, "errored");
  EXPECT_EQ((*handovers)[2].intent, "reply") << "the error reply";
  for (size_t i = 1; i < 3; ++i)
    EXPECT_EQ((*handovers)[i].completions_before, 0u) << i;
  ASSERT_EQ(script->completions.size(), 1u);
  EXPECT_EQ(script->completions[0].state, "errored");
}

TEST_F(SwitchboardLifecycle, WhatCannotBeHandedOverHoldsTheTerminalWriteBack) {
  start_node();
  *refuse = "target_unavailable";
  run_request("telegram", "ok");
  EXPECT_EQ(handovers->back().state, "parsed");
  EXPECT_TRUE(script->completions.empty())
    << "still in progress: the cold path finishes it again";
}

TEST_F(SwitchboardLifecycle, ARequestFromAChannelThatDoesNotReactCostsNothing) {
  start_node();
  run_request("api", "ok");
  EXPECT_TRUE(handovers->empty());
  ASSERT_EQ(script->completions.size(), 1u);
  EXPECT_EQ(script->completions[0].state, "parsed");
}

} // namespace
} // namespace butlers
