#pragma once

// A GoogleTest fixture over CAF's test_coordinator: nothing runs until the
// test calls sched.run(), and time is virtual. For actor logic tests.

#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <gtest/gtest.h>

#include "actors/node_context.hpp"
#include "actors/type_ids.hpp"

namespace butlers::test {

struct deterministic_fixture : ::testing::Test {
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  caf::scheduler::test_coordinator& sched = dynamic_cast<
    caf::scheduler::test_coordinator&>(sys.scheduler());
  caf::scoped_actor self{sys};
  /// Status and metrics, as a node would share them with its actors.
  node_context_ptr ctx = std::make_shared<node_context>();
};

} // namespace butlers::test
