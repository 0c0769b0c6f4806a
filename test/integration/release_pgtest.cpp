// Clean shutdown hands back its work, with real node
// processes and PostgreSQL: a node stopped with SIGTERM releases the leases
// it holds on work items and inbox rows, so that another node takes them
// over at once although every lease is 60 s long.

#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string ingest_body(const std::string& key, const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":"api","provider":"internal",)"
         R"("endpoint_identity":"tests"},)"
         R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},)"
           R"("payload":{"raw":{},"normalized_text":")"
         + text + R"("},"control":{"idempotency_key":")" + key + R"("}})";
}

class Release : public node_fixture {
 protected:
  /// A node named `name` whose `health` butler runs one session at a time,
  /// each `turn_ms` long; every lease (inbox and work) lasts 60 s, so only a
  /// release lets another node take the work over sooner.
  static std::string release_config(const std::string& name,
                                    const std::string& dir, int turn_ms) {
    return node_head(name, 2)
           + "[switchboard]\nlease_s = 60\nscanner_interval_s = 1\n"
             "[[butler]]\nname = \"health\"\nkeywords = [\"pill\"]\n"
             "lease_s = 60\nmax_concurrent_sessions = 1\nmax_pending = 10\n"
             "[butler.runtime]\nturn_ms = "
           + std::to_string(turn_ms)
           + "\n[[messenger.adapter]]\nkind = \"outbox\"\npath = \"" + dir
           + "/outbox.jsonl\"\n";
  }

  int count(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<int>();
  }

  /// The rows this test looks at, for failure messages.
  std::string dump() {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    std::string out;
    for (auto row :
         tx.exec("SELECT lifecycle_state || ' ' || coalesce(lease_owner, '-') "
                 "|| ' ' || coalesce(error_class, '') FROM message_inbox"))
      out += "inbox: " + row[0].as<std::string>() + "\n";
    for (auto row : tx.exec("SELECT butler || ' ' || state || ' ' || "
                            "coalesce(lease_owner, '-') FROM route_work"))
      out += "work: " + row[0].as<std::string>() + "\n";
    return out;
  }

  double seconds(const std::string& sql) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<double>();
  }
};

TEST_F(Release, SigtermHandsBackWorkAndInboxRowsThatAPeerTakesOverAtOnce) {
  use_database("release");
  use_files("release");
  // Three requests for one slow session slot.
  ASSERT_TRUE(start_node(release_config("release-a", dir_, 30000)));
  for (int i = 0; i < 3; ++i) {
    auto key = "k-" + std::to_string(i);
    auto r = http_->post("/v1/ingest", ingest_body(key, "pill " + key));
    ASSERT_EQ(r.status, 202) << r.body;
  }
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM route_work WHERE butler = 'health' "
                   "AND state IN ('queued', 'running')")
             == 3;
    },
    20s))
    << node_->log() << dump();
  ASSERT_EQ(count("SELECT count(*) FROM message_inbox "
                  "WHERE lifecycle_state = 'progress' "
                  "AND lease_expires_at > now() + interval '30 s'"),
            3);

  // SIGTERM: the running session does not finish within the drain
  // deadline; everything held goes back, fenced by its token.
  auto stopped = stop_node();
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->exit_code, 0) << node_->log();
  EXPECT_NE(node_->log().find("released 3 of 3 work item(s) held"),
            std::string::npos)
    << node_->log();
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE butler = 'health' "
                  "AND state IN ('queued', 'running') "
                  "AND lease_expires_at <= now() AND lease_owner IS NULL"),
            3);
  EXPECT_EQ(count("SELECT count(*) FROM message_inbox "
                  "WHERE lifecycle_state = 'progress' "
                  "AND lease_expires_at <= now() AND lease_owner IS NULL"),
            3);
  node_.reset();

  // A peer (another node name: the own-work recovery of a restart under
  // the same name does not apply) takes everything over at once.
  ASSERT_TRUE(start_node(release_config("release-b", dir_, 300)));
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  auto ready = tx.exec1("SELECT now()::text")[0].as<std::string>();
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM route_work WHERE butler = 'health' "
                   "AND (lease_owner LIKE 'release-b/%' OR state = 'ok')")
             == 3;
    },
    10s, 10ms))
    << node_->log();
  // Each item's take-over time: its lease (60 s) was set when the peer
  // leased it, or later when its session started; a finished item's
  // finish time. The latest bounds when the last one was taken over.
  auto work_s = seconds(
    "SELECT extract(epoch FROM max(coalesce(lease_expires_at - "
    "interval '60 s', finished_at)) - '"
    + ready
    + "'::timestamptz) FROM route_work WHERE butler = 'health' "
      "AND request_id IN (SELECT request_id FROM message_inbox)");
  std::printf("work items taken over %.3f s after the peer was ready\n",
              work_s);
  EXPECT_LT(work_s, 2.0) << "before the release: lease_s (60 s)";
  ASSERT_TRUE(eventually(
    [&] {
      return count("SELECT count(*) FROM message_inbox "
                   "WHERE lifecycle_state = 'parsed'")
             == 3;
    },
    20s))
    << node_->log();
  // The inbox rows: claimed again by the peer's writer (its cold path).
  auto inbox_s = seconds("SELECT extract(epoch FROM max(at) - '" + ready
                         + "'::timestamptz) FROM inbox_transitions "
                           "WHERE lease_owner = 'release-b' "
                           "AND from_state = 'progress' "
                           "AND to_state = 'progress'");
  std::printf("inbox rows claimed again %.3f s after the peer was ready\n",
              inbox_s);
  EXPECT_EQ(count("SELECT count(DISTINCT request_id) FROM inbox_transitions "
                  "WHERE lease_owner = 'release-b' "
                  "AND from_state = 'progress' AND to_state = 'progress'"),
            3);
  EXPECT_LT(inbox_s, 2.0) << "before the release: lease_s (60 s)";
  EXPECT_EQ(count("SELECT count(*) FROM route_work WHERE butler = 'health' "
                  "AND state = 'ok'"),
            3);
}

} // namespace
} // namespace butlers::test
