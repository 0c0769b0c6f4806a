// Retention of people's data (runtime/retention.md) against a real node
// process, real PostgreSQL and real HTTP over loopback, with the scripted
// runtime: with `content_days = 0`, once a pass has run, no text or JSON
// column of any table (found through information_schema, so a new table is
// covered without touching this test) holds the text of a finished
// request or thread run, while a request still in its session and one
// whose reply is still owed (its webhook never answers) keep theirs. And
// every table with text columns is in the catalogue forget reuses.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "runtime/json.hpp"
#include "runtime/retention.hpp"
#include "runtime/uuid.hpp"
#include "test/support/http_client.hpp"
#include "test/support/node_fixture.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

std::string ingest_body(const std::string& channel, const std::string& key,
                        const std::string& text) {
  return R"({"schema_version":"ingest.v1",)"
         R"("source":{"channel":")"
         + channel
         + R"(","provider":"internal","endpoint_identity":"tests"},)"
           R"("event":{"external_event_id":")"
         + key
         + R"(","observed_at":"2026-11-23T12:00:00Z"},)"
           R"("sender":{"identity":"user-1"},"payload":{"raw":{},)"
           R"("normalized_text":)"
         + json::quote(text) + R"(},"control":{"idempotency_key":")" + key
         + R"("}})";
}

class Retention : public node_fixture {
 protected:
  /// A webhook that never answers: a socket listening on loopback that
  /// nobody accepts on (the kernel completes the handshake and takes the
  /// request), so the reply to an `mcp` request stays owed while the test
  /// runs.
  struct silent_listener {
    int fd = -1;
    uint16_t port = 0;
    silent_listener() {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(a);
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0
          || ::listen(fd, 16) != 0
          || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return;
      port = ntohs(a.sin_port);
    }
    ~silent_listener() {
      if (fd >= 0)
        ::close(fd);
    }
  } stalled_;

  void start() {
    use_database("retention");
    use_files("retention");
    ASSERT_TRUE(start_node(
      node_head("retention-test", 2, "request_timeout_ms = 10000\n")
      + "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n"
        "[retention]\ninterval_s = 1\ncontent_days = 0\npause_ms = 0\n"
        "batch_rows = 2\n"
        "[[butler]]\nname = \"general\"\nmax_concurrent_sessions = 4\n"
        "[butler.runtime]\nturn_ms = 5\n"
        "[[butler]]\nname = \"slow\"\nkeywords = [\"slowpoke\"]\n"
        "[butler.runtime]\nturn_ms = 600000\n"
        "[[messenger.adapter]]\nkind = \"outbox\"\nchannels = [\"api\"]\n"
        "path = \""
      + dir_
      + "/outbox.jsonl\"\n"
        "[[messenger.adapter]]\nkind = \"webhook\"\nchannels = [\"mcp\"]\n"
        "timeout_ms = 600000\nurl = \""
      + "http://127.0.0.1:" + std::to_string(stalled_.port) + "/hook\"\n"));
  }

  std::string ingest(const std::string& channel, const std::string& text) {
    auto key = "k-" + std::to_string(++seq_);
    auto r = http_->post("/v1/ingest", ingest_body(channel, key, text));
    EXPECT_EQ(r.status, 202) << r.body;
    rapidjson::Document d;
    if (json::parse(r.body, d) || !d.IsObject() || !d.HasMember("request_id"))
      return {};
    return d["request_id"].GetString();
  }

  std::string query1(const std::string& sql, const std::string& arg) {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec_params(sql, arg);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  }

  /// "inbox-state butler:state ..." of a request, for failure messages.
  std::string states(const std::string& id) {
    return query1("SELECT (SELECT lifecycle_state FROM message_inbox "
                  "WHERE request_id = $1::uuid) || ' ' || "
                  "coalesce(string_agg(butler || ':' || state, ' '), '') "
                  "FROM route_work WHERE request_id = $1::uuid",
                  id);
  }

  /// Every text, varchar, json and jsonb column of every table, as
  /// (table, column): partitions included, views excluded.
  std::vector<std::pair<std::string, std::string>> text_columns() {
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    auto r = tx.exec(
      "SELECT c.table_name, c.column_name FROM information_schema.columns c "
      "JOIN information_schema.tables t USING (table_schema, table_name) "
      "WHERE c.table_schema = current_schema() "
      "AND t.table_type = 'BASE TABLE' "
      "AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', "
      "'ARRAY') ORDER BY 1, 2");
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& row : r)
      out.emplace_back(row[0].as<std::string>(), row[1].as<std::string>());
    return out;
  }

  /// The columns (table.column) where `marker` occurs.
  std::set<std::string> holding(const std::string& marker) {
    std::set<std::string> out;
    pqxx::connection conn{url_};
    pqxx::nontransaction tx{conn};
    for (auto& [table, column] : text_columns()) {
      auto sql = "SELECT count(*) FROM " + tx.quote_name(table) + " WHERE "
                 + tx.quote_name(column) + "::text LIKE '%' || $1 || '%'";
      if (tx.exec_params1(sql, marker)[0].as<int64_t>() > 0)
        out.insert(table + "." + column);
    }
    return out;
  }

  /// A series' value from /metrics (-1 when absent).
  double metric(const std::string& series) {
    auto text = http_->get("/metrics").body;
    auto pos = text.find("\n" + series + " ");
    return pos == std::string::npos
             ? -1
             : std::stod(text.substr(pos + series.size() + 2));
  }

  int seq_ = 0;
};

std::string dump(const std::set<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += x + " ";
  return out;
}

TEST_F(Retention, FinishedTextIsGoneEverywhereWhileLiveAndOwedTextStays) {
  ASSERT_GT(stalled_.port, 0);
  start();
  auto tag = make_uuid_v7().to_string().substr(24);
  auto done_marker = "finished" + tag + "marker";
  auto live_marker = "inflight" + tag + "marker";
  auto owed_marker = "owed" + tag + "marker";
  auto thread_marker = "threadturn" + tag + "marker";
  // Finished: an ingest answered through the outbox, and a thread run.
  auto done = ingest("api", "please remember " + done_marker);
  ASSERT_FALSE(done.empty());
  auto turn = http_->post("/v1/threads/t-ret/turns",
                          R"({"message_id":"m1","text":")" + thread_marker
                            + R"("})");
  ASSERT_EQ(turn.status, 200) << turn.body;
  // Live: its session takes ten minutes.
  auto live = ingest("api", "slowpoke " + live_marker);
  // Owed: answered, but its webhook never answers the delivery.
  auto owed = ingest("mcp", "reply to " + owed_marker);
  ASSERT_TRUE(eventually(
    [&] {
      return query1("SELECT lifecycle_state FROM message_inbox "
                    "WHERE request_id = $1::uuid",
                    done)
               == "parsed"
             && query1("SELECT state FROM route_work WHERE request_id = "
                       "$1::uuid AND butler = 'slow'",
                       live)
                  == "running"
             && query1("SELECT count(*) FROM route_work WHERE request_id = "
                       "$1::uuid AND butler = 'messenger' "
                       "AND state IN ('queued', 'running')",
                       owed)
                  == "1";
    },
    30s))
    << "the finished request, the running session and the owed delivery: "
    << states(done) << " / " << states(live) << " / " << states(owed);
  // A pass runs every second: the finished text goes.
  std::set<std::string> left;
  EXPECT_TRUE(eventually(
    [&] {
      left = holding(done_marker);
      auto thread_left = holding(thread_marker);
      left.insert(thread_left.begin(), thread_left.end());
      return left.empty();
    },
    30s))
    << "still holding finished text: " << dump(left);
  // Two more passes later, live and owed text is still there.
  auto passes = metric(R"(butlers_retention_passes_total{outcome="ok"})");
  ASSERT_TRUE(eventually(
    [&] {
      return metric(R"(butlers_retention_passes_total{outcome="ok"})")
             >= passes + 2;
    },
    30s));
  auto live_left = holding(live_marker);
  EXPECT_TRUE(live_left.count("message_inbox.normalized_text"))
    << dump(live_left);
  EXPECT_TRUE(live_left.count("message_inbox.raw_payload")) << dump(live_left);
  EXPECT_TRUE(live_left.count("route_work.envelope")) << dump(live_left);
  auto owed_left = holding(owed_marker);
  EXPECT_TRUE(owed_left.count("message_inbox.normalized_text"))
    << dump(owed_left);
  EXPECT_TRUE(owed_left.count("route_work.envelope"))
    << "the owed reply's own text, in the messenger's work item: "
    << dump(owed_left);
  // The finished request's rows are still there for accounting, redacted.
  EXPECT_EQ(query1("SELECT lifecycle_state || ':' || normalized_text || ':' "
                   "|| raw_payload FROM message_inbox "
                   "WHERE request_id = $1::uuid",
                   done),
            "parsed::");
  EXPECT_EQ(query1("SELECT count(*) FROM route_work WHERE request_id = "
                   "$1::uuid AND envelope::text = '{}' AND response IS NULL",
                   done),
            "2")
    << "the specialist's and the messenger's work items, emptied";
  EXPECT_EQ(query1("SELECT count(*) FROM thread_runs WHERE thread_id = $1",
                   "t-ret"),
            "1");
  EXPECT_GE(
    metric(
      R"(butlers_retention_rows_total{table="message_inbox",action="redact"})"),
    1);
  EXPECT_GE(
    metric(
      R"(butlers_retention_rows_total{table="thread_transcript",action="delete"})"),
    2);
}

TEST_F(Retention, EveryTableWithTextColumnsIsInTheCatalogue) {
  start();
  std::set<std::string> known;
  for (auto& t : people_tables())
    known.insert(t.table);
  for (auto& [table, why] : system_tables())
    known.insert(table);
  pqxx::connection conn{url_};
  pqxx::nontransaction tx{conn};
  // Partitions are covered by their parent.
  auto r = tx.exec(
    "SELECT DISTINCT c.table_name FROM information_schema.columns c "
    "JOIN pg_class k ON k.relname = c.table_name "
    "AND k.relnamespace = current_schema()::regnamespace "
    "WHERE c.table_schema = current_schema() AND NOT k.relispartition "
    "AND k.relkind IN ('r', 'p') "
    "AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', "
    "'bytea', 'ARRAY')");
  std::set<std::string> missing;
  for (const auto& row : r)
    if (!known.count(row[0].as<std::string>()))
      missing.insert(row[0].as<std::string>());
  EXPECT_TRUE(missing.empty())
    << "tables with text columns that runtime/retention.cpp does not list: "
    << dump(missing);
  EXPECT_GE(r.size(), people_tables().size());
}

} // namespace
} // namespace butlers::test
