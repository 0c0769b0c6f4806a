// Group commit in the persistence actor, deterministically (CAF's
// test_coordinator) over fake connections that implement the real
// connection actor's typed interface: what accumulates while connections
// are busy, batch limits, and failing fast when the database is gone.

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include <caf/after.hpp>
#include <caf/spawn_options.hpp>
#include <gtest/gtest.h>

#include "actors/inbox_writer.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// What the fake connections saw, and the batches they have not answered.
struct connection_script {
  bool announce_up = true;
  /// Lost (tick_atom): like the real connection, answers every write with
  /// database_unavailable until it reconnects.
  bool lost = false;
  std::vector<size_t> batch_sizes;
  std::vector<std::pair<write_batch, caf::typed_response_promise<write_result>>>
    held;
};

write_result success(const write_batch& b) {
  write_result r;
  for (auto& rec : b.appends)
    r.appends.push_back(stored_as(rec.context.request_id, false));
  for (size_t i = 0; i < b.claims.size(); ++i)
    r.claims.push_back(claim_result{true, 1, {}});
  r.completions.assign(b.completions.size(), true);
  for (auto& x : b.named)
    r.named.push_back(named_result{true, {{x.query}}});
  for (size_t i = 0; i < b.work.size(); ++i)
    r.work.push_back(work_result{true, false, 1, {}, {}, {}});
  return r;
}

/// Holds every batch until told: connect_atom commits all held batches,
/// tick_atom loses the connection (held batches fail, the writer is told).
inbox_connection_actor::behavior_type fake_connection(
  inbox_connection_actor::pointer self, uint32_t index,
  std::shared_ptr<connection_script> script, inbox_writer_actor writer) {
  if (script->announce_up)
    self->send(writer, link_atom_v, index, true, std::string{});
  return {
    [self, script](write_atom,
                   write_batch& batch) -> caf::result<write_result> {
      if (script->lost)
        return caf::error{butlers_errc::database_unavailable,
                          std::string{"database unavailable"}};
      script->batch_sizes.push_back(batch.size());
      auto rp = self->make_response_promise<write_result>();
      script->held.emplace_back(std::move(batch), rp);
      return rp;
    },
    [script](connect_atom) {
      auto held = std::move(script->held);
      script->held.clear();
      for (auto& [batch, rp] : held)
        rp.deliver(success(batch));
    },
    [self, script, index, writer](caf::tick_atom) {
      script->lost = true;
      auto held = std::move(script->held);
      script->held.clear();
      for (auto& [batch, rp] : held)
        rp.deliver(caf::error{butlers_errc::database_unavailable,
                              std::string{"connection lost"}});
      self->send(writer, link_atom_v, index, false,
                 std::string{"connection lost"});
    },
  };
}

struct InboxWriter : test::deterministic_fixture {
  std::shared_ptr<connection_script>
    script = std::make_shared<connection_script>();
  /// One script per connection beyond the first (connection 0 uses
  /// `script`), and every connection's handle.
  std::vector<std::shared_ptr<connection_script>> scripts;
  std::vector<inbox_connection_actor> connections;
  inbox_writer_actor writer;
  inbox_connection_actor connection;

  /// `delay_us`: group_commit_delay_us; 0 leaves the mailbox rule alone.
  /// Lanes for routing writes (connections 0..lanes-1).
  uint32_t lanes = 1;

  void start(uint32_t max_batch = 256, uint32_t n = 1, uint32_t delay_us = 0) {
    database_config db;
    db.max_batch = max_batch;
    db.writer_connections = n;
    db.lanes = lanes;
    db.group_commit_delay_us = delay_us;
    scripts.assign(1, script);
    for (uint32_t i = 1; i < n; ++i)
      scripts.push_back(std::make_shared<connection_script>());
    connections.assign(n, inbox_connection_actor{});
    auto all = scripts;
    auto* conns = &connections;
    writer = sys.spawn(inbox_writer_with, db, ctx,
                       connection_factory{[all, conns](auto w, uint32_t i) {
                         (*conns)[i] = w->template spawn<
                           caf::linked>(fake_connection, i, all[i],
                                        caf::actor_cast<inbox_writer_actor>(w));
                         return (*conns)[i];
                       }});
    sched.run();
    connection = connections[0];
  }

  ~InboxWriter() override {
    self->send_exit(writer, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void append(int i) {
    inbox_record r;
    r.context.request_id = "id-" + std::to_string(i);
    r.dedupe_key = "k-" + std::to_string(i);
    self->send(writer, append_atom_v, std::move(r));
  }

  void claim(int i) {
    self->send(writer, claim_atom_v,
               inbox_ref{"id-" + std::to_string(i), int64_t{0}});
  }

  /// Collects the replies now in our mailbox: ids, or error codes.
  std::vector<std::variant<std::string, butlers_errc>> replies() {
    std::vector<std::variant<std::string, butlers_errc>> out;
    bool more = true;
    while (more)
      self->receive(
        [&](append_result& r) {
          out.emplace_back(r.request_id);
        },
        [&](claim_result&) {
          out.emplace_back(std::string{"claimed"});
        },
        [&](caf::error& err) {
          out.emplace_back(code_of(err));
        },
        caf::after(0s) >>
          [&] {
            more = false;
          });
    return out;
  }
};

TEST_F(InboxWriter, UnavailableAtOnceWithoutAConnection) {
  script->announce_up = false;
  start();
  append(1);
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<butlers_errc>(r[0]), butlers_errc::database_unavailable);
  EXPECT_TRUE(script->batch_sizes.empty());
  EXPECT_FALSE(ctx->status.database_ready);
}

TEST_F(InboxWriter, GroupsWhatArrivesWhileTheConnectionIsBusy) {
  start();
  EXPECT_TRUE(ctx->status.database_ready);
  for (int i = 0; i < 5; ++i)
    append(i);
  sched.run();
  // The flush token queued behind the five: one transaction for all.
  ASSERT_EQ(script->batch_sizes, std::vector<size_t>{5});
  for (int i = 5; i < 15; ++i)
    append(i);
  sched.run();
  EXPECT_EQ(script->batch_sizes.size(), 1u) << "the connection is busy";
  EXPECT_TRUE(replies().empty()) << "nobody is answered before the commit";
  self->send(connection, connect_atom_v); // commit the first batch
  sched.run();
  EXPECT_EQ(replies().size(), 5u);
  // The moment the connection was free it took all ten that waited.
  ASSERT_EQ(script->batch_sizes, (std::vector<size_t>{5, 10}));
  self->send(connection, connect_atom_v);
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 10u);
  EXPECT_EQ(std::get<std::string>(r[0]), "id-5");
  EXPECT_EQ(ctx->metrics.get_counter("butlers_inbox_writer_commits_total", "")
              .value(),
            2u);
}

TEST_F(InboxWriter, WithADelayABatchWaitsUntilThatLongAfterThePreviousOne) {
  start(256, 1, 300);
  append(0);
  sched.run();
  // Nothing went out before: the first goes at once.
  ASSERT_EQ(script->batch_sizes, std::vector<size_t>{1});
  self->send(connection, connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 1u);
  // The connection is free and the mailbox empty, but the previous batch
  // went out less than 300 us ago: these wait for more.
  for (int i = 1; i < 4; ++i)
    append(i);
  sched.run();
  EXPECT_EQ(script->batch_sizes.size(), 1u);
  sched.advance_time(std::chrono::microseconds{200});
  sched.run();
  append(4);
  sched.run();
  EXPECT_EQ(script->batch_sizes.size(), 1u) << "200 of 300 us have passed";
  sched.advance_time(std::chrono::microseconds{100});
  sched.run();
  ASSERT_EQ(script->batch_sizes, (std::vector<size_t>{1, 4}));
  self->send(connection, connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 4u);
  // Long after the previous batch, the next goes at once again.
  sched.advance_time(std::chrono::milliseconds{5});
  sched.run();
  append(5);
  sched.run();
  EXPECT_EQ(script->batch_sizes, (std::vector<size_t>{1, 4, 1}));
}

TEST_F(InboxWriter, WithADelayAFullBatchGoesAtOnce) {
  start(4, 1, 300);
  append(0);
  sched.run();
  self->send(connection, connect_atom_v);
  sched.run();
  for (int i = 1; i < 6; ++i)
    append(i);
  sched.run();
  // Four fill a batch: no reason to wait. The fifth waits for the delay.
  ASSERT_EQ(script->batch_sizes, (std::vector<size_t>{1, 4}));
  self->send(connection, connect_atom_v);
  sched.run();
  EXPECT_EQ(script->batch_sizes.size(), 2u);
  sched.advance_time(std::chrono::microseconds{300});
  sched.run();
  EXPECT_EQ(script->batch_sizes, (std::vector<size_t>{1, 4, 1}));
}

TEST_F(InboxWriter, TheDelayHoldsAppendsOnlyNotRoutingWrites) {
  start(256, 2, 300);
  append(0);
  sched.run();
  self->send(connections[1], connect_atom_v);
  sched.run();
  append(1);
  claim(7);
  sched.run();
  // The claim goes out on its lane at once; the append waits.
  EXPECT_EQ(script->batch_sizes, std::vector<size_t>{1});
  EXPECT_EQ(scripts[1]->batch_sizes, std::vector<size_t>{1});
  sched.advance_time(std::chrono::microseconds{300});
  sched.run();
  EXPECT_EQ(scripts[1]->batch_sizes, (std::vector<size_t>{1, 1}));
}

TEST_F(InboxWriter, BatchesNeverExceedMaxBatch) {
  start(4);
  for (int i = 0; i < 10; ++i)
    append(i);
  sched.run();
  for (int round = 0; round < 3; ++round) {
    self->send(connection, connect_atom_v);
    sched.run();
  }
  EXPECT_EQ(script->batch_sizes, (std::vector<size_t>{4, 4, 2}));
  EXPECT_EQ(replies().size(), 10u);
}

TEST_F(InboxWriter, ALanesWritesGoInBatchesOfMaxBatchInSubmissionOrder) {
  lanes = 2;
  start(4, 3);
  // Ten routing writes of one request, of two kinds, while its lane's
  // first batch is out: never more than max_batch at once, and a batch
  // never holds a write submitted after one left for a later batch (a plan
  // must not commit before its claim).
  claim(7);
  sched.run();
  for (int i = 0; i < 9; ++i) {
    if (i % 3 == 2)
      self->send(writer, exec_atom_v,
                 named_statement{"fanout_segment_update", {"id-7"}});
    else
      claim(7);
  }
  sched.run();
  auto& first = *scripts[0];
  for (int round = 0; round < 3; ++round) {
    self->send(connections[0], connect_atom_v);
    sched.run();
  }
  EXPECT_EQ(first.batch_sizes, (std::vector<size_t>{1, 4, 4, 1}));
  ASSERT_EQ(first.held.size(), 1u);
  // Submitted: c c n c c n | c c n -> batches {c c n c} {c n c c} {n}.
  EXPECT_EQ(first.held[0].first.named.size(), 1u);
  EXPECT_TRUE(first.held[0].first.claims.empty());
  EXPECT_TRUE(scripts[1]->batch_sizes.empty()) << "one lane, one connection";
}

TEST_F(InboxWriter, AWriteRequestIsAnsweredOnceWhenItsLastWriteCommitted) {
  lanes = 2;
  start(256, 3);
  // Writes of two requests (two lanes) in one request, while lane 0 has a
  // batch out: each is placed as if it came alone.
  claim(0);
  sched.run();
  write_request req;
  req.named.push_back(named_statement{"fanout_segment_update", {"id-1"}});
  req.named.push_back(named_statement{"fanout_plan_store", {"id-2"}});
  completion c;
  c.ref = inbox_ref{"id-1", 0};
  c.state = "parsed";
  req.completions.push_back(c);
  self->send(writer, exec_atom_v, std::move(req));
  sched.run();
  // Commit whatever is out, round by round, until the reply arrives.
  std::optional<write_reply> reply;
  for (int round = 0; round < 4 && !reply; ++round) {
    for (auto& conn : connections)
      self->send(conn, connect_atom_v);
    sched.run();
    self->receive(
      [&](write_reply& r) {
        reply = std::move(r);
      },
      [&](claim_result&) {}, caf::after(0s) >> [] {});
  }
  ASSERT_TRUE(reply) << "answered once everything committed";
  EXPECT_EQ(reply->errors, (std::vector<uint8_t>{0, 0, 0}));
  ASSERT_EQ(reply->named.size(), 2u);
  EXPECT_EQ(reply->named[0].rows[0][0], "fanout_segment_update");
  EXPECT_EQ(reply->named[1].rows[0][0], "fanout_plan_store");
  EXPECT_EQ(reply->completions, (std::vector<bool>{true}));
}

TEST_F(InboxWriter, AWriteRequestCarriesEachWritesFailure) {
  start(256, 1);
  write_request req;
  req.named.push_back(named_statement{"fanout_segment_update", {"id-1"}});
  work_op op;
  op.kind = work_op_kind::finish;
  op.item.work_id = "w-1";
  req.work.push_back(op);
  self->send(writer, exec_atom_v, std::move(req));
  sched.run();
  // The connection is lost with the batch out: every write fails, each
  // with its code, in one reply.
  self->send(connection, caf::tick_atom_v);
  sched.run();
  std::optional<write_reply> reply;
  self->receive(
    [&](write_reply& r) {
      reply = std::move(r);
    },
    caf::after(0s) >> [] {});
  ASSERT_TRUE(reply);
  auto unavailable = static_cast<uint8_t>(butlers_errc::database_unavailable);
  EXPECT_EQ(reply->errors, (std::vector<uint8_t>{unavailable, unavailable}));
  EXPECT_FALSE(reply->error_messages[0].empty());
}

TEST_F(InboxWriter, ABatchOfRecordsSpansFlushesAndIsAnsweredOnceInOrder) {
  start(4);
  auto many = [&](int from, int to) {
    std::vector<inbox_record> recs;
    for (int i = from; i < to; ++i) {
      inbox_record r;
      r.context.request_id = "id-" + std::to_string(i);
      r.dedupe_key = "k-" + std::to_string(i);
      recs.push_back(std::move(r));
    }
    self->send(writer, append_atom_v, std::move(recs));
  };
  auto reply = [&] {
    std::vector<append_result> out;
    self->receive(
      [&](std::vector<append_result>& r) {
        out = std::move(r);
      },
      caf::after(0s) >> [] {});
    return out;
  };
  many(0, 10);
  sched.run();
  EXPECT_EQ(script->batch_sizes, std::vector<size_t>{4});
  for (int round = 0; round < 2; ++round) {
    self->send(connection, connect_atom_v);
    sched.run();
    EXPECT_TRUE(reply().empty()) << "answered only once all ten committed";
  }
  self->send(connection, connect_atom_v);
  sched.run();
  EXPECT_EQ(script->batch_sizes, (std::vector<size_t>{4, 4, 2}));
  auto r = reply();
  ASSERT_EQ(r.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r[i].request_id, "id-" + std::to_string(i));
    EXPECT_EQ(r[i].error_code, 0);
  }
  // A lost connection: the records it held carry the error, in place.
  many(10, 13);
  sched.run();
  self->send(connection, caf::tick_atom_v);
  sched.run();
  r = reply();
  ASSERT_EQ(r.size(), 3u);
  for (auto& x : r) {
    EXPECT_TRUE(x.request_id.empty());
    EXPECT_EQ(x.error_code,
              static_cast<uint8_t>(butlers_errc::database_unavailable));
  }
  // With no connection up, the whole batch is refused at once.
  many(13, 15);
  sched.run();
  auto errors = replies();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(std::get<butlers_errc>(errors[0]),
            butlers_errc::database_unavailable);
}

TEST_F(InboxWriter, LosingTheDatabaseFailsEveryWaiterAtOnce) {
  start();
  for (int i = 0; i < 3; ++i)
    append(i);
  sched.run(); // three in flight on the connection
  for (int i = 3; i < 5; ++i)
    append(i);
  sched.run();                              // two pending behind them
  self->send(connection, caf::tick_atom_v); // the connection breaks
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 5u);
  for (auto& x : r)
    EXPECT_EQ(std::get<butlers_errc>(x), butlers_errc::database_unavailable);
  EXPECT_FALSE(ctx->status.database_ready);
  append(9);
  sched.run();
  r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<butlers_errc>(r[0]), butlers_errc::database_unavailable);
}

TEST_F(InboxWriter, AppendsHaveTheirOwnConnectionBesideRoutingWrites) {
  start(256, 2);
  auto& ordered = *scripts[0];
  auto& appends = *scripts[1];
  for (int i = 0; i < 3; ++i)
    claim(i);
  sched.run();
  ASSERT_EQ(ordered.batch_sizes, std::vector<size_t>{3});
  // Connection 0 is busy with the claims; new requests do not wait for it.
  for (int i = 0; i < 4; ++i)
    append(i);
  sched.run();
  ASSERT_EQ(appends.batch_sizes, std::vector<size_t>{4});
  EXPECT_EQ(ordered.batch_sizes.size(), 1u) << "appends never join claims";
  self->send(connections[1], connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 4u) << "appends committed, claims still open";
  self->send(connection, connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 3u);
}

TEST_F(InboxWriter,
       ASecondAppendLaneOnlyTakesABatchOnceAQuarterOfMaxBatchWaits) {
  start(16, 3); // spill threshold: 16 / 4 = 4 appends
  auto& first = *scripts[1];
  auto& second = *scripts[2];
  for (int i = 0; i < 2; ++i)
    append(i);
  sched.run();
  ASSERT_EQ(first.batch_sizes, std::vector<size_t>{2});
  // The first append lane is busy. Three waiting appends stay together for
  // it, though the second lane is idle: at moderate load that keeps commits
  // (and their fixed cost) few.
  for (int i = 2; i < 5; ++i)
    append(i);
  sched.run();
  EXPECT_TRUE(second.batch_sizes.empty());
  EXPECT_EQ(first.batch_sizes.size(), 1u);
  // A fourth makes a quarter of max_batch: the second lane takes them all.
  append(5);
  sched.run();
  ASSERT_EQ(second.batch_sizes, std::vector<size_t>{4});
  // Both busy: new appends wait for whichever frees first.
  for (int i = 6; i < 12; ++i)
    append(i);
  sched.run();
  self->send(connections[2], connect_atom_v);
  sched.run();
  EXPECT_EQ(second.batch_sizes, (std::vector<size_t>{4, 6}));
  EXPECT_EQ(replies().size(), 4u);
  // Once the first lane is free again it takes every batch, however small.
  self->send(connections[1], connect_atom_v);
  self->send(connections[2], connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 8u);
  append(12);
  sched.run();
  EXPECT_EQ(first.batch_sizes, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(second.batch_sizes, (std::vector<size_t>{4, 6}));
}

TEST_F(InboxWriter, WhenTheFirstAppendLaneIsDownTheNextTakesEveryBatch) {
  start(16, 3);
  self->send(connections[1], caf::tick_atom_v); // lost
  sched.run();
  auto& second = *scripts[2];
  append(1);
  sched.run();
  ASSERT_EQ(second.batch_sizes, std::vector<size_t>{1});
  self->send(connections[2], connect_atom_v);
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<std::string>(r[0]), "id-1");
  EXPECT_TRUE(scripts[1]->batch_sizes.empty());
}

TEST_F(InboxWriter, RoutingWritesGoOneBatchAtATimeEvenWhenTheirLaneIsDown) {
  start(256, 2);
  auto& ordered = *scripts[0];
  auto& appends = *scripts[1];
  claim(1);
  sched.run();
  ASSERT_EQ(ordered.batch_sizes, std::vector<size_t>{1});
  claim(2);
  sched.run();
  EXPECT_EQ(ordered.batch_sizes.size(), 1u) << "the second waits its turn";
  EXPECT_TRUE(appends.batch_sizes.empty()) << "and never overtakes on 1";
  self->send(connection, connect_atom_v);
  sched.run();
  ASSERT_EQ(ordered.batch_sizes, (std::vector<size_t>{1, 1}));
  // Connection 0 breaks (claim 2 fails with it); routing writes move to the
  // connection that is left, still one batch at a time.
  self->send(connection, caf::tick_atom_v);
  sched.run();
  claim(3);
  sched.run();
  ASSERT_EQ(appends.batch_sizes, std::vector<size_t>{1});
  claim(4);
  append(5);
  sched.run();
  EXPECT_EQ(appends.batch_sizes.size(), 1u)
    << "one routing batch in flight at a time, and the append waits for "
       "the only connection up";
  self->send(connections[1], connect_atom_v);
  sched.run();
  ASSERT_EQ(appends.batch_sizes, (std::vector<size_t>{1, 1})) << "claim 4";
  self->send(connections[1], connect_atom_v);
  sched.run();
  ASSERT_EQ(appends.batch_sizes, (std::vector<size_t>{1, 1, 1})) << "append";
  self->send(connections[1], connect_atom_v);
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(std::get<std::string>(r[0]), "claimed");
  EXPECT_EQ(std::get<butlers_errc>(r[1]), butlers_errc::database_unavailable);
  EXPECT_EQ(std::get<std::string>(r[2]), "claimed");
  EXPECT_EQ(std::get<std::string>(r[3]), "claimed");
  EXPECT_EQ(std::get<std::string>(r[4]), "id-5");
}

/// Two request ids whose writes take different lanes of two (a lane is the
/// hash of the request id, modulo the lanes).
std::pair<int, int> ids_in_two_lanes() {
  auto lane = [](int i) {
    auto id = "id-" + std::to_string(i);
    return std::hash<std::string_view>{}(id) % 2;
  };
  for (int j = 1; j < 100; ++j)
    if (lane(j) != lane(0))
      return {0, j};
  return {0, 0};
}

TEST_F(InboxWriter,
       ARequestsRoutingWritesWaitForItsLaneWhileAnotherLaneSpills) {
  lanes = 2;
  start(4, 3); // spill over at 4 / 4 = 1 waiting write
  auto [a, b] = ids_in_two_lanes();
  ASSERT_NE(a, b);
  claim(a);
  sched.run();
  ASSERT_EQ(scripts[0]->batch_sizes, std::vector<size_t>{1});
  // A's lane has a batch in flight: A's next write waits for it, though
  // the second lane connection is idle. B's lane is free: B spills over.
  claim(a);
  claim(b);
  sched.run();
  EXPECT_EQ(scripts[0]->batch_sizes, std::vector<size_t>{1});
  ASSERT_EQ(scripts[1]->batch_sizes, std::vector<size_t>{1});
  EXPECT_EQ(scripts[1]->held[0].first.claims[0].request_id,
            "id-" + std::to_string(b));
  EXPECT_TRUE(scripts[2]->batch_sizes.empty()) << "the append connection";
  self->send(connections[0], connect_atom_v);
  sched.run();
  ASSERT_EQ(scripts[0]->batch_sizes, (std::vector<size_t>{1, 1}));
  EXPECT_EQ(scripts[0]->held[0].first.claims[0].request_id,
            "id-" + std::to_string(a));
}

TEST_F(InboxWriter, AFreeConnectionTakesEveryWaitingLaneAsOneBatch) {
  lanes = 2;
  start(256, 3); // spill over only at 64 waiting writes
  auto [a, b] = ids_in_two_lanes();
  claim(a);
  sched.run();
  ASSERT_EQ(scripts[0]->batch_sizes, std::vector<size_t>{1});
  // Below the spill threshold both wait for the first lane connection...
  claim(a);
  claim(b);
  sched.run();
  EXPECT_TRUE(scripts[1]->batch_sizes.empty());
  // ...which takes both lanes as one batch once it is free.
  self->send(connections[0], connect_atom_v);
  sched.run();
  EXPECT_EQ(scripts[0]->batch_sizes, (std::vector<size_t>{1, 2}));
  self->send(connections[0], connect_atom_v);
  sched.run();
  EXPECT_EQ(replies().size(), 3u);
}

TEST_F(InboxWriter, NothingIsWrittenBeforeConnectionZeroMadeThePartitions) {
  script->announce_up = false; // connection 0 still connecting
  start(256, 2);
  EXPECT_FALSE(ctx->status.database_ready) << "only connection 1 is up";
  append(1);
  sched.run();
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<butlers_errc>(r[0]), butlers_errc::database_unavailable);
  EXPECT_TRUE(scripts[1]->batch_sizes.empty());
  // Connection 0 connects (and with it, the partitions exist).
  self->send(writer, link_atom_v, uint32_t{0}, true, std::string{});
  sched.run();
  EXPECT_TRUE(ctx->status.database_ready);
  append(2);
  sched.run();
  EXPECT_EQ(scripts[1]->batch_sizes, std::vector<size_t>{1});
}

TEST_F(InboxWriter, AButlerAcceptRidesTheAppendLaneWhileRoutingWritesCommit) {
  start(256, 2);
  auto& ordered = *scripts[0];
  auto& appends = *scripts[1];
  claim(1);
  sched.run();
  ASSERT_EQ(ordered.batch_sizes, std::vector<size_t>{1});
  work_op start_op;
  start_op.kind = work_op_kind::start;
  self->send(writer, work_atom_v, start_op);
  work_op accept;
  accept.kind = work_op_kind::append;
  self->send(writer, work_atom_v, accept);
  sched.run();
  // The new work item commits beside the claim; the start keeps its place
  // on the ordered lane.
  ASSERT_EQ(appends.batch_sizes, std::vector<size_t>{1});
  ASSERT_EQ(appends.held.size(), 1u);
  EXPECT_EQ(appends.held[0].first.work.size(), 1u);
  EXPECT_EQ(appends.held[0].first.work[0].kind, work_op_kind::append);
  EXPECT_EQ(ordered.batch_sizes.size(), 1u);
  self->send(connection, connect_atom_v);
  sched.run();
  ASSERT_EQ(ordered.batch_sizes, (std::vector<size_t>{1, 1}));
  EXPECT_EQ(ordered.held[0].first.work[0].kind, work_op_kind::start);
}

TEST_F(InboxWriter, AcceptsForAButlerCommitInArrivalOrderWhenBothLanesAreFree) {
  // Both lanes idle, a routing write and two accepts in the mailbox. The
  // ordered lane must not take the first accept along with the routing
  // write while the append lane takes the second: two transactions on two
  // connections commit in either order, and the butler would queue the
  // second accept ahead of the first (seen as a thread run overtaking the
  // run before it).
  start(256, 2);
  auto& ordered = *scripts[0];
  auto& appends = *scripts[1];
  claim(1);
  work_op first;
  first.kind = work_op_kind::append;
  first.item.work_id = "w-1";
  self->send(writer, work_atom_v, first);
  work_op second = first;
  second.item.work_id = "w-2";
  self->send(writer, work_atom_v, second);
  sched.run();
  ASSERT_EQ(ordered.held.size(), 1u);
  EXPECT_TRUE(ordered.held[0].first.work.empty())
    << "no accept on the ordered lane";
  ASSERT_EQ(appends.held.size(), 1u);
  auto& work = appends.held[0].first.work;
  ASSERT_EQ(work.size(), 2u) << "both accepts in one transaction, in order";
  EXPECT_EQ(work[0].item.work_id, "w-1");
  EXPECT_EQ(work[1].item.work_id, "w-2");
}

} // namespace
} // namespace butlers
