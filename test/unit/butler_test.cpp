// The butler's accept-then-process pool, driven deterministically (CAF's
// test_coordinator, virtual time) against an in-memory route inbox that
// implements the inbox writer's typed interface. Sessions run the scripted
// runtime, whose turns are timers, so virtual time drives them too.

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/after.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <gtest/gtest.h>

#include "actors/butler.hpp"
#include "actors/messenger.hpp"
#include "runtime/uuid.hpp"
#include "test/support/deliveries.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/fake_writer.hpp"
#include "test/support/poll.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// The in-memory route inbox and what the test wants it to do.
struct route_inbox {
  struct row {
    work_item item;
    std::string state = "queued";
    std::string response;
    std::string error_class;
  };
  std::map<std::string, row> rows;
  /// Items a `lease` op hands out (recovery), then cleared.
  std::vector<work_item> recoverable;
  /// Answer appends with "unavailable".
  bool down = false;
  /// A duplicate append reads the item as it was before its result
  /// committed (the read and the commit raced).
  bool stale_reads = false;

  size_t count(const std::string& state) const {
    size_t n = 0;
    for (auto& [id, r] : rows)
      n += r.state == state ? 1 : 0;
    return n;
  }
};

/// One work op against the stand-in table, as the real statements do.
caf::expected<work_result> apply(route_inbox* db, work_op& op) {
  work_result r;
  auto& it = op.item;
  switch (op.kind) {
    case work_op_kind::append: {
      if (db->down)
        return caf::error{butlers_errc::database_unavailable, "down"};
      for (auto& [id, row] : db->rows)
        if (row.item.butler == it.butler && row.item.request_id == it.request_id
            && row.item.segment_id == it.segment_id) {
          r.ok = true;
          r.duplicate = true;
          r.state = db->stale_reads ? "running" : row.state;
          r.items.push_back(row.item);
          return r;
        }
      // As the real statement: an item whose session starts at once is
      // stored running, its first attempt counted.
      auto stored = it;
      stored.lease_token = 1;
      stored.attempts = op.start ? 1 : 0;
      db->rows[it.work_id] = route_inbox::row{stored,
                                              op.start ? "running" : "queued",
                                              {},
                                              {}};
      r.ok = true;
      r.state = op.start ? "running" : "queued";
      r.items.push_back(stored);
      return r;
    }
    case work_op_kind::lease:
      r.ok = true;
      for (auto& item : db->recoverable) {
        db->rows[item.work_id] = route_inbox::row{item, "queued", {}, {}};
        r.items.push_back(item);
      }
      db->recoverable.clear();
      return r;
    default: break;
  }
  auto i = db->rows.find(it.work_id);
  if (i == db->rows.end() || i->second.item.lease_token != it.lease_token
      || (i->second.state != "queued" && i->second.state != "running"))
    return r; // fenced
  r.ok = true;
  if (op.kind == work_op_kind::start) {
    i->second.state = "running";
    r.attempts = ++i->second.item.attempts;
  } else if (op.kind == work_op_kind::finish) {
    i->second.state = op.state;
    i->second.response = op.response;
    i->second.error_class = op.error_class;
  }
  return r;
}

/// The shared fake writer with `db` as its route inbox.
std::shared_ptr<test::writer_script> route_inbox_writer(
  std::shared_ptr<route_inbox> db) {
  auto s = std::make_shared<test::writer_script>();
  s->on_work = [db](work_op& op) {
    return apply(db.get(), op);
  };
  return s;
}

/// A stand-in switchboard that takes every notify (the butler hands
/// replies over before writing the result).
switchboard_actor::behavior_type fake_switchboard(
  switchboard_actor::pointer, std::shared_ptr<std::vector<std::string>> notes) {
  return {
    [](ingest_atom, inbox_record&) -> caf::result<append_result> {
      return caf::error{butlers_errc::internal_error, "not used"};
    },
    [](ingest_atom,
       std::vector<inbox_record>&) -> caf::result<std::vector<append_result>> {
      return caf::error{butlers_errc::internal_error, "not used"};
    },
    [](enqueue_atom, std::vector<inbox_record>&) {
      return uint32_t{0};
    },
    [notes](deliver_atom, std::string& notify) {
      notes->push_back(notify);
      route_response r;
      r.status = "accepted";
      return r;
    },
    [](done_atom, route_response&) {},
    [](operate_atom, operator_action&) -> caf::result<std::string> {
      return caf::error{butlers_errc::internal_error, "not used"};
    },
    [](retry_atom, const std::string&, const std::string&) {},
    [](caf::tick_atom) {},
    [](drain_atom) {
      return uint32_t{0};
    },
    [](circuit_atom, const std::string&, bool) {},
    [](refill_atom, inbox_scanner_actor&) {},
  };
}

route_envelope envelope_of(const std::string& butler, const std::string& prompt,
                           const std::string& tool = "route.execute") {
  route_envelope env;
  env.request_id = make_uuid_v7().to_string();
  env.received_at = "2026-11-23T04:00:00Z";
  env.source_channel = "api";
  env.source_endpoint_identity = "tests";
  env.source_sender_identity = "user-1";
  env.butler = butler;
  env.tool = tool;
  env.prompt = prompt;
  return env;
}

std::string envelope(const std::string& butler, const std::string& prompt,
                     const std::string& tool = "route.execute") {
  return make_route_json(envelope_of(butler, prompt, tool));
}

struct Butler : test::deterministic_fixture {
  std::shared_ptr<route_inbox> db = std::make_shared<route_inbox>();
  std::shared_ptr<std::vector<std::string>>
    notes = std::make_shared<std::vector<std::string>>();
  /// What the writer was asked (every work op, in arrival order).
  std::shared_ptr<test::writer_script> script = route_inbox_writer(db);
  inbox_writer_actor writer = sys.spawn(test::fake_writer, script);

  Butler() {
    sb = sys.spawn(fake_switchboard, notes);
    ctx->set_switchboard(sb);
    // The fake writer is always up; butlers renew and recover only then.
    ctx->status.database_ready = true;
  }

  switchboard_actor sb;
  std::vector<butler_actor> spawned;

  ~Butler() override {
    for (auto& b : spawned)
      self->send_exit(b, caf::exit_reason::user_shutdown);
    self->send_exit(writer, caf::exit_reason::user_shutdown);
    self->send_exit(sb, caf::exit_reason::user_shutdown);
    sched.run();
  }

  butler_actor spawn(butler_config cfg) {
    butler_params p;
    p.cfg = std::move(cfg);
    p.node = "test-node";
    auto hdl = sys.spawn(butler, std::move(p), writer, ctx);
    spawned.push_back(hdl);
    sched.run();
    return hdl;
  }

  /// The messenger with these adapters.
  butler_actor spawn_messenger(std::vector<delivery_adapter_config> adapters) {
    messenger_config m;
    m.adapters = std::move(adapters);
    butler_params p;
    p.cfg = messenger_butler(m);
    p.adapters = m.adapters;
    p.node = "test-node";
    auto hdl = sys.spawn(messenger, std::move(p), writer, ctx);
    spawned.push_back(hdl);
    sched.run();
    return hdl;
  }

  static butler_config config(const std::string& name, uint32_t slots,
                              uint32_t max_pending = 100) {
    butler_config c;
    c.name = name;
    c.max_concurrent_sessions = slots;
    c.max_pending = max_pending;
    c.runtime.turn_ms = 200;
    return c;
  }

  /// The next reply in our mailbox, after running everything runnable.
  template<class T>
  T reply() {
    sched.run();
    T out{};
    self->receive(
      [&](T& x) {
        out = std::move(x);
      },
      [&](caf::error& err) {
        ADD_FAILURE() << sys.render(err);
      },
      caf::after(0s) >>
        [] {
          ADD_FAILURE() << "no reply";
        });
    return out;
  }

  /// route.execute, answered.
  route_response route(const butler_actor& b, const std::string& env,
                       const std::string& source = "route",
                       const std::string& origin = "") {
    self->send(b, route_atom_v, route_request{env, source, origin, {}});
    return reply<route_response>();
  }

  butler_status status(const butler_actor& b) {
    self->send(b, status_atom_v);
    return reply<butler_status>();
  }

  bool cancel(const butler_actor& b, const std::string& work_id) {
    self->send(b, cancel_atom_v, work_id);
    return reply<bool>();
  }

  /// Moves virtual time on (turns, timeouts, ticks) and runs what is due.
  void advance(caf::timespan d) {
    sched.advance_time(d);
    sched.run();
  }
};

TEST_F(Butler, OneSlotSerializesSessions) {
  auto b = spawn(config("health", 1));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(route(b, envelope("health", "take pill")).status, "accepted");
  auto s = status(b);
  EXPECT_EQ(s.active, 1u);
  EXPECT_EQ(s.pending, 2u);
  advance(200ms);
  EXPECT_EQ(db->count("ok"), 1u);
  EXPECT_EQ(status(b).active, 1u);
  advance(200ms);
  advance(200ms);
  EXPECT_EQ(db->count("ok"), 3u);
  EXPECT_EQ(status(b).active, 0u);
  EXPECT_EQ(notes->size(), 3u);
}

TEST_F(Butler, NSlotsRunNSessionsAtOnce) {
  auto b = spawn(config("health", 3));
  for (int i = 0; i < 4; ++i)
    route(b, envelope("health", "hello"));
  auto s = status(b);
  EXPECT_EQ(s.active, 3u);
  EXPECT_EQ(s.pending, 1u);
  advance(200ms);
  EXPECT_EQ(db->count("ok"), 3u);
  EXPECT_EQ(status(b).active, 1u);
}

TEST_F(Butler, ButlersDoNotShareSlots) {
  auto a = spawn(config("health", 1));
  auto b = spawn(config("finance", 1));
  route(a, envelope("health", "x"));
  route(a, envelope("health", "y"));
  route(b, envelope("finance", "z"));
  EXPECT_EQ(status(a).active, 1u);
  EXPECT_EQ(status(a).pending, 1u);
  EXPECT_EQ(status(b).active, 1u);
}

TEST_F(Butler, FullPendingQueueAnswersOverloadRejected) {
  auto b = spawn(config("health", 1, 2));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(route(b, envelope("health", "x")).status, "accepted");
  auto r = route(b, envelope("health", "x"));
  EXPECT_EQ(r.status, "error");
  EXPECT_EQ(r.error_class, "overload_rejected");
  EXPECT_TRUE(r.retryable);
  EXPECT_EQ(status(b).rejected, 1u);
  EXPECT_EQ(db->rows.size(), 3u) << "a rejected call stores nothing";
}

TEST_F(Butler, SelfTriggerWithEverySlotBusyIsRejected) {
  auto b = spawn(config("health", 1));
  route(b, envelope("health", "first"));
  auto own = route(b, envelope("health", "again"), "trigger", "health");
  EXPECT_EQ(own.status, "error");
  EXPECT_EQ(own.error_class, "overload_rejected");
  EXPECT_FALSE(own.retryable);
  auto other = route(b, envelope("health", "from finance"), "trigger",
                     "finance");
  EXPECT_EQ(other.status, "accepted") << "other sources still queue";
  advance(200ms);
  // Now a slot is free again (the queued item took it, so still busy).
  EXPECT_EQ(status(b).active, 1u);
}

TEST_F(Butler, ValidationErrorsNameTheProblem) {
  auto b = spawn(config("health", 1));
  auto bad_json = route(b, "{not json");
  EXPECT_EQ(bad_json.error_class, "validation_error");
  auto wrong_target = route(b, envelope("finance", "x"));
  EXPECT_EQ(wrong_target.error_class, "validation_error");
  EXPECT_NE(wrong_target.error_message.find("finance"), std::string::npos);
  auto no_tool = route(b, envelope("health", "x", "calendar.write"));
  EXPECT_EQ(no_tool.error_class, "validation_error");
  EXPECT_NE(no_tool.error_message.find("calendar.write"), std::string::npos);
  EXPECT_TRUE(db->rows.empty());
}

TEST_F(Butler, DuplicateDispatchIsOneWorkItem) {
  auto b = spawn(config("health", 1));
  auto env = envelope("health", "x");
  auto first = route(b, env);
  auto second = route(b, env);
  EXPECT_EQ(first.work_id, second.work_id);
  EXPECT_FALSE(first.duplicate);
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(status(b).active + status(b).pending, 1u);
}

TEST_F(Butler, AnItemWithASlotFreeSoonIsStoredStartedAndNeedsNoStartWrite) {
  // One slot: the first item starts now, the second once the first ends
  // (within one round of sessions): both are stored started. The third
  // waits longer and is started by a write of its own.
  auto b = spawn(config("health", 1));
  auto first = route(b, envelope("health", "a"));
  auto second = route(b, envelope("health", "b"));
  auto third = route(b, envelope("health", "c"));
  EXPECT_EQ(db->rows[first.work_id].state, "running");
  EXPECT_EQ(db->rows[first.work_id].item.attempts, 1);
  EXPECT_EQ(db->rows[second.work_id].state, "running") << "a slot soon";
  EXPECT_EQ(db->rows[second.work_id].item.attempts, 1);
  EXPECT_EQ(db->rows[third.work_id].state, "queued") << "no slot soon";
  EXPECT_EQ(status(b).active, 1u) << "still one session at a time";
  for (int i = 0; i < 3; ++i)
    advance(200ms); // each session ends, the next starts
  EXPECT_EQ(db->rows[first.work_id].state, "ok");
  EXPECT_EQ(db->rows[second.work_id].state, "ok");
  EXPECT_EQ(db->rows[third.work_id].state, "ok");
  std::vector<std::string> starts;
  for (auto& op : script->work)
    if (op.kind == work_op_kind::start)
      starts.push_back(op.item.work_id);
  EXPECT_EQ(starts, std::vector<std::string>{third.work_id});
  EXPECT_EQ(db->rows[second.work_id].item.attempts, 1) << "counted once";
}

TEST_F(Butler, StaleHolderCannotWriteItsResult) {
  auto b = spawn(config("health", 1));
  auto r = route(b, envelope("health", "x"));
  // Another node took the lease over (its token is newer).
  db->rows[r.work_id].item.lease_token = 2;
  advance(200ms);
  EXPECT_EQ(db->rows[r.work_id].state, "running") << "result not written";
  EXPECT_EQ(status(b).fenced, 1u);
  EXPECT_EQ(status(b).succeeded, 0u);
}

TEST_F(Butler, SessionTimeoutFailsWithTimeout) {
  auto cfg = config("health", 1);
  cfg.runtime.turn_ms = 5000;
  cfg.session_timeout_s = 1;
  auto b = spawn(cfg);
  auto r = route(b, envelope("health", "slow"));
  advance(1s);
  auto& row = db->rows[r.work_id];
  EXPECT_EQ(row.state, "error");
  EXPECT_EQ(row.error_class, "timeout");
  EXPECT_NE(row.response.find("\"retryable\":true"), std::string::npos);
}

TEST_F(Butler, SessionsStartedApartEachTimeOutAfterTheirOwnTimeout) {
  // One timer serves every running session: it fires for the earliest and
  // is armed again for the next.
  auto cfg = config("health", 2);
  cfg.runtime.turn_ms = 5000;
  cfg.session_timeout_s = 2;
  auto b = spawn(cfg);
  auto first = route(b, envelope("health", "first"));
  advance(1s);
  auto second = route(b, envelope("health", "second"));
  advance(1s);
  EXPECT_EQ(db->rows[first.work_id].error_class, "timeout");
  EXPECT_EQ(db->rows[second.work_id].state, "running");
  advance(1s);
  EXPECT_EQ(db->rows[second.work_id].state, "error");
  EXPECT_EQ(db->rows[second.work_id].error_class, "timeout");
}

TEST_F(Butler, AnEnvelopeParsedByItsInProcessAuthorIsNotParsedAgain) {
  auto b = spawn(config("health", 1));
  auto env = envelope_of("health", "from the parsed form");
  auto parsed = std::make_shared<const route_envelope>(env);
  // The text is what gets stored; the typed form is what gets checked.
  self->send(b, route_atom_v,
             route_request{make_route_json(env), "route", {}, {}, parsed});
  auto r = reply<route_response>();
  EXPECT_EQ(r.status, "accepted");
  EXPECT_EQ(db->rows[r.work_id].item.request_id, env.request_id);
  // The checks after parsing still apply to it.
  auto other = std::make_shared<route_envelope>(env);
  other->butler = "finance";
  self->send(b, route_atom_v,
             route_request{make_route_json(*other), "route", {}, {}, other});
  auto refused = reply<route_response>();
  EXPECT_EQ(refused.status, "error");
  EXPECT_EQ(refused.error_class, "validation_error");
}

TEST_F(Butler, InjectedFailuresCarryTheirClass) {
  auto cfg = config("health", 1);
  cfg.runtime.fail_rate = 1.0;
  cfg.runtime.fail_class = butlers_errc::target_unavailable;
  auto b = spawn(cfg);
  auto r = route(b, envelope("health", "x"));
  advance(200ms);
  EXPECT_EQ(db->rows[r.work_id].state, "error");
  EXPECT_EQ(db->rows[r.work_id].error_class, "target_unavailable");
  EXPECT_TRUE(notes->empty()) << "a failed session sends no reply";
}

TEST_F(Butler, CancelPendingAndRunningItems) {
  auto b = spawn(config("health", 1));
  auto running = route(b, envelope("health", "a"));
  auto waiting = route(b, envelope("health", "b"));
  EXPECT_TRUE(cancel(b, waiting.work_id));
  EXPECT_TRUE(cancel(b, running.work_id));
  EXPECT_FALSE(cancel(b, "no-such-item"));
  sched.run();
  EXPECT_EQ(db->rows[waiting.work_id].state, "cancelled");
  EXPECT_EQ(db->rows[running.work_id].state, "cancelled");
  EXPECT_EQ(status(b).active, 0u);
}

TEST_F(Butler, RecoveredItemsRunThroughTheSamePool) {
  work_item orphan;
  orphan.work_id = make_uuid_v7().to_string();
  orphan.butler = "health";
  orphan.request_id = make_uuid_v7().to_string();
  orphan.envelope = envelope("health", "left by a dead node");
  orphan.lease_token = 5;
  db->recoverable.push_back(orphan);
  auto b = spawn(config("health", 1));
  EXPECT_EQ(status(b).recovered, 1u);
  EXPECT_EQ(status(b).active, 1u);
  advance(200ms);
  EXPECT_EQ(db->rows[orphan.work_id].state, "ok");
}

TEST_F(Butler, ADuplicateThatReadTheItemOpenAfterItsResultIsToldTheResult) {
  // Recovered here and finished; then a dispatch of the same segment whose
  // append read the item before its result committed.
  auto env = envelope_of("health", "again");
  work_item orphan;
  orphan.work_id = make_uuid_v7().to_string();
  orphan.butler = "health";
  orphan.request_id = env.request_id;
  orphan.segment_id = env.segment_id;
  orphan.envelope = make_route_json(env);
  orphan.lease_token = 5;
  db->recoverable.push_back(orphan);
  auto b = spawn(config("health", 1));
  advance(200ms);
  ASSERT_EQ(db->rows[orphan.work_id].state, "ok");
  db->stale_reads = true;
  self
    ->send(b, route_atom_v,
           route_request{make_route_json(env), "route", {}, caf::actor{self}});
  auto accepted = reply<route_response>();
  EXPECT_EQ(accepted.status, "accepted");
  EXPECT_TRUE(accepted.duplicate);
  EXPECT_EQ(accepted.work_id, orphan.work_id);
  // Told at once, not left waiting for a write that already happened.
  sched.run();
  bool told = false;
  self->receive(
    [&](done_atom, route_response& r) {
      told = true;
      EXPECT_EQ(r.status, "ok");
      EXPECT_EQ(r.work_id, orphan.work_id);
    },
    caf::after(0s) >> [] {});
  EXPECT_TRUE(told) << "the dispatcher heard nothing of the finished item";
}

TEST_F(Butler, SchedulesStartSessionsWithTriggerSourceSchedule) {
  auto cfg = config("health", 1);
  schedule_config every;
  every.name = "digest";
  every.every_s = 60;
  every.prompt = "summarize the day";
  cfg.schedules.push_back(every);
  auto b = spawn(cfg);
  EXPECT_TRUE(db->rows.empty());
  advance(60s);
  ASSERT_EQ(db->rows.size(), 1u);
  auto& row = db->rows.begin()->second;
  EXPECT_EQ(row.item.trigger_source, "schedule");
  EXPECT_EQ(row.item.segment_id, "schedule:digest");
}

TEST_F(Butler, AnOutboxDeliveryRunsWithoutASessionAndIsWrittenOnce) {
  char dir[] = "/tmp/butlers-messenger-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  delivery_adapter_config outbox;
  outbox.kind = adapter_kind::outbox;
  outbox.path = std::string{dir} + "/outbox.jsonl";
  auto b = spawn_messenger({outbox});
  auto r = route(b, test::delivery_route("api"), "switchboard");
  ASSERT_EQ(r.status, "accepted") << r.error_message;
  // The line is synced on the outbox's own thread, which then reports.
  EXPECT_TRUE(test::eventually(
    [&] {
      sched.run();
      return db->rows[r.work_id].state == "ok";
    },
    10s, 5ms));
  EXPECT_NE(db->rows[r.work_id].response.find("notify_response"),
            std::string::npos);
  std::ifstream in{outbox.path};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 1) << all;
  EXPECT_NE(all.find("your reply"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_F(Butler, ADeliveryNoAdapterServesEndsAsAValidationError) {
  delivery_adapter_config outbox;
  outbox.kind = adapter_kind::outbox;
  outbox.path = "/nonexistent/outbox.jsonl";
  outbox.channels = {"telegram"};
  auto b = spawn_messenger({outbox});
  auto r = route(b, test::delivery_route("api"), "switchboard");
  ASSERT_EQ(r.status, "accepted") << r.error_message;
  sched.run();
  EXPECT_EQ(db->rows[r.work_id].state, "error");
  EXPECT_EQ(db->rows[r.work_id].error_class, "validation_error");
}

} // namespace
} // namespace butlers
