// The ingest bridge of an HTTP thread, in virtual time: one request to the
// switchboard per batch, failures for every token of a batch, and the
// deadline sweep on its interval.

#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "actors/http_ingest_bridge.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// What the fake switchboard saw, and whether it refuses batches.
struct switchboard_script {
  std::vector<size_t> batch_sizes;
  bool refuse = false;
};

/// A switchboard that stores every record of a batch as "r-<index>".
switchboard_actor::behavior_type fake_switchboard(
  switchboard_actor::pointer, std::shared_ptr<switchboard_script> script) {
  auto unused = caf::error{butlers_errc::internal_error, "not used"};
  return {
    [unused](ingest_atom, inbox_record&) -> caf::result<append_result> {
      return unused;
    },
    [script](ingest_atom, std::vector<inbox_record>& batch)
      -> caf::result<std::vector<append_result>> {
      if (script->refuse)
        return caf::error{butlers_errc::overload_rejected, std::string{"full"}};
      script->batch_sizes.push_back(batch.size());
      std::vector<append_result> out;
      for (size_t i = 0; i < batch.size(); ++i)
        out.push_back(append_result{"r-" + std::to_string(i), false, 0, {}});
      return out;
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
    [](caf::tick_atom) {},
    [](drain_atom) {
      return uint32_t{0};
    },
    [](circuit_atom, const std::string&, bool) {},
    [](refill_atom, inbox_scanner_actor&) {},
  };
}

struct HttpIngestBridge : test::deterministic_fixture {
  std::shared_ptr<switchboard_script>
    script = std::make_shared<switchboard_script>();
  switchboard_actor switchboard = sys.spawn(fake_switchboard, script);
  /// What the hooks saw.
  std::optional<switchboard_actor> current = switchboard;
  std::vector<uint64_t> done_tokens;
  std::vector<append_result> results;
  std::vector<uint64_t> failed_tokens;
  std::optional<http_reply> failure;
  int sweeps = 0;
  http_ingest_bridge_actor bridge;

  HttpIngestBridge() {
    http_ingest_hooks h;
    h.switchboard = [this] {
      return current ? *current : switchboard_actor{};
    };
    h.done = [this](std::vector<uint64_t> tokens,
                    std::vector<append_result> res) {
      done_tokens = std::move(tokens);
      results = std::move(res);
    };
    h.failed = [this](const std::vector<uint64_t>& tokens, http_reply r) {
      failed_tokens = tokens;
      failure = std::move(r);
    };
    h.sweep = [this] {
      ++sweeps;
    };
    h.sweep_interval = 50ms;
    bridge = sys.spawn(http_ingest_bridge, std::move(h));
    sched.run();
  }

  ~HttpIngestBridge() override {
    caf::anon_send_exit(bridge, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(switchboard, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void send_batch(size_t n, uint64_t first_token) {
    std::vector<inbox_record> batch(n);
    std::vector<uint64_t> tokens;
    for (size_t i = 0; i < n; ++i)
      tokens.push_back(first_token + i);
    caf::anon_send(bridge, ingest_atom_v, std::move(batch), std::move(tokens));
    sched.run();
  }
};

TEST_F(HttpIngestBridge, SendsABatchAsOneRequestAndReturnsItsResultsInOrder) {
  send_batch(3, 7);
  EXPECT_EQ(script->batch_sizes, (std::vector<size_t>{3}));
  EXPECT_EQ(done_tokens, (std::vector<uint64_t>{7, 8, 9}));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[2].request_id, "r-2");
  EXPECT_FALSE(failure);
}

TEST_F(HttpIngestBridge, FailsEveryRequestOfABatchWhileTheSwitchboardRestarts) {
  current.reset();
  send_batch(2, 1);
  EXPECT_TRUE(script->batch_sizes.empty());
  EXPECT_EQ(failed_tokens, (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->status, 503);
  EXPECT_NE(failure->body.find("the switchboard is restarting"),
            std::string::npos);
}

TEST_F(HttpIngestBridge, FailsEveryRequestOfABatchTheSwitchboardRefuses) {
  script->refuse = true;
  send_batch(2, 4);
  EXPECT_EQ(failed_tokens, (std::vector<uint64_t>{4, 5}));
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->status, 429);
  EXPECT_NE(failure->body.find(R"("message":"full")"), std::string::npos);
  EXPECT_TRUE(done_tokens.empty());
}

TEST_F(HttpIngestBridge, SweepsTheDeadlinesOnItsInterval) {
  EXPECT_EQ(sweeps, 0);
  sched.advance_time(50ms);
  sched.run();
  EXPECT_EQ(sweeps, 1);
  sched.advance_time(50ms);
  sched.run();
  EXPECT_EQ(sweeps, 2);
}

} // namespace
} // namespace butlers
