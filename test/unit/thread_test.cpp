// The conversation thread actor, deterministically (CAF's test_coordinator)
// against typed fakes of the writer, the reader, the registry, a butler and
// the directory: what a turn does to the thread's runs, what the thread
// writes, what it tells its butler and its directory, and which events its
// subscribers see.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/after.hpp>
#include <gtest/gtest.h>

#include "actors/thread.hpp"
#include "runtime/attachments.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/thread_fakes.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

struct Thread : test::deterministic_fixture {
  std::shared_ptr<test::thread_db> db = std::make_shared<test::thread_db>();
  std::shared_ptr<test::butler_script>
    general = std::make_shared<test::butler_script>();
  std::shared_ptr<std::map<std::string, butler_actor>>
    butlers = std::make_shared<std::map<std::string, butler_actor>>();
  std::shared_ptr<std::vector<test::run_note>>
    notes = std::make_shared<std::vector<test::run_note>>();
  std::shared_ptr<event_hub> hub = std::make_shared<event_hub>(8, 1024);
  /// Every frame the subscriber of thread chat-1 and the summary subscriber
  /// were sent.
  std::vector<std::string> frames;
  std::vector<std::string> summaries;
  event_hub::subscriber_ptr sub;
  event_hub::subscriber_ptr summary_sub;
  thread_env env;
  std::vector<caf::actor> spawned;
  thread_actor th;

  Thread() {
    spawn_butler("general", general);
    env.writer = sys.spawn(test::thread_writer, db);
    env.registry = sys.spawn(test::registry_of_butlers, butlers);
    env.directory = sys.spawn(test::fake_directory, notes);
    env.hub = hub;
    wire_thread_metrics(env, ctx->metrics);
    spawned = {caf::actor_cast<caf::actor>(env.writer),
               caf::actor_cast<caf::actor>(env.registry),
               caf::actor_cast<caf::actor>(env.directory)};
    sub = hub->subscribe("chat-1", [this](std::string chunk, auto done) {
      frames.push_back(std::move(chunk));
      done(true);
    });
    summary_sub = hub->subscribe("", [this](std::string chunk, auto done) {
      summaries.push_back(std::move(chunk));
      done(true);
    });
  }

  ~Thread() override {
    hub->close_all();
    for (auto& a : spawned)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void spawn_butler(const std::string& name,
                    std::shared_ptr<test::butler_script> s) {
    auto b = sys.spawn(test::fake_butler, s);
    (*butlers)[name] = b;
    spawned.push_back(caf::actor_cast<caf::actor>(b));
  }

  /// Spawns the thread chat-1 (with a reader when `resume`).
  thread_actor start(bool resume = false) {
    if (resume) {
      env.reader = sys.spawn(test::thread_reader, db);
      spawned.push_back(caf::actor_cast<caf::actor>(env.reader));
    }
    th = sys.spawn(thread, std::string{"chat-1"},
                   std::make_shared<const thread_env>(env));
    spawned.push_back(caf::actor_cast<caf::actor>(th));
    sched.run();
    return th;
  }

  static thread_turn turn(const std::string& message_id,
                          const std::string& mode = "steer",
                          const std::string& text = "hello") {
    thread_turn t;
    t.thread_id = "chat-1";
    t.message_id = message_id;
    t.text = text;
    t.mode = mode;
    return t;
  }

  void send(thread_turn t) {
    self->send(th, turn_atom_v, std::move(t));
  }

  /// The turn results (and errors) now in our mailbox.
  std::vector<turn_result> results() {
    std::vector<turn_result> out;
    bool more = true;
    while (more)
      self->receive(
        [&](turn_result& r) {
          out.push_back(std::move(r));
        },
        [&](caf::error& err) {
          ADD_FAILURE() << "unexpected error: " << sys.render(err);
        },
        caf::after(0s) >>
          [&] {
            more = false;
          });
    return out;
  }

  /// Sends one turn and answers its result.
  turn_result ask(thread_turn t) {
    send(std::move(t));
    sched.run();
    auto rs = results();
    EXPECT_EQ(rs.size(), 1u);
    return rs.empty() ? turn_result{} : rs.front();
  }

  /// The butler finished work item `work_id` with `reply`.
  void finish(const std::string& work_id, const std::string& reply) {
    route_response r;
    r.status = "ok";
    r.work_id = work_id;
    r.result = R"({"reply":")" + reply + R"("})";
    self->send(th, done_atom_v, std::move(r));
    sched.run();
  }

  /// The butler's session stopped work item `work_id` on a cancel.
  void cancelled(const std::string& work_id) {
    route_response r;
    r.status = "error";
    r.work_id = work_id;
    r.error_class = "cancelled";
    r.error_message = "cancelled";
    self->send(th, done_atom_v, std::move(r));
    sched.run();
  }

  uint32_t cancel(const std::string& run_id) {
    uint32_t n = 0;
    self->send(th, cancel_atom_v, run_id);
    sched.run();
    self->receive(
      [&](uint32_t x) {
        n = x;
      },
      caf::after(0s) >>
        [&] {
          ADD_FAILURE() << "no answer to cancel";
        });
    return n;
  }

  int64_t idle_since() {
    int64_t x = 0;
    self->send(th, idle_atom_v);
    sched.run();
    self->receive(
      [&](int64_t y) {
        x = y;
      },
      caf::after(0s) >>
        [&] {
          ADD_FAILURE() << "no answer to idle";
        });
    return x;
  }

  uint64_t metric(const std::string& name) {
    return ctx->metrics.get_counter(name, "").value();
  }

  /// The event types subscribers of chat-1 saw, in order, with the state
  /// of `run` events (e.g. "run:accepted").
  std::vector<std::string> events() const {
    std::vector<std::string> out;
    for (auto& chunk : frames) {
      for (size_t pos = chunk.find("event: "); pos != std::string::npos;
           pos = chunk.find("event: ", pos + 1)) {
        auto end = chunk.find('\n', pos);
        auto type = chunk.substr(pos + 7, end - pos - 7);
        if (type == "run") {
          auto s = chunk.find(R"("state":")", end);
          auto e = chunk.find('"', s + 9);
          type += ":" + chunk.substr(s + 9, e - s - 9);
        }
        out.push_back(type);
      }
    }
    return out;
  }

  std::string all_frames() const {
    std::string out;
    for (auto& f : frames)
      out += f;
    return out;
  }
};

using strings = std::vector<std::string>;

TEST_F(Thread, ATurnWithNoActiveRunStartsARunOnItsButler) {
  start();
  auto r = ask(turn("m1", "steer", "plan my week"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "start");
  EXPECT_EQ(r.cursor, 1);
  EXPECT_FALSE(r.duplicate);
  ASSERT_FALSE(r.run_id.empty());
  // The turn was stored before the run went out, as a start of a new run.
  auto turns = db->writes_of("thread_turn_insert");
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].params, (strings{"chat-1", "m1", "plan my week", r.run_id,
                                      "start", "general", "", "", "0", ""}));
  // The butler got route.execute for the run, answering to the thread.
  ASSERT_EQ(general->routes.size(), 1u);
  route_envelope sent;
  ASSERT_FALSE(parse_route(general->routes[0].envelope, sent));
  EXPECT_EQ(sent.request_id, r.run_id);
  EXPECT_EQ(sent.prompt, "plan my week");
  EXPECT_EQ(sent.source_thread_identity, "chat-1");
  EXPECT_EQ(general->routes[0].trigger_source, "thread");
  EXPECT_EQ(general->routes[0].reply_to, caf::actor_cast<caf::actor>(th));
  // Once stored by the butler the run is running on work item w1.
  auto updates = db->writes_of("thread_run_update");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].params, (strings{r.run_id, "running", "w1", "", ""}));
  EXPECT_EQ(updates[0].key, "chat-1");
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_EQ(notes->at(0), (test::run_note{r.run_id, "chat-1", true}));
  EXPECT_EQ(events(), (strings{"transcript", "run:accepted", "run:running"}));
  EXPECT_EQ(metric("butlers_thread_turns_total"), 1u);
  EXPECT_EQ(metric("butlers_thread_runs_started_total"), 1u);
  EXPECT_EQ(idle_since(), -1) << "a thread with a run is not idle";
}

TEST_F(Thread, ATurnGoesToTheButlerItNames) {
  auto health = std::make_shared<test::butler_script>();
  spawn_butler("health", health);
  start();
  auto t = turn("m1");
  t.butler = "health";
  auto r = ask(t);
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(health->routes.size(), 1u);
  EXPECT_TRUE(general->routes.empty());
  EXPECT_EQ(db->writes_of("thread_turn_insert")[0].params[5], "health");
}

TEST_F(Thread, ATurnsModelMaxStepsAndSenderGoWithItsRunEvenWhenQueued) {
  start();
  auto t = turn("m1");
  t.model = "chosen-1";
  t.max_steps = 3;
  t.sender = "web:0123456789abcdef";
  auto first = ask(t);
  EXPECT_EQ(first.status, 200u);
  // Stored with the run, and in its envelope.
  auto stored = db->writes_of("thread_turn_insert")[0].params;
  EXPECT_EQ(strings(stored.begin() + 6, stored.end()),
            (strings{"web:0123456789abcdef", "chosen-1", "3", ""}));
  ASSERT_EQ(general->routes.size(), 1u);
  route_envelope sent;
  ASSERT_FALSE(parse_route(general->routes[0].envelope, sent));
  EXPECT_EQ(sent.run_model, "chosen-1");
  EXPECT_EQ(sent.run_max_steps, 3u);
  EXPECT_EQ(sent.source_sender_identity, "web:0123456789abcdef");
  // A steer applies neither to the run it joins; a queued turn keeps its
  // own until its run starts.
  auto s = turn("m2", "steer", "also this");
  s.model = "ignored";
  ask(s);
  auto q = turn("m3", "queue", "next thing");
  q.max_steps = 7;
  ask(q);
  finish("w1", "first done");
  ASSERT_EQ(general->routes.size(), 2u);
  ASSERT_FALSE(parse_route(general->routes[1].envelope, sent));
  EXPECT_EQ(sent.run_model, "");
  EXPECT_EQ(sent.run_max_steps, 7u);
  EXPECT_EQ(sent.source_sender_identity, "api") << "none given";
}

TEST_F(Thread, ARunsOutcomeJoinsTheTranscriptAndTheThreadGoesIdle) {
  start();
  auto r = ask(turn("m1"));
  finish("w1", "done it");
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params,
            (strings{"chat-1", r.run_id, "general", "reply", "done it",
                     R"({"reply":"done it"})", "ok", ""}));
  EXPECT_EQ(notes->back(), (test::run_note{r.run_id, "chat-1", false}));
  EXPECT_EQ(events(), (strings{"transcript", "run:accepted", "run:running",
                               "transcript", "run:ok"}));
  EXPECT_NE(all_frames().find(R"("role":"assistant")"), std::string::npos);
  EXPECT_GE(idle_since(), 0);
  // The summary scope saw the run end last, with the thread's digest.
  ASSERT_FALSE(summaries.empty());
  EXPECT_NE(summaries.back().find(R"("run_status":"ok")"), std::string::npos)
    << summaries.back();
  EXPECT_NE(summaries.back().find(R"("last_message_preview":"done it")"),
            std::string::npos)
    << summaries.back();
}

TEST_F(Thread, ItsSnapshotListsItsRunsAndItsSummaryCarriesTheDigest) {
  start();
  auto r = ask(turn("m1", "steer", "  plan\n my week"));
  auto q = ask(turn("m2", "queue", "then the month"));
  ASSERT_EQ(q.kind, "queued");
  self->send(th, snapshot_atom_v);
  sched.run();
  thread_live live;
  self->receive(
    [&](thread_live& x) {
      live = std::move(x);
    },
    [&](caf::error& err) {
      ADD_FAILURE() << sys.render(err);
    });
  ASSERT_EQ(live.active.size(), 1u);
  EXPECT_EQ(live.active[0].run_id, r.run_id);
  EXPECT_EQ(live.active[0].state, "running");
  ASSERT_EQ(live.queued.size(), 1u);
  EXPECT_EQ(live.queued[0].run_id, q.run_id);
  EXPECT_EQ(live.queued[0].state, "queued");
  ASSERT_FALSE(summaries.empty());
  auto& last = summaries.back();
  EXPECT_NE(last.find(R"("title":"plan")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("last_message_preview":"then the month")"),
            std::string::npos)
    << last;
  EXPECT_NE(last.find(R"("last_message_at_unix_ms":1002)"), std::string::npos)
    << last;
  EXPECT_NE(last.find(R"("run_status":"running","run_error":null)"),
            std::string::npos)
    << last;
}

TEST_F(Thread, AFailedRunEndsWithItsErrorClass) {
  start();
  auto r = ask(turn("m1"));
  route_response resp;
  resp.status = "error";
  resp.work_id = "w1";
  resp.error_class = "runtime_error";
  resp.error_message = "boom";
  self->send(th, done_atom_v, resp);
  sched.run();
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params,
            (strings{"chat-1", r.run_id, "general", "error",
                     "runtime_error: boom", "", "error", "runtime_error"}));
}

TEST_F(Thread, AButlerThatRefusesTheRunEndsItAtOnce) {
  general->refuse = "overload_rejected";
  start();
  auto r = ask(turn("m1"));
  EXPECT_EQ(r.status, 200u) << "the turn itself was stored";
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params[6], "error");
  EXPECT_EQ(replies[0].params[7], "overload_rejected");
  EXPECT_TRUE(db->writes_of("thread_run_update").empty());
}

TEST_F(Thread, ASteerDuringARunGoesToItsWorkItem) {
  start();
  auto first = ask(turn("m1"));
  auto r = ask(turn("m2", "steer", "also tuesday"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "steer");
  EXPECT_EQ(r.run_id, first.run_id);
  EXPECT_EQ(r.cursor, 2);
  EXPECT_EQ(general->routes.size(), 1u) << "no second run";
  ASSERT_EQ(general->steers.size(), 1u);
  EXPECT_EQ(general->steers[0].first, "w1");
  EXPECT_EQ(general->steers[0].second.message_id, "m2");
  EXPECT_EQ(general->steers[0].second.text, "also tuesday");
  EXPECT_GT(general->steers[0].second.accepted_us, 0);
  EXPECT_EQ(db->writes_of("thread_turn_insert")[1].params,
            (strings{"chat-1", "m2", "also tuesday", first.run_id, "steer",
                     "general", "", "", "0", ""}));
  EXPECT_EQ(events().back(), "steer.accepted");
  EXPECT_EQ(metric("butlers_thread_steers_total"), 1u);
}

TEST_F(Thread, ASteerBeforeTheButlerStoredTheRunIsSentOnceItHas) {
  general->hold = true;
  start();
  send(turn("m1"));
  sched.run();
  send(turn("m2", "steer", "more"));
  sched.run();
  auto rs = results();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].kind, "steer");
  EXPECT_TRUE(general->steers.empty()) << "no work item to steer yet";
  self->send(butlers->at("general"), caf::tick_atom_v);
  sched.run();
  ASSERT_EQ(general->steers.size(), 1u);
  EXPECT_EQ(general->steers[0].first, "w1");
  EXPECT_EQ(general->steers[0].second.message_id, "m2");
}

TEST_F(Thread, SteerInputAppliedAtABoundaryIsPublished) {
  start();
  auto r = ask(turn("m1"));
  steer_applied applied;
  applied.work_id = "w1";
  applied.turn = 2;
  applied.applied_us = 5000;
  steer_input in;
  in.message_id = "m2";
  in.accepted_us = 1000;
  in.arrived_us = 2000;
  in.arrived_turn = 1;
  applied.inputs.push_back(in);
  self->send(th, steer_atom_v, applied);
  sched.run();
  EXPECT_EQ(events().back(), "steer.applied");
  auto all = all_frames();
  EXPECT_NE(all.find(R"("run_id":")" + r.run_id + R"(","turn":2)"),
            std::string::npos);
  EXPECT_NE(all.find(R"("message_ids":["m2"])"), std::string::npos);
  EXPECT_NE(all.find(R"("waited_us":3000)"), std::string::npos);
  EXPECT_EQ(metric("butlers_thread_steers_applied_total"), 1u);
  // A report for a work item the thread does not run is ignored.
  applied.work_id = "w9";
  self->send(th, steer_atom_v, applied);
  sched.run();
  EXPECT_EQ(metric("butlers_thread_steers_applied_total"), 1u);
}

/// One image's reference, as a turn's `attachments` carries it.
const std::string one_file = R"([{"sha256":")" + std::string(64, 'c')
                             + R"(","media_type":"image/png","size":8,)"
                               R"("name":"p.png"}])";

/// The hashes of the files route.execute `envelope` names.
strings hashes_of(const std::string& envelope) {
  route_envelope sent;
  strings out;
  if (parse_route(envelope, sent))
    return {"<not a route>"};
  for (auto& x : parse_attachments(sent.attachments))
    out.push_back(x.sha256);
  return out;
}

TEST_F(Thread, QueueWaitsForTheActiveRunAndStartsWhenItEnds) {
  start();
  auto first = ask(turn("m1"));
  auto queued = turn("m2", "queue", "next thing");
  queued.attachments = one_file;
  auto r = ask(queued);
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "queued");
  EXPECT_NE(r.run_id, first.run_id);
  EXPECT_EQ(general->routes.size(), 1u) << "the queued run waits";
  EXPECT_EQ(db->writes_of("thread_turn_insert")[1].params[4], "queued");
  EXPECT_EQ(db->writes_of("thread_turn_insert")[1].params[9], one_file)
    << "its files are stored with the run";
  EXPECT_EQ(notes->back(), (test::run_note{r.run_id, "chat-1", true}));
  EXPECT_EQ(events().back(), "run:queued");
  EXPECT_EQ(metric("butlers_thread_runs_queued_total"), 1u);
  finish("w1", "first done");
  // The queued run is accepted and goes to the butler.
  ASSERT_EQ(general->run_ids.size(), 2u);
  EXPECT_EQ(general->run_ids[1], r.run_id);
  EXPECT_EQ(hashes_of(general->routes[1].envelope),
            strings{std::string(64, 'c')})
    << "the queued turn's files go with its run";
  auto updates = db->writes_of("thread_run_update");
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_EQ(updates[1].params, (strings{r.run_id, "accepted", "", "", ""}));
  EXPECT_EQ(updates[2].params, (strings{r.run_id, "running", "w2", "", ""}));
}

TEST_F(Thread, QueueIsRefused429WhenMaxQueuedRunsAreQueued) {
  env.cfg.max_queued_runs = 1;
  start();
  auto first = ask(turn("m1"));
  EXPECT_EQ(ask(turn("m2", "queue")).status, 200u);
  auto r = ask(turn("m3", "queue"));
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.error, "overload_rejected");
  EXPECT_EQ(r.active_run_id, first.run_id);
  EXPECT_EQ(db->writes_of("thread_turn_insert").size(), 2u)
    << "nothing stored for the refused turn";
  EXPECT_EQ(metric("butlers_thread_overload_rejected_total"), 1u);
}

TEST_F(Thread, InterruptCancelsTheActiveRunAndStartsANewOne) {
  start();
  auto first = ask(turn("m1"));
  auto r = ask(turn("m2", "interrupt", "stop, do this"));
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.kind, "start");
  EXPECT_NE(r.run_id, first.run_id);
  EXPECT_EQ(general->cancels, strings{"w1"});
  ASSERT_EQ(general->run_ids.size(), 2u);
  EXPECT_EQ(general->run_ids[1], r.run_id);
  EXPECT_EQ(metric("butlers_thread_runs_interrupted_total"), 1u);
  EXPECT_EQ(metric("butlers_thread_runs_cancelled_total"), 1u);
  auto ev = events();
  EXPECT_NE(std::find(ev.begin(), ev.end(), "run:cancelling"), ev.end());
  // The interrupted run ends cancelled once its session stopped.
  cancelled("w1");
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params[1], first.run_id);
  EXPECT_EQ(replies[0].params[6], "cancelled");
  EXPECT_EQ(idle_since(), -1) << "the new run is still active";
}

TEST_F(Thread, RejectAndAStaleExpectedRunAnswer409WithNothingStored) {
  start();
  auto first = ask(turn("m1"));
  auto r = ask(turn("m2", "reject"));
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.error, "run_active");
  EXPECT_EQ(r.active_run_id, first.run_id);
  auto t = turn("m3");
  t.expected_run_id = "0190b7a2-0000-7000-8000-000000000000";
  r = ask(t);
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.error, "run_changed");
  EXPECT_EQ(db->writes_of("thread_turn_insert").size(), 1u);
  EXPECT_EQ(metric("butlers_thread_conflicts_total"), 2u);
  t.expected_run_id = first.run_id;
  EXPECT_EQ(ask(t).kind, "steer") << "the right expected run steers";
}

TEST_F(Thread, TurnsBeyondMaxPendingTurnsAre429) {
  env.cfg.max_pending_turns = 1;
  start();
  // The first is being decided, the second waits, the third finds the
  // pending turns full.
  send(turn("m1"));
  send(turn("m2"));
  send(turn("m3"));
  sched.run();
  auto rs = results();
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].status, 429u);
  EXPECT_EQ(rs[0].error, "overload_rejected");
  EXPECT_EQ(rs[1].kind, "start");
  EXPECT_EQ(rs[2].kind, "steer");
  EXPECT_EQ(metric("butlers_thread_overload_rejected_total"), 1u);
  EXPECT_EQ(metric("butlers_thread_turns_total"), 2u);
}

TEST_F(Thread, ARetriedMessageIdGetsTheOriginalAnswer) {
  start();
  auto r = ask(turn("m1"));
  auto again = ask(turn("m1", "queue"));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.run_id, r.run_id);
  EXPECT_EQ(again.kind, "start");
  EXPECT_EQ(db->writes_of("thread_turn_insert").size(), 1u)
    << "this activation remembers it";
  EXPECT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(metric("butlers_thread_turn_duplicates_total"), 1u);
}

TEST_F(Thread, AMessageIdStoredBeforeThisActivationIsAnsweredFromTheStore) {
  db->turns["m1"] = {"7", "0190b7a2-0000-7000-8000-000000000001", "start"};
  start();
  auto r = ask(turn("m1"));
  EXPECT_TRUE(r.duplicate);
  EXPECT_EQ(r.cursor, 7);
  EXPECT_EQ(r.run_id, "0190b7a2-0000-7000-8000-000000000001");
  EXPECT_TRUE(general->routes.empty()) << "nothing applied again";
  EXPECT_EQ(metric("butlers_thread_turn_duplicates_total"), 1u);
}

TEST_F(Thread, AnUnknownButlerIs404) {
  start();
  auto t = turn("m1");
  t.butler = "nobody";
  auto r = ask(t);
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(r.error, "not_found");
  EXPECT_TRUE(db->writes.empty());
}

TEST_F(Thread, WithTheDatabaseDownTheTurnIs503AndNothingStarts) {
  db->down = true;
  start();
  auto r = ask(turn("m1"));
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(r.error, "database_unavailable");
  EXPECT_TRUE(general->routes.empty());
  EXPECT_GE(idle_since(), 0);
}

TEST_F(Thread, CancelStopsTheActiveRunAndDropsQueuedOnes) {
  start();
  auto first = ask(turn("m1"));
  auto queued = ask(turn("m2", "queue"));
  EXPECT_EQ(cancel(queued.run_id), 1u);
  // A queued run never started: it ends cancelled at once.
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params[1], queued.run_id);
  EXPECT_EQ(replies[0].params[6], "cancelled");
  EXPECT_TRUE(general->cancels.empty());
  EXPECT_EQ(cancel(""), 1u) << "every run: the active one";
  EXPECT_EQ(general->cancels, strings{"w1"});
  EXPECT_EQ(cancel("no-such-run"), 0u);
  cancelled("w1");
  replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].params[1], first.run_id);
  EXPECT_EQ(replies[1].params[6], "cancelled");
  EXPECT_EQ(general->routes.size(), 1u) << "the dropped run never starts";
  EXPECT_GE(idle_since(), 0);
}

TEST_F(Thread, ANewActorResumesTheRunsItsPredecessorLeftOpen) {
  auto r1 = std::string{"0190b7a2-0000-7000-8000-00000000000a"};
  auto r2 = std::string{"0190b7a2-0000-7000-8000-00000000000b"};
  db->open_runs = {{r1, "general", "running", R"(["first"])", "", "", "0",
                    one_file},
                   {r2, "general", "queued", R"(["second"])", "", "", "0",
                    one_file}};
  start(true);
  ASSERT_EQ(db->reads.size(), 1u);
  EXPECT_EQ(db->reads[0].query, "thread_open_runs");
  EXPECT_EQ(db->reads[0].params, strings{"chat-1"});
  // The running run goes to its butler again (which dedupes on the run
  // id); the queued one waits behind it.
  EXPECT_EQ(general->run_ids, strings{r1});
  route_envelope sent;
  ASSERT_FALSE(parse_route(general->routes[0].envelope, sent));
  EXPECT_EQ(sent.prompt, "first");
  EXPECT_EQ(hashes_of(general->routes[0].envelope),
            strings{std::string(64, 'c')})
    << "a resumed run keeps its turn's files";
  EXPECT_EQ(notes->size(), 3u);
  finish("w1", "ok");
  EXPECT_EQ(general->run_ids, (strings{r1, r2}));
  EXPECT_EQ(hashes_of(general->routes[1].envelope),
            strings{std::string(64, 'c')})
    << "and so does a queued one";
  // New turns see the resumed runs.
  EXPECT_EQ(ask(turn("m3")).run_id, r2);
}

// -- collect mode
// ---------------------------------------------------------------

struct CollectThread : Thread {
  CollectThread() {
    env.cfg.collect_ms = 500;
    env.cfg.collect_max_ms = 2000;
  }

  /// The prompt of the n-th route.execute the butler got (from 0).
  std::string prompt(size_t n) {
    route_envelope sent;
    if (n >= general->routes.size()
        || parse_route(general->routes[n].envelope, sent))
      return "<none>";
    return sent.prompt;
  }
};

TEST_F(CollectThread, TurnsWithinCollectMsBecomeOneRunWithEveryInputInOrder) {
  start();
  auto a = ask(turn("m1", "steer", "book a table"));
  sched.advance_time(100ms);
  auto b = ask(turn("m2", "steer", "for four"));
  sched.advance_time(100ms);
  auto c = ask(turn("m3", "queue", "at eight"));
  // Each turn was stored and answered at once, with the run it joined.
  for (auto& r : {a, b, c}) {
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.kind, "collect");
    EXPECT_EQ(r.run_id, a.run_id);
  }
  EXPECT_EQ(c.cursor, 3);
  auto turns = db->writes_of("thread_turn_insert");
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[2].params, (strings{"chat-1", "m3", "at eight", a.run_id,
                                      "collect", "general", "", "", "0", ""}));
  EXPECT_TRUE(general->routes.empty()) << "the window is open";
  EXPECT_EQ(idle_since(), -1) << "a thread with an open window is busy";
  // 500 ms after the last turn the window closes: one run, all three.
  sched.advance_time(499ms);
  sched.run();
  EXPECT_TRUE(general->routes.empty());
  sched.advance_time(1ms);
  sched.run();
  ASSERT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(general->run_ids, strings{a.run_id});
  EXPECT_EQ(prompt(0), "book a table\n\nfor four\n\nat eight");
  auto updates = db->writes_of("thread_run_update");
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].params, (strings{a.run_id, "accepted", "", "", ""}));
  EXPECT_EQ(updates[1].params, (strings{a.run_id, "running", "w1", "", ""}));
  EXPECT_EQ(events(), (strings{"transcript", "run:collecting", "transcript",
                               "transcript", "run:accepted", "run:running"}));
  EXPECT_EQ(metric("butlers_thread_turns_collected_total"), 3u);
  EXPECT_EQ(metric("butlers_thread_runs_started_total"), 1u);
  ASSERT_EQ(notes->size(), 2u);
  EXPECT_EQ(notes->at(0), (test::run_note{a.run_id, "chat-1", true}));
  // With the run active the modes apply as ever: this one steers it.
  auto d = ask(turn("m4", "steer", "by the window"));
  EXPECT_EQ(d.kind, "steer");
  EXPECT_EQ(d.run_id, a.run_id);
  ASSERT_EQ(general->steers.size(), 1u);
  EXPECT_EQ(general->steers[0].second.text, "by the window");
}

TEST_F(CollectThread, AWindowClosesAtCollectMaxMsThoughTurnsKeepComing) {
  env.cfg.collect_max_ms = 1000;
  start();
  auto a = ask(turn("m1", "steer", "t0"));
  for (int i = 1; i <= 2; ++i) {
    sched.advance_time(400ms);
    sched.run();
    EXPECT_EQ(ask(turn("m" + std::to_string(i + 1), "steer",
                       "t" + std::to_string(i)))
                .kind,
              "collect");
  }
  EXPECT_TRUE(general->routes.empty());
  sched.advance_time(199ms);
  sched.run();
  EXPECT_TRUE(general->routes.empty());
  sched.advance_time(1ms); // 1000 ms after the first turn
  sched.run();
  ASSERT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(prompt(0), "t0\n\nt1\n\nt2");
  EXPECT_EQ(ask(turn("m4", "steer", "t3")).kind, "steer");
  EXPECT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(general->run_ids, strings{a.run_id});
}

TEST_F(CollectThread, AFullWindowStartsItsRunAtOnce) {
  env.cfg.collect_max_turns = 2;
  start();
  ask(turn("m1", "steer", "one"));
  EXPECT_TRUE(general->routes.empty());
  ask(turn("m2", "steer", "two"));
  ASSERT_EQ(general->routes.size(), 1u) << "no time passed";
  EXPECT_EQ(prompt(0), "one\n\ntwo");
  EXPECT_EQ(ask(turn("m3", "steer", "three")).kind, "steer");
}

TEST_F(CollectThread, ATurnTooBigToJoinStartsTheWindowsRunAndSteersIt) {
  start();
  auto a = ask(turn("m1", "steer", "short"));
  auto big = ask(turn("m2", "steer", std::string(64 * 1024, 'x')));
  EXPECT_EQ(big.kind, "steer");
  EXPECT_EQ(big.run_id, a.run_id);
  ASSERT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(prompt(0), "short");
  ASSERT_EQ(general->steers.size(), 1u);
}

TEST_F(CollectThread, EachButlerCollectsInAWindowOfItsOwn) {
  auto health = std::make_shared<test::butler_script>();
  spawn_butler("health", health);
  start();
  auto a = ask(turn("m1", "steer", "for general"));
  auto h = turn("m2", "steer", "for health");
  h.butler = "health";
  auto b = ask(h);
  EXPECT_EQ(b.kind, "collect");
  EXPECT_NE(b.run_id, a.run_id);
  sched.advance_time(500ms);
  sched.run();
  EXPECT_EQ(general->routes.size(), 1u);
  EXPECT_EQ(health->routes.size(), 1u);
}

TEST_F(CollectThread, ExpectingAnotherRunThanTheCollectingOneIsRunChanged) {
  start();
  auto a = ask(turn("m1"));
  auto t = turn("m2");
  t.expected_run_id = "0190b7a2-0000-7000-8000-00000000000f";
  auto r = ask(t);
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(r.error, "run_changed");
  EXPECT_EQ(r.active_run_id, a.run_id);
  t.message_id = "m3";
  t.expected_run_id = a.run_id;
  EXPECT_EQ(ask(t).kind, "collect");
}

TEST_F(CollectThread, CancellingACollectingRunEndsItAndNothingStarts) {
  start();
  auto a = ask(turn("m1"));
  ask(turn("m2"));
  EXPECT_EQ(cancel(a.run_id), 1u);
  auto replies = db->writes_of("thread_reply_insert");
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].params[1], a.run_id);
  EXPECT_EQ(replies[0].params[6], "cancelled");
  EXPECT_EQ(notes->back(), (test::run_note{a.run_id, "chat-1", false}));
  // The window's timer finds nothing to close.
  sched.advance_time(2s);
  sched.run();
  EXPECT_TRUE(general->routes.empty());
  EXPECT_GE(idle_since(), 0);
  // The next turn opens a new window.
  auto c = ask(turn("m3"));
  EXPECT_EQ(c.kind, "collect");
  EXPECT_NE(c.run_id, a.run_id);
}

TEST_F(CollectThread, ARunWhoseWindowWasOpenAtACrashRunsWithItsTurns) {
  auto r1 = std::string{"0190b7a2-0000-7000-8000-00000000000c"};
  db->open_runs = {{r1, "general", "collecting", R"(["one","two"])"}};
  start(true);
  // Not reopened: the stored turns run at once, as one run.
  ASSERT_EQ(general->run_ids, strings{r1});
  EXPECT_EQ(prompt(0), "one\n\ntwo");
  auto updates = db->writes_of("thread_run_update");
  ASSERT_GE(updates.size(), 1u);
  EXPECT_EQ(updates[0].params, (strings{r1, "accepted", "", "", ""}));
  EXPECT_EQ(ask(turn("m3", "steer", "three")).kind, "steer");
}

} // namespace
} // namespace butlers
