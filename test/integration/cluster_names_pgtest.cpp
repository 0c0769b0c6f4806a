// Cluster node names: two real `butlers-node`
// processes configured with the same `node.name` connect, refuse each
// other's introduction with an error log line on both sides and a counted
// metric, retry only with backoff, and share no butlers; `check-config`
// warns about the shipped default name while `[cluster]` is on.

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/support/cluster_harness.hpp"
#include "test/support/node_process.hpp"
#include "test/support/pg.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

const std::string refused_series = "butlers_cluster_peers_refused_total{reason="
                                   "\"duplicate_name\"}";

/// Every node knows both butlers; `cluster.butlers` decides who hosts
/// which.
std::string common() {
  auto butler = [](const std::string& name, const std::string& kw) {
    return "[[butler]]\nname = \"" + name + "\"\nkeywords = [\"" + kw
           + "\"]\n[butler.runtime]\nturn_ms = 5\n";
  };
  return butler("health", "pill") + butler("finance", "invoice");
}

cluster_node_spec twin(std::string name, std::vector<std::string> butlers,
                       std::vector<std::string> peers) {
  cluster_node_spec out;
  out.name = std::move(name);
  out.node_name = "twin";
  out.butlers = std::move(butlers);
  out.peers = std::move(peers);
  out.cluster_extra = "heartbeat_interval_ms = 200\n"
                      "connection_timeout_ms = 1000\n"
                      "reconnect_cap_ms = 500\n";
  return out;
}

/// Whether `log` (JSON lines) has an error line containing every one of
/// `parts`.
bool has_error_line(const std::string& log,
                    const std::vector<std::string>& parts) {
  std::istringstream in{log};
  for (std::string line; std::getline(in, line);) {
    if (line.find(R"("level":"error")") == std::string::npos)
      continue;
    bool all = true;
    for (auto& p : parts)
      all = all && line.find(p) != std::string::npos;
    if (all)
      return true;
  }
  return false;
}

TEST(ClusterNames, TwoNodesNamedAlikeRefuseEachOtherAndShareNoButlers) {
  auto url = fresh_database("cluster_names");
  cluster_harness h{url, common()};
  // Both call themselves "twin"; node-b dials node-a.
  auto a = h.add(twin("node-a", {"health"}, {}));
  auto b = h.add(twin("node-b", {"finance"}, {"node-a"}));
  std::string why;
  ASSERT_TRUE(h.start_all(&why)) << why;
  auto addr_a = "127.0.0.1:" + std::to_string(h.cluster_port(a));
  auto addr_b = "127.0.0.1:" + std::to_string(h.cluster_port(b));
  // The dialled side names the dialler by its listening address, the
  // dialler names the address it dialled; both name the shared name.
  ASSERT_TRUE(eventually(
    [&] {
      return has_error_line(h.log(a), {"refused peer at " + addr_b, "'twin'"});
    },
    20s))
    << h.log(a);
  ASSERT_TRUE(eventually(
    [&] {
      return has_error_line(h.log(b), {"refused peer at " + addr_a, "'twin'"});
    },
    20s))
    << h.log(b);
  EXPECT_GE(h.metric(a, refused_series), 1) << h.log(a);
  EXPECT_GE(h.metric(b, refused_series), 1) << h.log(b);
  // node-b keeps asking (a renamed node-a would be accepted), with backoff
  // rather than in a hot loop: once the backoff (100 ms doubling) has
  // reached reconnect_cap_ms (after four refusals), refusals are >= 250 ms
  // apart (the jittered delay), so three more take over 500 ms.
  ASSERT_TRUE(eventually(
    [&] {
      return h.metric(b, refused_series) >= 5;
    },
    20s))
    << h.log(b);
  auto before = h.metric(b, refused_series);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(
    [&] {
      return h.metric(b, refused_series) >= before + 3;
    },
    20s))
    << h.log(b);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  EXPECT_GE(h.metric(a, refused_series), 3) << "each retry refused again";
  // Neither node lists the other's butlers; each still lists its own.
  auto hosts_a = h.hosts(a);
  auto hosts_b = h.hosts(b);
  EXPECT_EQ((hosts_a[{"health", "twin"}]), "active");
  EXPECT_EQ((hosts_b[{"finance", "twin"}]), "active");
  for (auto& [key, status] : hosts_a)
    EXPECT_NE(key.first, "finance") << key.second << " " << status;
  for (auto& [key, status] : hosts_b)
    EXPECT_NE(key.first, "health") << key.second << " " << status;
  EXPECT_EQ(h.log(a).find("cluster: node twin"), std::string::npos) << h.log(a);
  EXPECT_EQ(h.log(b).find("cluster: node twin"), std::string::npos) << h.log(b);
}

TEST(ClusterNames, CheckConfigWarnsAboutTheDefaultNameWithTheClusterOn) {
  std::ifstream in{BUTLERS_SOURCE_DIR "/config/node.toml"};
  std::stringstream shipped;
  shipped << in.rdbuf();
  auto text = shipped.str();
  // The shipped file as is: clustering off, no warning.
  auto plain = run_process({BUTLERS_NODE_BINARY, "check-config",
                            BUTLERS_SOURCE_DIR "/config/node.toml"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("config warning"), std::string::npos) << plain.err;
  // The same file with the cluster port set: valid, but warned about.
  auto at = text.find("\nport = 0\n# Other nodes");
  ASSERT_NE(at, std::string::npos) << "the shipped [cluster] table changed";
  text.replace(at, std::string{"\nport = 0\n"}.size(), "\nport = 4710\n");
  auto dir = make_temp_dir("cluster-names");
  auto path = dir + "/node.toml";
  write_file(path, text);
  auto r = run_process({BUTLERS_NODE_BINARY, "check-config", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("config warning: node.name is still the default "
                       "\"butlers-1\" while [cluster] is on"),
            std::string::npos)
    << r.err;
  // A name of its own silences it.
  auto named = text;
  named.replace(named.find("name = \"butlers-1\""),
                std::string{"name = \"butlers-1\""}.size(),
                "name = \"node-a\"");
  write_file(path, named);
  auto quiet = run_process({BUTLERS_NODE_BINARY, "check-config", path});
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("config warning"), std::string::npos) << quiet.err;
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

} // namespace
} // namespace butlers::test
