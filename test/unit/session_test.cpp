// One session actor, driven deterministically (CAF's test_coordinator,
// virtual time): a scripted run's turns are timers, steer input lands at
// the boundary before a turn, the butler's timeout and cancel end it, and
// the messenger's deliveries report what their channel adapters did. The
// butler and the thread it reports to are typed fakes that record.

#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <gtest/gtest.h>

#include "actors/session.hpp"
#include "runtime/delivery.hpp"
#include "runtime/uuid.hpp"
#include "test/support/deliveries.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// A butler that records the outcomes its sessions report.
butler_actor::behavior_type fake_butler(
  butler_actor::pointer,
  std::shared_ptr<std::vector<session_outcome>> outcomes) {
  return {
    [](route_atom, route_request&) -> caf::result<route_response> {
      return caf::error{butlers_errc::internal_error, "not used"};
    },
    [](cancel_atom, const std::string&) {
      return false;
    },
    [](steer_atom, const std::string&, steer_input&) {
      return false;
    },
    [](status_atom) {
      return butler_status{};
    },
    [outcomes](done_atom, session_outcome& out) {
      outcomes->push_back(std::move(out));
    },
    [](caf::tick_atom) {},
    [](caf::tick_atom, const std::string&) {},
    [](schedule_atom, uint32_t) {},
    [](caf::timeout_atom) {},
    [](worker_atom, worker_call&) {
      return worker_reply{};
    },
    [](worker_atom, uint64_t) {},
    [](drain_atom, caf::timespan) {
      return uint32_t{0};
    },
    [](drain_atom) {},
    [](done_atom, route_response&) {},
  };
}

/// A thread that records the steer input its run's session applied.
thread_actor::behavior_type fake_thread(
  thread_actor::pointer, std::shared_ptr<std::vector<steer_applied>> applied) {
  return {
    [](turn_atom, thread_turn&) -> caf::result<turn_result> {
      return caf::error{butlers_errc::internal_error, "not used"};
    },
    [](cancel_atom, const std::string&) {
      return uint32_t{0};
    },
    [](idle_atom) {
      return int64_t{-1};
    },
    [](retire_atom) {},
    [](snapshot_atom) {
      return thread_live{};
    },
    [](done_atom, route_response&) {},
    [applied](steer_atom, steer_applied& a) {
      applied->push_back(std::move(a));
    },
    [](delta_atom, const std::string&, const std::string&) {
      // Deltas are not recorded here.
    },
    [](timeout_atom, const std::string&) {},
  };
}

/// A channel adapter that answers at once, as told, and counts its posts.
class scripted_delivery final : public delivery_adapter {
 public:
  scripted_delivery(adapter_kind kind, delivery_attempt answer)
    : delivery_adapter(config_of(kind)), answer_(std::move(answer)) {
    // nop
  }

  bool nonblocking() const override {
    return true;
  }

  delivery_attempt deliver(const delivery_context&) const override {
    ++*posts;
    return answer_;
  }

  std::shared_ptr<int> posts = std::make_shared<int>(0);

 private:
  static delivery_adapter_config config_of(adapter_kind kind) {
    delivery_adapter_config cfg;
    cfg.kind = kind;
    return cfg;
  }

  delivery_attempt answer_;
};

struct Session : test::deterministic_fixture {
  std::shared_ptr<std::vector<session_outcome>>
    outcomes = std::make_shared<std::vector<session_outcome>>();
  std::shared_ptr<std::vector<steer_applied>>
    applied = std::make_shared<std::vector<steer_applied>>();
  butler_actor butler = sys.spawn(fake_butler, outcomes);
  thread_actor thread = sys.spawn(fake_thread, applied);
  std::vector<session_actor> sessions;

  ~Session() override {
    for (auto& s : sessions)
      self->send_exit(s, caf::exit_reason::user_shutdown);
    self->send_exit(butler, caf::exit_reason::user_shutdown);
    self->send_exit(thread, caf::exit_reason::user_shutdown);
    sched.run();
  }

  static session_params scripted(uint32_t turns, uint32_t turn_ms) {
    session_params p;
    p.butler = "health";
    p.runtime.turns = turns;
    p.runtime.turn_ms = turn_ms;
    p.runtime.seed = 1;
    p.kind = runtime_of(p.runtime);
    p.timeout = 10s;
    return p;
  }

  static work_item item_for(const route_envelope& env) {
    work_item item;
    item.work_id = make_uuid_v7().to_string();
    item.butler = env.butler;
    item.request_id = env.request_id;
    item.lease_token = 3;
    return item;
  }

  static route_envelope envelope(const std::string& prompt) {
    route_envelope env;
    env.request_id = make_uuid_v7().to_string();
    env.butler = "health";
    env.tool = "route.execute";
    env.prompt = prompt;
    return env;
  }

  /// Spawns a session for `prompt`; its steer observer is the fake thread.
  session_actor start(session_params params, const std::string& prompt,
                      std::vector<steer_input> early = {}) {
    auto env = envelope(prompt);
    auto hdl = sys.spawn(session, std::move(params), item_for(env), env, butler,
                         session_steer{std::move(early),
                                       caf::actor_cast<caf::actor>(thread)});
    sessions.push_back(hdl);
    sched.run();
    return hdl;
  }

  static steer_input steer(const std::string& id) {
    steer_input in;
    in.message_id = id;
    in.text = "also this";
    return in;
  }

  void advance(caf::timespan d) {
    sched.advance_time(d);
    sched.run();
  }
};

TEST_F(Session, AScriptedRunEndsAfterItsTurnsWithItsReply) {
  start(scripted(2, 100), "take pill");
  advance(100ms);
  EXPECT_TRUE(outcomes->empty()) << "one turn of two done";
  advance(100ms);
  ASSERT_EQ(outcomes->size(), 1u);
  auto& out = outcomes->front();
  EXPECT_EQ(out.state, "ok");
  EXPECT_EQ(out.lease_token, 3) << "reported under the lease it ran with";
  EXPECT_EQ(out.reply, "health: take pill");
  EXPECT_EQ(out.response.status, "ok");
  EXPECT_NE(out.response.result.find(R"("turns":2)"), std::string::npos)
    << out.response.result;
  EXPECT_TRUE(applied->empty()) << "no steer input, nothing to report";
}

TEST_F(Session, SteerInputIsAppliedAtTheNextTurnsBoundary) {
  auto s = start(scripted(2, 100), "plan my day");
  self->send(s, steer_atom_v, steer("m-1"));
  sched.run();
  EXPECT_TRUE(applied->empty()) << "turn 1 is under way";
  advance(100ms);
  ASSERT_EQ(applied->size(), 1u);
  auto& a = applied->front();
  EXPECT_EQ(a.turn, 2u);
  ASSERT_EQ(a.inputs.size(), 1u);
  EXPECT_EQ(a.inputs[0].message_id, "m-1");
  EXPECT_EQ(a.inputs[0].arrived_turn, 1u);
  advance(100ms);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_NE(outcomes->front().response.result.find(R"("message_id":"m-1")"),
            std::string::npos)
    << "the turn log shows what turn 2 saw";
}

TEST_F(Session, SteerInputDuringTheLastTurnGetsATurnOfItsOwn) {
  auto s = start(scripted(1, 100), "one turn");
  self->send(s, steer_atom_v, steer("late"));
  advance(100ms);
  EXPECT_TRUE(outcomes->empty()) << "an extra turn sees the input";
  ASSERT_EQ(applied->size(), 1u);
  EXPECT_EQ(applied->front().turn, 2u);
  advance(100ms);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_NE(outcomes->front().response.result.find(R"("turns":2)"),
            std::string::npos);
}

TEST_F(Session, InputThatWaitedForASlotIsAppliedBeforeTheFirstTurn) {
  start(scripted(1, 100), "queued", {steer("early")});
  ASSERT_EQ(applied->size(), 1u);
  EXPECT_EQ(applied->front().turn, 1u);
  EXPECT_NE(applied->front().inputs[0].arrived_us, 0)
    << "stamped when the session took it";
}

TEST_F(Session, TheButlersTimeoutEndsTheRunRetryably) {
  auto s = start(scripted(1, 60000), "slow");
  self->send(s, caf::timeout_atom_v);
  sched.run();
  ASSERT_EQ(outcomes->size(), 1u);
  auto& out = outcomes->front();
  EXPECT_EQ(out.state, "error");
  EXPECT_EQ(out.response.error_class, "timeout");
  EXPECT_TRUE(out.response.retryable);
  EXPECT_NE(out.response.error_message.find("10 s"), std::string::npos);
  advance(60s);
  EXPECT_EQ(outcomes->size(), 1u) << "the turn's timer finds it gone";
}

TEST_F(Session, ACancelledRunEndsCancelledOnce) {
  auto s = start(scripted(1, 60000), "never mind");
  self->send(s, cancel_atom_v);
  self->send(s, cancel_atom_v);
  sched.run();
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ(outcomes->front().state, "cancelled");
  EXPECT_EQ(outcomes->front().response.error_message, "cancelled");
  EXPECT_FALSE(outcomes->front().response.retryable);
}

/// The messenger's session params over `adapters`.
session_params messenger(std::vector<delivery_adapter_ptr> adapters) {
  session_params p;
  p.butler = "messenger";
  p.runtime.kind = runtime_kind::delivery;
  p.kind = runtime_of(p.runtime);
  p.adapters = std::move(adapters);
  return p;
}

/// A delivery route for a reply on `channel`, typed.
route_envelope delivery(const std::string& channel) {
  route_envelope parsed;
  test::delivery_route(channel, &parsed);
  return parsed;
}

TEST_F(Session, AnOutboxDeliveryReportsEveryAdapterThatDelivered) {
  auto first = std::make_shared<scripted_delivery>(adapter_kind::outbox,
                                                   delivery_attempt{});
  auto second = std::make_shared<scripted_delivery>(adapter_kind::outbox,
                                                    delivery_attempt{});
  auto env = delivery("api");
  ASSERT_TRUE(
    run_without_session(messenger({first, second}), item_for(env), env, butler))
    << "adapters that never block need no session";
  sched.run();
  ASSERT_EQ(outcomes->size(), 1u);
  auto& out = outcomes->front();
  EXPECT_EQ(out.state, "ok");
  EXPECT_EQ(out.reply, "") << "nobody gets a reply to a reply";
  EXPECT_NE(out.response.result.find(
              R"("adapters":[{"kind":"outbox","delivered":true},)"
              R"({"kind":"outbox","delivered":true}])"),
            std::string::npos)
    << out.response.result;
  EXPECT_EQ(*first->posts + *second->posts, 2);
}

TEST_F(Session, AnOutboxThatCannotWriteFailsTheDeliveryAsUnavailable) {
  auto full = std::make_shared<scripted_delivery>(adapter_kind::outbox,
                                                  delivery_attempt{"full",
                                                                   true,
                                                                   {}});
  auto env = delivery("api");
  ASSERT_TRUE(
    run_without_session(messenger({full}), item_for(env), env, butler));
  sched.run();
  ASSERT_EQ(outcomes->size(), 1u);
  auto& out = outcomes->front();
  EXPECT_EQ(out.state, "error");
  EXPECT_EQ(out.response.error_class, "target_unavailable");
  EXPECT_EQ(out.response.error_message, "full");
  EXPECT_TRUE(out.response.retryable);
}

TEST_F(Session, OnlyTheMessengersDeliveriesRunWithoutASession) {
  auto env = envelope("hello");
  EXPECT_FALSE(
    run_without_session(scripted(1, 100), item_for(env), env, butler));
  sched.run();
  EXPECT_TRUE(outcomes->empty());
}

TEST_F(Session, ADeliverySessionNoAdapterServesEndsAsAValidationError) {
  delivery_adapter_config hook;
  hook.kind = adapter_kind::webhook;
  hook.url = "http://127.0.0.1:9/never";
  hook.channels = {"telegram"};
  auto params = messenger({make_delivery_adapter(hook)});
  auto env = delivery("api");
  auto hdl = sys.spawn(session, params, item_for(env), env, butler,
                       session_steer{});
  sessions.push_back(hdl);
  sched.run();
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ(outcomes->front().state, "error");
  EXPECT_EQ(outcomes->front().response.error_class, "validation_error");
  EXPECT_NE(outcomes->front().response.error_message.find("'api'"),
            std::string::npos);
}

} // namespace
} // namespace butlers
