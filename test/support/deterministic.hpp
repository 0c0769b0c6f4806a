#pragma once

// A GoogleTest fixture over CAF's test_coordinator: nothing runs until the
// test calls sched.run(), and time is virtual. For actor logic tests.

#include <limits>
#include <memory>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <gtest/gtest.h>

#include "actors/node_context.hpp"
#include "actors/type_ids.hpp"

namespace butlers::test {

/// CAF's test_coordinator, safe to send to from other threads: an adapter's
/// own thread (the outbox's, a subprocess reader) may send to an actor
/// while the test runs the scheduler, and test_coordinator's job queue is
/// not synchronized (TSan showed the race). A recursive mutex guards the
/// queue: taken by `enqueue` from any thread and held by `run` and
/// `run_once` (an actor they run enqueues on the same thread).
class shared_test_coordinator : public caf::scheduler::test_coordinator {
 public:
  using test_coordinator::test_coordinator;

  void enqueue(caf::resumable* ptr) override {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    test_coordinator::enqueue(ptr);
  }

  size_t run(size_t max_count = std::numeric_limits<size_t>::max()) {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    return test_coordinator::run(max_count);
  }

  void run_once() {
    std::lock_guard<std::recursive_mutex> guard{mtx_};
    test_coordinator::run_once();
  }

 private:
  std::recursive_mutex mtx_;
};

struct deterministic_fixture : ::testing::Test {
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.module_factories.emplace_back([](caf::actor_system& sys) {
      return static_cast<caf::actor_system::module*>(
        new shared_test_coordinator(sys));
    });
    return cfg;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  shared_test_coordinator& sched = dynamic_cast<shared_test_coordinator&>(
    sys.scheduler());
  caf::scoped_actor self{sys};
  /// Status and metrics, as a node would share them with its actors.
  node_context_ptr ctx = std::make_shared<node_context>();
};

} // namespace butlers::test
