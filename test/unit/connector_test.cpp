// The connector actor in virtual time over a switchboard that commits when
// the test says so: answers only after the commit, the in-flight limit
// (a typed, counted refusal), a batch taking only the room left, and the
// counting of each outcome.

#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/connector.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// The commits the fake switchboard holds until the test releases them.
struct held_commits {
  std::vector<caf::typed_response_promise<append_result>> singles;
  std::vector<caf::typed_response_promise<std::vector<append_result>>> batches;
  std::vector<size_t> batch_sizes;
  /// Run by the switchboard on its next tick: promises are delivered from
  /// within the actor that made them.
  std::function<void()> on_tick;
};

switchboard_actor::behavior_type holding_switchboard(
  switchboard_actor::pointer self, std::shared_ptr<held_commits> held) {
  auto unused = caf::error{butlers_errc::internal_error, "not used"};
  return {
    [self, held](ingest_atom, inbox_record&) {
      auto rp = self->make_response_promise<append_result>();
      held->singles.push_back(rp);
      return rp;
    },
    [self, held](ingest_atom, std::vector<inbox_record>& batch) {
      auto rp = self->make_response_promise<std::vector<append_result>>();
      held->batches.push_back(rp);
      held->batch_sizes.push_back(batch.size());
      return rp;
    },
    [](enqueue_atom, std::vector<inbox_record>&) {
      return uint32_t{0};
    },
    [unused](deliver_atom, std::string&) -> caf::result<route_response> {
      return unused;
    },
    [](done_atom, route_response&) {},
    [unused](operate_atom, operator_action&) -> caf::result<std::string> {
      return unused;
    },
    [](retry_atom, const std::string&, const std::string&) {},
    [held](caf::tick_atom) {
      if (held->on_tick)
        held->on_tick();
      held->on_tick = nullptr;
    },
    [](drain_atom) {
      return uint32_t{0};
    },
    [](circuit_atom, const std::string&, bool) {},
    [](refill_atom, inbox_scanner_actor&) {},
  };
}

using reply = std::variant<append_result, std::vector<append_result>,
                           butlers_errc>;

struct Connector : test::deterministic_fixture {
  std::shared_ptr<held_commits> held = std::make_shared<held_commits>();
  switchboard_actor switchboard = sys.spawn(holding_switchboard, held);
  connector_actor connector;
  connector_metrics metrics = connector_metrics::of(ctx->metrics, "api");

  Connector() {
    connector_params p;
    p.cfg.name = "api";
    p.cfg.type = connector_type::http;
    p.cfg.endpoint_identity = "client";
    p.cfg.max_in_flight = 2;
    p.switchboard = switchboard;
    p.ctx = ctx;
    connector = sys.spawn(butlers::connector, std::move(p));
    sched.run();
  }

  ~Connector() override {
    caf::anon_send_exit(connector, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(switchboard, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void submit_one() {
    self->send(connector, ingest_atom_v, inbox_record{});
    sched.run();
  }

  void submit(size_t n) {
    self->send(connector, ingest_atom_v, std::vector<inbox_record>(n));
    sched.run();
  }

  /// The replies now in our mailbox.
  std::vector<reply> replies() {
    std::vector<reply> out;
    bool more = true;
    while (more)
      self->receive(
        [&](append_result& r) {
          out.emplace_back(std::move(r));
        },
        [&](std::vector<append_result>& r) {
          out.emplace_back(std::move(r));
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

  /// Runs `f` inside the switchboard (where its promises live), then lets
  /// everything that follows happen.
  void commit(std::function<void()> f) {
    held->on_tick = std::move(f);
    self->send(switchboard, caf::tick_atom_v);
    sched.run();
  }

  static append_result stored(std::string id, bool duplicate = false) {
    return append_result{std::move(id), duplicate, 0, {}};
  }
};

TEST_F(Connector, AnswersOnlyAfterTheSwitchboardCommitted) {
  submit_one();
  ASSERT_EQ(held->singles.size(), 1u);
  EXPECT_TRUE(replies().empty());
  EXPECT_EQ(metrics.in_flight->value(), 1);
  commit([this] {
    held->singles[0].deliver(stored("r-1"));
  });
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<append_result>(r[0]).request_id, "r-1");
  EXPECT_EQ(metrics.accepted->value(), 1u);
  EXPECT_EQ(metrics.in_flight->value(), 0);
}

TEST_F(Connector, RefusesBeyondMaxInFlightWithACountedOverload) {
  submit_one();
  submit_one();
  submit_one();
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<butlers_errc>(r[0]), butlers_errc::overload_rejected);
  EXPECT_EQ(held->singles.size(), 2u) << "the third never reached it";
  EXPECT_EQ(metrics.refused->value(), 1u);
  commit([this] {
    held->singles[0].deliver(stored("r-1", true));
  });
  submit_one();
  EXPECT_EQ(held->singles.size(), 3u) << "room again after a commit";
  EXPECT_EQ(metrics.deduped->value(), 1u);
}

TEST_F(Connector, ABatchTakesOnlyTheRoomLeftInOrder) {
  submit_one();
  submit(3);
  ASSERT_EQ(held->batch_sizes, (std::vector<size_t>{1}));
  EXPECT_EQ(metrics.in_flight->value(), 2);
  commit([this] {
    held->batches[0].deliver(std::vector<append_result>{stored("r-2")});
  });
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  auto& results = std::get<std::vector<append_result>>(r[0]);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].request_id, "r-2");
  for (size_t i : {1, 2})
    EXPECT_EQ(static_cast<butlers_errc>(results[i].error_code),
              butlers_errc::overload_rejected);
  EXPECT_EQ(metrics.refused->value(), 2u);
  EXPECT_EQ(metrics.accepted->value(), 1u);
}

TEST_F(Connector, AFullConnectorRefusesAWholeBatchAtOnce) {
  submit_one();
  submit_one();
  submit(2);
  EXPECT_TRUE(held->batch_sizes.empty());
  auto r = replies();
  ASSERT_EQ(r.size(), 1u);
  for (auto& x : std::get<std::vector<append_result>>(r[0]))
    EXPECT_EQ(static_cast<butlers_errc>(x.error_code),
              butlers_errc::overload_rejected);
}

TEST_F(Connector, AFailedCommitIsPassedOnAndCountedAsAnError) {
  submit_one();
  submit(1);
  commit([this] {
    held->singles[0].deliver(
      caf::error{butlers_errc::database_unavailable, std::string{"down"}});
    held->batches[0].deliver(
      caf::error{butlers_errc::draining, std::string{"shutting down"}});
  });
  auto r = replies();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(std::get<butlers_errc>(r[0]), butlers_errc::database_unavailable);
  EXPECT_EQ(static_cast<butlers_errc>(
              std::get<std::vector<append_result>>(r[1]).at(0).error_code),
            butlers_errc::draining);
  EXPECT_EQ(metrics.errors->value(), 2u);
  EXPECT_EQ(metrics.in_flight->value(), 0);
}

TEST(ConnectorFault, IsOffUnlessTheEnvironmentNamesIt) {
  EXPECT_EQ(connector_fault_commits(nullptr), 0u);
  EXPECT_EQ(connector_fault_commits(""), 0u);
  EXPECT_EQ(connector_fault_commits("something_else"), 0u);
  EXPECT_EQ(connector_fault_commits("connector_after_commit"), 1u);
  EXPECT_EQ(connector_fault_commits("connector_after_commit=5"), 5u);
  EXPECT_EQ(connector_fault_commits("connector_after_commit=x"), 0u);
  EXPECT_EQ(connector_fault_commits("connector_after_commitX"), 0u);
}

} // namespace
} // namespace butlers
