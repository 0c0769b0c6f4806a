// The registry with remote hosts (spec 001 §10.7): several hosts per
// butler, local first, round robin among remote ones, and liveness marks
// that make a butler unroutable only when its last live host goes.

#include <chrono>
#include <set>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <gtest/gtest.h>

#include "actors/registry.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/fake_actors.hpp"

namespace butlers::test {
namespace {

using namespace std::chrono_literals;

struct Registry : deterministic_fixture {
  registry_actor reg = sys.spawn(registry, std::string{"node-s"});

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

  caf::error lookup_error(const std::string& name) {
    self->send(reg, lookup_atom_v, name);
    sched.run();
    caf::error out;
    self->receive(
      [&](butler_actor&) {
        ADD_FAILURE() << "found " << name;
      },
      [&](caf::error& err) {
        out = std::move(err);
      },
      caf::after(0s) >>
        [] {
          ADD_FAILURE() << "no reply";
        });
    return out;
  }

  static registry_entry entry(const std::string& name) {
    registry_entry e;
    e.name = name;
    return e;
  }

  void TearDown() override {
    self->send_exit(reg, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

TEST_F(Registry, RemoteHostsJoinLeaveAndReturn) {
  auto local = sys.spawn(fake_butler, route_fn{});
  auto a = sys.spawn(fake_butler, route_fn{});
  auto b = sys.spawn(fake_butler, route_fn{});
  self->send(reg, register_atom_v, entry("general"), local);
  // node-a hosts health and calendar, node-b calendar.
  self->send(reg, register_atom_v, std::string{"node-a"},
             std::vector<registry_entry>{entry("health"), entry("calendar")},
             std::vector<butler_actor>{a, a});
  auto changes = reply<std::vector<registry_entry>>();
  ASSERT_EQ(changes.size(), 2u) << "both became routable";
  self->send(reg, register_atom_v, std::string{"node-b"},
             std::vector<registry_entry>{entry("calendar")},
             std::vector<butler_actor>{b});
  EXPECT_TRUE(reply<std::vector<registry_entry>>().empty())
    << "calendar was routable already";
  // One entry per host, one merged entry per name.
  self->send(reg, hosts_atom_v);
  EXPECT_EQ(reply<std::vector<registry_entry>>().size(), 4u);
  self->send(reg, list_atom_v);
  auto merged = reply<std::vector<registry_entry>>();
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].name, "calendar");
  EXPECT_EQ(merged[0].node, "node-a,node-b");
  // Remote hosts take turns.
  std::set<caf::actor_addr> seen;
  for (int i = 0; i < 2; ++i) {
    self->send(reg, lookup_atom_v, std::string{"calendar"});
    seen.insert(reply<butler_actor>().address());
  }
  EXPECT_EQ(seen.size(), 2u);
  // node-a is lost: health has no live host left, calendar still has one.
  self->send(reg, mark_atom_v, std::string{"node-a"}, std::string{"stale"});
  changes = reply<std::vector<registry_entry>>();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].name, "health");
  EXPECT_EQ(changes[0].status, "stale");
  EXPECT_EQ(lookup_error("health"), butlers_errc::target_unavailable);
  for (int i = 0; i < 3; ++i) {
    self->send(reg, lookup_atom_v, std::string{"calendar"});
    EXPECT_EQ(reply<butler_actor>(), b) << "only the live host";
  }
  self->send(reg, mark_atom_v, std::string{"node-a"},
             std::string{"quarantined"});
  EXPECT_TRUE(reply<std::vector<registry_entry>>().empty())
    << "health was unroutable already";
  self->send(reg, list_atom_v);
  merged = reply<std::vector<registry_entry>>();
  EXPECT_EQ(merged[1].name, "general");
  EXPECT_EQ(merged[2].name, "health");
  EXPECT_EQ(merged[2].status, "quarantined");
  // It returns (re-registered with fresh handles).
  self->send(reg, register_atom_v, std::string{"node-a"},
             std::vector<registry_entry>{entry("health"), entry("calendar")},
             std::vector<butler_actor>{a, a});
  changes = reply<std::vector<registry_entry>>();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].name, "health");
  EXPECT_EQ(changes[0].status, "active");
  self->send(reg, lookup_atom_v, std::string{"health"});
  EXPECT_EQ(reply<butler_actor>(), a);
  for (auto& x : {local, a, b})
    self->send_exit(x, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_F(Registry, TheLocalHostComesFirst) {
  auto local = sys.spawn(fake_butler, route_fn{});
  auto remote = sys.spawn(fake_butler, route_fn{});
  self->send(reg, register_atom_v, std::string{"node-a"},
             std::vector<registry_entry>{entry("health")},
             std::vector<butler_actor>{remote});
  reply<std::vector<registry_entry>>();
  self->send(reg, register_atom_v, entry("health"), local);
  for (int i = 0; i < 3; ++i) {
    self->send(reg, lookup_atom_v, std::string{"health"});
    EXPECT_EQ(reply<butler_actor>(), local);
  }
  self->send(reg, hosts_atom_v);
  auto hosts = reply<std::vector<registry_entry>>();
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].node, "node-s");
  EXPECT_EQ(hosts[1].node, "node-a");
  for (auto& x : {local, remote})
    self->send_exit(x, caf::exit_reason::user_shutdown);
  sched.run();
}

// A retry after a transport failure names the host that failed: another
// live host is chosen while there is one, before the cluster has noticed
// the loss; when the failed one is the only live host, it is still found.
TEST_F(Registry, ALookupPassesOverTheHostThatJustFailed) {
  auto local = sys.spawn(fake_butler, route_fn{});
  auto a = sys.spawn(fake_butler, route_fn{});
  auto b = sys.spawn(fake_butler, route_fn{});
  self->send(reg, register_atom_v, std::string{"node-a"},
             std::vector<registry_entry>{entry("calendar"), entry("health")},
             std::vector<butler_actor>{a, a});
  reply<std::vector<registry_entry>>();
  self->send(reg, register_atom_v, std::string{"node-b"},
             std::vector<registry_entry>{entry("calendar")},
             std::vector<butler_actor>{b});
  reply<std::vector<registry_entry>>();
  // Round robin alone would alternate; avoiding a, every lookup gets b.
  for (int i = 0; i < 4; ++i) {
    self->send(reg, lookup_atom_v, std::string{"calendar"}, a);
    EXPECT_EQ(reply<butler_actor>(), b) << "lookup " << i;
  }
  // Health has one host: avoiding it still finds it.
  self->send(reg, lookup_atom_v, std::string{"health"}, a);
  EXPECT_EQ(reply<butler_actor>(), a);
  // The local host is passed over too when it is the one that failed.
  self->send(reg, register_atom_v, entry("calendar"), local);
  self->send(reg, lookup_atom_v, std::string{"calendar"}, local);
  auto other = reply<butler_actor>();
  EXPECT_TRUE(other == a || other == b);
  self->send(reg, lookup_atom_v, std::string{"calendar"}, butler_actor{});
  EXPECT_EQ(reply<butler_actor>(), local) << "no host to avoid: local first";
  for (auto& x : {local, a, b})
    self->send_exit(x, caf::exit_reason::user_shutdown);
  sched.run();
}

} // namespace
} // namespace butlers::test
