// The thread directory, deterministically (CAF's test_coordinator) over real
// thread actors and typed fakes of what they talk to: threads spawned on
// demand, forwarding, cancel by run, the idle-retire handshake, a thread
// that fails, and waking threads with runs left open at start.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/after.hpp>
#include <caf/exit_reason.hpp>
#include <gtest/gtest.h>

#include "actors/thread_directory.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/thread_fakes.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

struct ThreadDirectory : test::deterministic_fixture {
  std::shared_ptr<test::thread_db> db = std::make_shared<test::thread_db>();
  std::shared_ptr<test::butler_script>
    general = std::make_shared<test::butler_script>();
  std::shared_ptr<std::map<std::string, butler_actor>>
    butlers = std::make_shared<std::map<std::string, butler_actor>>();
  thread_env env;
  std::vector<caf::actor> spawned;
  thread_directory_actor dir;

  ThreadDirectory() {
    auto b = sys.spawn(test::fake_butler, general);
    (*butlers)["general"] = b;
    env.writer = sys.spawn(test::thread_writer, db);
    env.registry = sys.spawn(test::registry_of_butlers, butlers);
    env.reader = sys.spawn(test::thread_reader, db);
    spawned = {caf::actor_cast<caf::actor>(b),
               caf::actor_cast<caf::actor>(env.writer),
               caf::actor_cast<caf::actor>(env.registry),
               caf::actor_cast<caf::actor>(env.reader)};
    ctx->status.database_ready = true;
  }

  ~ThreadDirectory() override {
    if (dir)
      self->send_exit(dir, caf::exit_reason::user_shutdown);
    for (auto& a : spawned)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void start() {
    dir = sys.spawn(thread_directory, env, ctx);
    sched.run();
  }

  /// Lets the sweep timer fire once (every 100 ms with idle_timeout_s 0)
  /// and everything it caused run.
  void sweep() {
    sched.advance_time(100ms);
    sched.run();
  }

  /// Answers the next message in our mailbox as a T (or fails the test).
  template<class T>
  T next() {
    T out{};
    self->receive(
      [&](T& x) {
        out = std::move(x);
      },
      [&](caf::error& err) {
        ADD_FAILURE() << "unexpected error: " << sys.render(err);
      },
      caf::after(0s) >>
        [&] {
          ADD_FAILURE() << "no answer";
        });
    return out;
  }

  uint64_t touch(const std::string& id) {
    self->send(dir, touch_atom_v, id);
    sched.run();
    return next<uint64_t>();
  }

  uint64_t live() {
    self->send(dir, status_atom_v);
    sched.run();
    return next<uint64_t>();
  }

  turn_result turn(const std::string& thread_id, const std::string& msg) {
    thread_turn t;
    t.thread_id = thread_id;
    t.message_id = msg;
    t.text = "hello";
    self->send(dir, turn_atom_v, t);
    sched.run();
    return next<turn_result>();
  }

  uint64_t metric(const std::string& name) {
    return ctx->metrics.get_counter(name, "").value();
  }
};

TEST_F(ThreadDirectory, TouchSpawnsEachThreadOnce) {
  start();
  EXPECT_EQ(touch("a"), 1u);
  EXPECT_EQ(touch("a"), 1u);
  EXPECT_EQ(touch("b"), 2u);
  EXPECT_EQ(live(), 2u);
  EXPECT_EQ(metric("butlers_threads_spawned_total"), 2u);
  EXPECT_EQ(ctx->metrics.get_gauge("butlers_threads_live", "").value(), 2);
}

TEST_F(ThreadDirectory, ATurnGoesToItsThreadSpawnedOnDemand) {
  start();
  auto r = turn("chat-1", "m1");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "start");
  ASSERT_EQ(general->run_ids.size(), 1u);
  EXPECT_EQ(general->run_ids[0], r.run_id);
  EXPECT_EQ(live(), 1u);
  // The thread's metrics are the node's.
  EXPECT_EQ(metric("butlers_thread_turns_total"), 1u);
  EXPECT_EQ(metric("butlers_thread_runs_started_total"), 1u);
  // The same thread takes the next turn: it steers the run it started.
  auto again = turn("chat-1", "m2");
  EXPECT_EQ(again.kind, "steer");
  EXPECT_EQ(again.run_id, r.run_id);
  EXPECT_EQ(live(), 1u);
}

TEST_F(ThreadDirectory, CancelByRunFindsTheThreadThatHoldsIt) {
  start();
  auto r = turn("chat-1", "m1");
  self->send(dir, cancel_atom_v, std::string{}, r.run_id);
  sched.run();
  EXPECT_EQ(next<uint32_t>(), 1u);
  EXPECT_EQ(general->cancels, std::vector<std::string>{"w1"});
}

TEST_F(ThreadDirectory, CancelOfARunNoThreadHoldsIsNotFound) {
  start();
  self->send(dir, cancel_atom_v, std::string{}, std::string{"r-none"});
  sched.run();
  bool not_found = false;
  self->receive(
    [&](uint32_t) {
      ADD_FAILURE() << "answered a count";
    },
    [&](caf::error& err) {
      not_found = code_of(err) == butlers_errc::not_found;
    },
    caf::after(0s) >>
      [&] {
        ADD_FAILURE() << "no answer";
      });
  EXPECT_TRUE(not_found);
}

TEST_F(ThreadDirectory, CancelOfAThreadThatIsNotLiveCancelsNothing) {
  start();
  self->send(dir, cancel_atom_v, std::string{"chat-9"}, std::string{});
  sched.run();
  EXPECT_EQ(next<uint32_t>(), 0u);
  EXPECT_EQ(live(), 0u) << "cancel spawns no thread";
}

TEST_F(ThreadDirectory, AnEndedRunIsForgotten) {
  start();
  auto r = turn("chat-1", "m1");
  route_response done;
  done.status = "ok";
  done.work_id = "w1";
  done.result = R"({"reply":"ok"})";
  self->send(caf::actor_cast<thread_actor>(general->routes[0].reply_to),
             done_atom_v, done);
  sched.run();
  self->send(dir, cancel_atom_v, std::string{}, r.run_id);
  sched.run();
  bool not_found = false;
  self->receive(
    [&](caf::error& err) {
      not_found = code_of(err) == butlers_errc::not_found;
    },
    caf::after(0s) >>
      [&] {
        ADD_FAILURE() << "no answer";
      });
  EXPECT_TRUE(not_found) << "the thread told the directory the run ended";
}

TEST_F(ThreadDirectory, IdleThreadsAreRetiredAndBusyOnesStay) {
  env.cfg.idle_timeout_s = 0;
  start();
  touch("idle");
  turn("busy", "m1");
  EXPECT_EQ(live(), 2u);
  sweep();
  EXPECT_EQ(live(), 1u) << "the thread with a run stays";
  EXPECT_EQ(metric("butlers_threads_retired_total"), 1u);
  EXPECT_EQ(ctx->metrics.get_gauge("butlers_threads_live", "").value(), 1);
  // A retired thread comes back on its next message.
  EXPECT_EQ(touch("idle"), 2u);
  EXPECT_EQ(metric("butlers_threads_spawned_total"), 3u);
}

TEST_F(ThreadDirectory, AThreadThatGetsAMessageWhileAskedIsNotRetired) {
  env.cfg.idle_timeout_s = 0;
  start();
  touch("a");
  sched.advance_time(100ms);
  sched.run_once(); // the sweep asks the thread whether it is idle
  self->send(dir, touch_atom_v, std::string{"a"});
  sched.run(); // the touch reaches the directory before the answer
  EXPECT_EQ(next<uint64_t>(), 1u);
  EXPECT_EQ(live(), 1u);
  EXPECT_EQ(metric("butlers_threads_retired_total"), 0u);
  sweep(); // asked again with nothing in between: retired
  EXPECT_EQ(live(), 0u);
}

TEST_F(ThreadDirectory, AThreadThatFailsIsDroppedAndTheNextTurnStartsAnew) {
  start();
  turn("chat-1", "m1");
  ASSERT_EQ(general->routes.size(), 1u);
  auto th = general->routes[0].reply_to;
  self->send_exit(th, caf::exit_reason::unhandled_exception);
  sched.run();
  EXPECT_EQ(live(), 0u) << "the directory outlives its thread";
  auto r = turn("chat-1", "m2");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "start") << "a fresh thread";
  EXPECT_EQ(metric("butlers_threads_spawned_total"), 2u);
  EXPECT_EQ(live(), 1u);
}

TEST_F(ThreadDirectory, AtStartItWakesThreadsWithRunsLeftOpen) {
  db->open_threads = {{"chat-1"}, {"chat-2"}};
  start();
  EXPECT_EQ(live(), 2u);
  ASSERT_EQ(db->reads.size(), 3u);
  EXPECT_EQ(db->reads[0].query, "thread_open_threads");
  EXPECT_EQ(db->reads[1].query, "thread_open_runs");
  EXPECT_EQ(db->reads[2].query, "thread_open_runs");
}

TEST_F(ThreadDirectory, WakingWaitsUntilTheDatabaseIsReady) {
  ctx->status.database_ready = false;
  db->open_threads = {{"chat-1"}};
  start();
  sched.advance_time(200ms);
  sched.run();
  EXPECT_TRUE(db->reads.empty());
  ctx->status.database_ready = true;
  sched.advance_time(200ms);
  sched.run();
  EXPECT_EQ(live(), 1u);
}

TEST_F(ThreadDirectory, WakingIsRetriedUntilTheReaderAnswers) {
  db->down = true;
  db->open_threads = {{"chat-1"}};
  start();
  EXPECT_EQ(live(), 0u);
  db->down = false;
  sched.advance_time(1s);
  sched.run();
  EXPECT_EQ(live(), 1u);
  // Once woken, never again.
  self->send(dir, resume_atom_v);
  sched.run();
  EXPECT_EQ(db->reads.size(), 2u) << "open threads once, chat-1's runs once";
}

} // namespace
} // namespace butlers
