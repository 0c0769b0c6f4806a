// Fair admission (spec 001 §10.4) against the real node, the real
// PostgreSQL and real HTTP: one sender floods the node, a second sender
// posts a few messages after the flood, and the order in which the node
// claimed them (the ids of the inbox's transitions to 'progress') shows
// whether the second sender waited behind the flood.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

constexpr int flood = 1000;
constexpr int few = 10;

std::string envelope(const std::string& sender, int i) {
  auto key = sender + "-" + std::to_string(i);
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":")"
         + sender
         + R"("},)"
           R"("payload":{"raw":{},"normalized_text":"hello"},)"
           R"("control":{"idempotency_key":")"
         + key + R"("}})";
}

class Fairness : public node_fixture {
 protected:
  /// A node whose butler takes 50 ms a turn and that has at most 4
  /// requests in progress, so that a flood backs up in the hot-path queue
  /// (large enough to hold all of it: the order is the queue's, not the
  /// cold path's).
  void start(const std::string& fairness) {
    use_database("fairness");
    use_files("fairness");
    ASSERT_TRUE(start_node(
      node_head("fairness-test", 10)
      + "[switchboard]\nqueue_capacity = 5000\nworkers = 2\n"
        "max_in_progress = 4\nfairness = \""
      + fairness
      + "\"\n"
        "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
        "max_pending = 20000\n[butler.runtime]\nturn_ms = 50\n"
        "[messenger]\nmax_pending = 20000\n"
        "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
      + dir_ + "/outbox.jsonl\"\n"));
  }

  /// Sender "flood" posts `flood` messages from 4 connections at once, then
  /// sender "few" posts `few`.
  void post_flood_then_few() {
    std::atomic<int> accepted{0};
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t)
      posters.emplace_back([&, t] {
        http_client c{"127.0.0.1", port_};
        for (int i = t; i < flood; i += 4)
          if (c.post("/v1/ingest", envelope("flood", i)).status == 202)
            ++accepted;
      });
    for (auto& p : posters)
      p.join();
    ASSERT_EQ(accepted.load(), flood);
    claimed_first = count("SELECT count(DISTINCT request_id) FROM "
                          "inbox_transitions WHERE to_state = 'progress'");
    waiting = flood - claimed_first;
    // Posting is much faster than 4 requests at a time of 50 ms each.
    ASSERT_GT(waiting, flood / 2) << "the flood did not back up";
    for (int i = 0; i < few; ++i)
      ASSERT_EQ(http_->post("/v1/ingest", envelope("few", i)).status, 202);
  }

  int64_t count(const std::string& sql) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}.exec1(sql)[0].as<int64_t>();
  }

  /// Waits until every message of sender "few" was claimed.
  bool few_claimed() {
    return eventually(
      [&] {
        return count("SELECT count(DISTINCT t.request_id) FROM "
                     "inbox_transitions t JOIN message_inbox m USING "
                     "(request_id) WHERE t.to_state = 'progress' AND "
                     "m.source_sender_identity = 'few'")
               == few;
      },
      120s, 100ms);
  }

  /// How many of the flood were claimed before the `which` ('min': first,
  /// 'max': last) claim of sender "few".
  int64_t flood_claimed_before(const std::string& which) {
    return count(
      "WITH claims AS (SELECT m.source_sender_identity AS sender, "
      "min(t.id) AS at FROM inbox_transitions t JOIN message_inbox m USING "
      "(request_id) WHERE t.to_state = 'progress' GROUP BY m.request_id, "
      "m.source_sender_identity) SELECT count(*) FROM claims WHERE sender = "
      "'flood' AND at < (SELECT "
      + which + "(at) FROM claims WHERE sender = 'few')");
  }

  /// How many of the flood were claimed before "few" posted (what no
  /// fairness can change), and how many of it were still waiting then.
  int64_t claimed_first = 0;
  int64_t waiting = 0;
};

TEST_F(Fairness, ASecondSenderIsClaimedBeforeTheFloodIsThrough) {
  start("sender");
  post_flood_then_few();
  ASSERT_TRUE(few_claimed());
  // Served in turn with the flood: each of the few waited for about one of
  // the flood (plus the few in progress and those claimed while the few
  // were being posted), not for the flood's backlog.
  auto ahead = flood_claimed_before("max") - claimed_first;
  EXPECT_LE(ahead, 3 * few)
    << ahead << " of the " << waiting
    << " waiting flood messages were claimed before the last of the few";
  EXPECT_NE(http_->get("/metrics").body.find("butlers_fair_queue_sources"),
            std::string::npos);
}

TEST_F(Fairness, WithFairnessOffTheSecondSenderWaitsBehindTheFlood) {
  start("off");
  post_flood_then_few();
  ASSERT_TRUE(few_claimed());
  // The baseline: one FIFO, the few come after the whole flood's backlog.
  auto ahead = flood_claimed_before("min") - claimed_first;
  EXPECT_GE(ahead, waiting - few)
    << "only " << ahead << " of the " << waiting
    << " waiting flood messages were claimed before the first of the few";
}

} // namespace
} // namespace butlers::test
