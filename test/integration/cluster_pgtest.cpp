// The cluster end to end (DESIGN.md "Cluster", spec 001 §10.7, spec 002
// §10): real `butlers-node` processes on loopback sharing the test
// PostgreSQL, started by the reusable cluster harness. A switchboard node
// routes to butlers hosted on other nodes; losing a node makes its butlers
// stale, then quarantined, and holds their circuits open; its leased work
// is taken over; everything accepted ends once; mutual TLS admits only
// certificates of the cluster's CA.

#include <signal.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/cluster_harness.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
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
           R"("payload":{"raw":{},"normalized_text":)"
         + json::quote(text) + R"(},"control":{"idempotency_key":")" + key
         + R"("}})";
}

/// Every node knows every butler; `cluster.butlers` decides who hosts
/// which. Short leases and route timeouts keep a node loss short.
std::string common(const std::string& dir, uint32_t turn_ms = 5) {
  auto butler = [turn_ms](const std::string& name, const std::string& kw) {
    return "[[butler]]\nname = \"" + name + "\"\nkeywords = [\"" + kw
           + "\"]\nmax_concurrent_sessions = 4\nmax_pending = 10000\n"
             "lease_s = 2\n[butler.runtime]\nturn_ms = "
           + std::to_string(turn_ms) + "\n";
  };
  return "[switchboard]\nretry_base_ms = 20\nretry_cap_ms = 200\n"
         "route_timeout_s = 3\nlease_s = 5\n"
         "[messenger]\nmax_concurrent_sessions = 8\nmax_pending = 10000\n"
         "[[messenger.adapter]]\nkind = \"outbox\"\npath = \""
         + dir + "/outbox.jsonl\"\n" + butler("health", "pill")
         + butler("finance", "invoice") + butler("calendar", "meeting");
}

/// Liveness settings for fast tests: a lost peer is noticed within a
/// second even when frozen, quarantined 1.5 s later.
const char* fast_liveness = "heartbeat_interval_ms = 200\n"
                            "connection_timeout_ms = 1000\n"
                            "quarantine_after_ms = 1500\n"
                            "reconnect_cap_ms = 500\n";

cluster_node_spec spec(std::string name, bool switchboard,
                       std::vector<std::string> butlers,
                       std::vector<std::string> peers) {
  cluster_node_spec out;
  out.name = std::move(name);
  out.switchboard = switchboard;
  out.butlers = std::move(butlers);
  out.peers = std::move(peers);
  out.cluster_extra = fast_liveness;
  return out;
}

std::string ingest(http_client& http, const std::string& key,
                   const std::string& text) {
  auto r = http.post("/v1/ingest", ingest_body(key, text));
  if (r.status != 202)
    return {};
  rapidjson::Document d;
  if (json::parse(r.body, d) || !d.IsObject() || !d.HasMember("request_id"))
    return {};
  return d["request_id"].GetString();
}

int count(const std::string& url, const std::string& sql) {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  return tx.exec1(sql)[0].as<int>();
}

TEST(Cluster, RoutesToAButlerOnAnotherNode) {
  auto url = fresh_database("cluster_route");
  auto dir = make_temp_dir("cluster-route");
  cluster_harness h{url, common(dir)};
  auto sb = h.add(spec("node-s", true, {}, {}));
  auto a = h.add(spec("node-a", false, {"health"}, {"node-s"}));
  std::string why;
  ASSERT_TRUE(h.start_all(&why)) << why;
  // The switchboard node hosts no health butler of its own: only node-a's.
  ASSERT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"health", "node-a"}] == "active";
    },
    20s))
    << h.log(sb) << h.log(a);
  EXPECT_EQ(h.hosts(sb).count({"health", "node-s"}), 0u);
  // node-a sees the switchboard node's butlers too (general).
  ASSERT_TRUE(eventually(
    [&] {
      return h.hosts(a)[{"general", "node-s"}] == "active";
    },
    20s))
    << h.log(a);
  auto id = ingest(h.http(sb), "route-1", "I took my pill at noon");
  ASSERT_FALSE(id.empty());
  rapidjson::Document d;
  ASSERT_TRUE(eventually(
    [&] {
      auto r = h.http(sb).get("/v1/requests/" + id);
      return r.status == 200 && !json::parse(r.body, d)
             && std::string{d["lifecycle_state"].GetString()} == "parsed";
    },
    20s))
    << h.log(sb) << h.log(a);
  ASSERT_EQ(d["subrequests"].Size(), 1u) << json::to_string(d);
  EXPECT_STREQ(d["subrequests"][0]["butler"].GetString(), "health");
  EXPECT_STREQ(d["subrequests"][0]["state"].GetString(), "ok");
  // The work item was accepted and finished by node-a's butler: its route
  // inbox row is done, and node-a counted it.
  EXPECT_EQ(count(url, "SELECT count(*) FROM route_work WHERE butler = "
                       "'health' AND state = 'ok'"),
            1);
  EXPECT_EQ(h.metric(a, "butlers_route_accepted_total{butler=\"health\"}"), 1)
    << h.http(a).get("/metrics").body;
  // The session's reply went back to the switchboard node's messenger.
  EXPECT_TRUE(eventually(
    [&] {
      return read_file(dir + "/outbox.jsonl").find(id) != std::string::npos;
    },
    10s));
  // Ingest at the butler-only node is passed to the switchboard node.
  auto id2 = ingest(h.http(a), "route-2", "another pill");
  ASSERT_FALSE(id2.empty());
  EXPECT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM message_inbox WHERE "
                        "lifecycle_state = 'parsed'")
             == 2;
    },
    20s));
  // Both stop cleanly on SIGTERM, within the drain deadline.
  EXPECT_EQ(h.stop(a), 0) << h.log(a);
  EXPECT_EQ(h.stop(sb), 0) << h.log(sb);
}

TEST(Cluster, SurvivesTheLossOfAButlerNode) {
  auto url = fresh_database("cluster_loss");
  auto dir = make_temp_dir("cluster-loss");
  // Sessions take 40 ms a turn, so that node-a holds leased work (running
  // and pending) when it is killed.
  cluster_harness h{url, common(dir, 40)};
  auto sb = h.add(spec("node-s", true, {}, {}));
  auto a = h.add(spec("node-a", false, {"health", "calendar"}, {"node-s"}));
  auto b = h.add(spec("node-b", false, {"finance", "calendar"}, {"node-s"}));
  std::string why;
  ASSERT_TRUE(h.start_all(&why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      auto hosts = h.hosts(sb);
      return hosts[{"health", "node-a"}] == "active"
             && hosts[{"calendar", "node-a"}] == "active"
             && hosts[{"calendar", "node-b"}] == "active"
             && hosts[{"finance", "node-b"}] == "active";
    },
    20s))
    << h.log(sb);
  const char* texts[] = {"book a meeting with Ana", "I took my pill",
                         "pay the invoice", "move the meeting to noon"};
  std::vector<std::string> accepted;
  int seq = 0;
  auto stream = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto key = "loss-" + std::to_string(++seq);
      auto id = ingest(h.http(sb), key, texts[seq % 4]);
      if (!id.empty())
        accepted.push_back(id);
    }
  };
  stream(120);
  // node-a holds work right now: leased items of its butlers, not done.
  auto open_on_a = [&] {
    return count(url, "SELECT count(*) FROM route_work WHERE state IN "
                      "('queued', 'running') AND lease_owner LIKE 'node-a/%'");
  };
  ASSERT_TRUE(eventually(
    [&] {
      return open_on_a() > 0;
    },
    10s));
  h.kill(a);
  stream(60); // the stream goes on while node-a is down
  // Its butlers turn stale, health (no other host) stops being routable
  // and its circuit opens; calendar stays routable through node-b.
  EXPECT_TRUE(eventually(
    [&] {
      auto hosts = h.hosts(sb);
      return hosts[{"health", "node-a"}] != "active"
             && hosts[{"calendar", "node-a"}] != "active"
             && hosts[{"calendar", "node-b"}] == "active";
    },
    10s))
    << h.log(sb);
  EXPECT_TRUE(eventually(
    [&] {
      return h.metric(sb, "butlers_switchboard_circuit_open{butler=\"health\"}")
             == 1;
    },
    10s))
    << h.http(sb).get("/metrics").body;
  EXPECT_EQ(h.metric(sb,
                     "butlers_switchboard_circuit_open{butler=\"calendar\"}"),
            0);
  EXPECT_EQ(h.metric(sb, "butlers_cluster_peer_up{node=\"node-a\"}"), 0);
  // Past the TTL: quarantined.
  EXPECT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"health", "node-a"}] == "quarantined";
    },
    10s));
  // Calendar work node-a had leased is taken over by node-b once the
  // leases expire (fencing token incremented).
  EXPECT_TRUE(eventually(
    [&] {
      return h.metric(b, "butlers_route_recovered_total{butler=\"calendar\"}")
             > 0;
    },
    20s))
    << h.log(b);
  // node-a returns: everything is routable again, the circuit closes.
  ASSERT_TRUE(h.start(a, &why)) << why;
  EXPECT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"health", "node-a"}] == "active"
             && h.metric(sb,
                         "butlers_switchboard_circuit_open{butler=\"health\"}")
                  == 0;
    },
    20s))
    << h.log(sb);
  EXPECT_EQ(h.metric(sb, "butlers_cluster_peer_up{node=\"node-a\"}"), 1);
  stream(40);
  ASSERT_GE(accepted.size(), 200u);
  // Every accepted request reaches a terminal state, exactly once.
  auto list = std::string{"'"} + accepted[0] + "'";
  for (size_t i = 1; i < accepted.size(); ++i)
    list += ",'" + accepted[i] + "'";
  auto terminal = "SELECT count(*) FROM message_inbox WHERE request_id IN ("
                  + list
                  + ") AND lifecycle_state IN ('parsed', 'errored', "
                    "'cancelled')";
  ASSERT_TRUE(eventually(
    [&] {
      return count(url, terminal) == static_cast<int>(accepted.size());
    },
    60s))
    << count(url, terminal) << " of " << accepted.size() << " terminal\n"
    << h.log(sb);
  EXPECT_EQ(count(url, "SELECT count(*) FROM (SELECT request_id FROM "
                       "inbox_transitions WHERE to_state IN ('parsed', "
                       "'errored', 'cancelled') GROUP BY request_id HAVING "
                       "count(*) > 1) d"),
            0)
    << "a request completed twice";
  EXPECT_EQ(count(url, "SELECT count(DISTINCT request_id) FROM "
                       "inbox_transitions WHERE to_state IN ('parsed', "
                       "'errored', 'cancelled')"),
            static_cast<int>(accepted.size()));
  // Work node-a held was finished by another holder or by node-a after its
  // return: nothing stays open, and taken-over items carry a newer token.
  EXPECT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM route_work WHERE state IN "
                        "('queued', 'running')")
             == 0;
    },
    30s));
  EXPECT_GT(count(url, "SELECT count(*) FROM route_work WHERE lease_token > 1"),
            0);
  // Calendar and finance never lost their last host: those requests parse.
  EXPECT_EQ(count(url, "SELECT count(*) FROM message_inbox WHERE request_id "
                       "IN ("
                         + list
                         + ") AND lifecycle_state = 'parsed' AND "
                           "normalized_text NOT LIKE '%pill%'"),
            count(url, "SELECT count(*) FROM message_inbox WHERE request_id "
                       "IN ("
                         + list + ") AND normalized_text NOT LIKE '%pill%'"));
  // Every transition was logged on the switchboard node.
  auto log = h.log(sb);
  EXPECT_NE(log.find("node node-a lost"), std::string::npos);
  EXPECT_NE(log.find("stale -> quarantined"), std::string::npos);
  EXPECT_NE(log.find("node node-a is back"), std::string::npos);
}

TEST(Cluster, AFrozenNodeIsDetectedAndItsLateResultsAreFenced) {
  auto url = fresh_database("cluster_frozen");
  auto dir = make_temp_dir("cluster-frozen");
  // 1.5 s sessions: node-a is in the middle of them when it freezes.
  cluster_harness h{url, common(dir, 1500)};
  auto sb = h.add(spec("node-s", true, {}, {}));
  auto a = h.add(spec("node-a", false, {"calendar"}, {"node-s"}));
  std::string why;
  ASSERT_TRUE(h.start(sb, &why)) << why;
  ASSERT_TRUE(h.start(a, &why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"calendar", "node-a"}] == "active";
    },
    20s));
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    auto id = ingest(h.http(sb), "frozen-" + std::to_string(i),
                     "book a meeting, number " + std::to_string(i));
    ASSERT_FALSE(id.empty());
    ids.push_back(id);
  }
  ASSERT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM route_work WHERE butler = "
                        "'calendar' AND state = 'running' AND lease_owner "
                        "LIKE 'node-a/%'")
             >= 4;
    },
    10s));
  // Frozen, not dead: no connection closes; only the missing heartbeats
  // (connection_timeout_ms = 1000) tell the switchboard node.
  h.signal(a, SIGSTOP);
  EXPECT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"calendar", "node-a"}] == "stale";
    },
    10s))
    << h.log(sb);
  EXPECT_EQ(h.metric(sb,
                     "butlers_switchboard_circuit_open{butler=\"calendar\"}"),
            1);
  // A second host takes over the expired leases (new fencing tokens) while
  // node-a still believes it holds them.
  auto b = h.add(spec("node-b", false, {"calendar"}, {"node-s"}));
  ASSERT_TRUE(h.start(b, &why)) << why;
  EXPECT_TRUE(eventually(
    [&] {
      return h.metric(b, "butlers_route_recovered_total{butler=\"calendar\"}")
             >= 4;
    },
    20s))
    << h.log(b);
  // Thawed, node-a finishes its sessions: every result it tries to write
  // is refused, because its token is stale.
  h.signal(a, SIGCONT);
  EXPECT_TRUE(eventually(
    [&] {
      return h.running(a)
             && h.metric(a,
                         "butlers_route_lease_lost_total{butler=\"calendar\"}")
                  >= 4;
    },
    20s))
    << h.log(a);
  // It rejoins, and every request ends exactly once (parsed, or errored if
  // its retries ran out while calendar had no live host).
  EXPECT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"calendar", "node-a"}] == "active";
    },
    20s))
    << h.log(sb) << h.log(a);
  auto list = std::string{"'"} + ids[0] + "'";
  for (size_t i = 1; i < ids.size(); ++i)
    list += ",'" + ids[i] + "'";
  EXPECT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM message_inbox WHERE "
                        "lifecycle_state IN ('parsed', 'errored', "
                        "'cancelled') AND request_id IN ("
                          + list + ")")
             == static_cast<int>(ids.size());
    },
    30s))
    << h.log(sb);
  EXPECT_EQ(count(url, "SELECT count(*) FROM (SELECT request_id FROM "
                       "inbox_transitions WHERE to_state IN ('parsed', "
                       "'errored', 'cancelled') GROUP BY request_id HAVING "
                       "count(*) > 1) d"),
            0);
}

/// A CA and node certificates made here with the openssl CLI (never
/// committed): `ca` signs each of `nodes`.
void make_ca(const std::string& dir, const std::string& ca,
             const std::vector<std::string>& nodes) {
  auto run = [](std::vector<std::string> argv) {
    argv[0] = "/usr/bin/" + argv[0]; // scripts/setup.sh installs openssl
    auto r = run_process(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
       dir + "/" + ca + ".key", "-out", dir + "/" + ca + ".pem", "-days", "2",
       "-subj", "/CN=" + ca});
  for (auto& n : nodes) {
    run({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
         dir + "/" + n + ".key", "-out", dir + "/" + n + ".csr", "-subj",
         "/CN=" + n});
    run({"openssl", "x509", "-req", "-in", dir + "/" + n + ".csr", "-CA",
         dir + "/" + ca + ".pem", "-CAkey", dir + "/" + ca + ".key",
         "-CAcreateserial", "-out", dir + "/" + n + ".pem", "-days", "2"});
  }
}

TEST(Cluster, MutualTlsAdmitsOnlyTheClustersCa) {
  auto url = fresh_database("cluster_tls");
  auto dir = make_temp_dir("cluster-tls");
  make_ca(dir, "ca", {"node-s", "node-a"});
  make_ca(dir, "rogue-ca", {"node-r"});
  auto with_tls = [&](cluster_node_spec x, const std::string& ca) {
    x.tls_cert = dir + "/" + x.name + ".pem";
    x.tls_key = dir + "/" + x.name + ".key";
    x.tls_ca = dir + "/" + ca + ".pem";
    return x;
  };
  cluster_harness h{url, common(dir)};
  auto sb = h.add(with_tls(spec("node-s", true, {}, {}), "ca"));
  auto a = h.add(with_tls(spec("node-a", false, {"health"}, {"node-s"}), "ca"));
  // node-r's certificate comes from another CA.
  auto r = h.add(
    with_tls(spec("node-r", false, {"finance"}, {"node-s"}), "rogue-ca"));
  std::string why;
  ASSERT_TRUE(h.start(sb, &why)) << why;
  ASSERT_TRUE(h.start(a, &why)) << why;
  EXPECT_NE(h.log(sb).find("(mutual TLS)"), std::string::npos);
  // Same CA: connected, and routing works over the encrypted link.
  ASSERT_TRUE(eventually(
    [&] {
      return h.hosts(sb)[{"health", "node-a"}] == "active";
    },
    20s))
    << h.log(sb) << h.log(a);
  auto id = ingest(h.http(sb), "tls-1", "I took my pill");
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM message_inbox WHERE "
                        "lifecycle_state = 'parsed'")
             == 1;
    },
    20s))
    << h.log(sb) << h.log(a);
  EXPECT_EQ(count(url, "SELECT count(*) FROM route_work WHERE butler = "
                       "'health' AND state = 'ok'"),
            1);
  // Other CA: every handshake is refused; node-r keeps retrying, and its
  // butlers never join.
  ASSERT_TRUE(h.start(r, &why)) << why;
  ASSERT_TRUE(eventually(
    [&] {
      return h.log(r).find("cannot reach peer") != std::string::npos;
    },
    20s))
    << h.log(r);
  EXPECT_EQ(h.hosts(sb).count({"finance", "node-r"}), 0u);
  EXPECT_EQ(h.hosts(r).count({"general", "node-s"}), 0u);
  EXPECT_EQ(h.metric(sb, "butlers_cluster_peer_up{node=\"node-r\"}"), 0);
  EXPECT_EQ(h.metric(sb, "butlers_cluster_peer_up{node=\"node-a\"}"), 1);
  // The refused handshakes leave the authenticated link alone.
  auto id2 = ingest(h.http(sb), "tls-2", "another pill");
  ASSERT_FALSE(id2.empty());
  EXPECT_TRUE(eventually(
    [&] {
      return count(url, "SELECT count(*) FROM message_inbox WHERE "
                        "lifecycle_state = 'parsed'")
             == 2;
    },
    20s))
    << h.log(sb) << h.log(a);
  EXPECT_EQ(h.log(sb).find("node node-a lost"), std::string::npos) << h.log(sb);
}

} // namespace
} // namespace butlers::test
