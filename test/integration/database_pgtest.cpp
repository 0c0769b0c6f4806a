// The node's sessions with PostgreSQL under a held lock: the reader pool
// (`[database] pool_size`), where a read that waits holds up only its own
// connection, and the readers' deadlines (`lock_timeout_ms`), whose
// cancellations are answered 504 and counted. (The writer's deadlines:
// ingest_pgtest.cpp.)

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

class Database : public node_fixture {
 protected:
  void start(const std::string& database_keys) {
    use_database("database");
    ASSERT_TRUE(start_node(node_head("database-test", 5) + "[database]\n"
                           + database_keys));
  }

  /// Sessions of the node waiting for a lock on `table`.
  int64_t waiting_on(const std::string& table) {
    pqxx::connection conn{url_};
    return pqxx::nontransaction{conn}
      .exec_params1("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                    "c.oid = l.relation WHERE NOT l.granted AND c.relname "
                    "= $1",
                    table)[0]
      .as<int64_t>();
  }

  double metric(const std::string& series) {
    auto text = http_->get("/metrics").body;
    auto pos = text.find("\n" + series + " ");
    if (pos == std::string::npos)
      return -1;
    return std::stod(text.substr(pos + series.size() + 2));
  }
};

TEST_F(Database, AReadWaitingForALockHoldsUpOnlyItsOwnReaderConnection) {
  start("pool_size = 2\nlock_timeout_ms = 0\n");
  pqxx::connection holder{url_};
  pqxx::work held{holder};
  held.exec("LOCK TABLE threads IN ACCESS EXCLUSIVE MODE");
  http_response blocked;
  std::thread reader{[&] {
    blocked = http_client{"127.0.0.1", port_}.get("/v1/threads");
  }};
  // The thread list is on a reader connection, waiting for the lock.
  ASSERT_TRUE(eventually(
    [&] {
      return waiting_on("threads") == 1;
    },
    10s));
  // Another read goes to the other connection and is answered now, while
  // the first still waits.
  auto other = http_->get("/api/requests");
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(waiting_on("threads"), 1) << "the first read still waits";
  held.commit();
  reader.join();
  EXPECT_EQ(blocked.status, 200) << blocked.body << blocked.error;
  EXPECT_NE(blocked.body.find(R"("threads":[])"), std::string::npos)
    << blocked.body;
}

TEST_F(Database, AReadPastItsLockDeadlineIs504CountedAndTheReaderRecovers) {
  start("pool_size = 1\nlock_timeout_ms = 300\n");
  {
    pqxx::connection holder{url_};
    pqxx::work held{holder};
    held.exec("LOCK TABLE threads IN ACCESS EXCLUSIVE MODE");
    auto r = http_->get("/v1/threads");
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_NE(r.body.find("lock_timeout (300 ms)"), std::string::npos)
      << r.body;
    EXPECT_EQ(metric("butlers_db_deadline_exceeded_total{session=\"reader\"}"),
              1);
    EXPECT_NE(node_->log().find("thread_list hit the lock_timeout"),
              std::string::npos);
  }
  // The lock is gone with its transaction; the same connection serves on.
  auto r = http_->get("/v1/threads");
  EXPECT_EQ(r.status, 200) << r.body;
}

} // namespace
} // namespace butlers::test
