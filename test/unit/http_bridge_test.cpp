// The bridge from an HTTP thread to an actor's request/response, in
// virtual time: the reply, the actor's error, and no answer in time.

#include <optional>
#include <string>

#include <caf/typed_event_based_actor.hpp>
#include <gtest/gtest.h>

#include "actors/http_bridge.hpp"
#include "actors/interfaces.hpp"
#include "runtime/error.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

using namespace std::chrono_literals;

/// Answers a read with the statement's first parameter, refuses "bad",
/// and never answers "slow". (The unused int: CAF 0.17 dereferences a null
/// argument tuple when a function-based actor takes no arguments besides
/// self; UBSan objects.)
db_reader_actor::behavior_type fake_reader(db_reader_actor::pointer self, int) {
  return {
    [self](read_atom, named_statement& stmt) -> caf::result<named_result> {
      auto& key = stmt.params.at(0);
      if (key == "bad")
        return caf::error{butlers_errc::conflict, std::string{"refused"}};
      if (key == "slow")
        return self->make_response_promise<named_result>();
      return named_result{true, {{key}}};
    },
  };
}

struct HttpBridge : test::deterministic_fixture {
  db_reader_actor reader = sys.spawn(fake_reader, 0);
  std::optional<std::string> reply;
  std::optional<caf::error> failure;

  void read(std::string key) {
    bridge<named_result>(
      sys, reader, 100ms,
      [this](const named_result& r) {
        reply = r.rows.at(0).at(0);
      },
      [this](const caf::error& err) {
        failure = err;
      },
      read_atom_v, named_statement{"q", {std::move(key)}});
  }

  ~HttpBridge() override {
    caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

TEST_F(HttpBridge, HandsTheReplyToItsCallback) {
  read("t-123");
  sched.run();
  EXPECT_EQ(reply, "t-123");
  EXPECT_FALSE(failure);
}

TEST_F(HttpBridge, HandsTheActorsErrorToItsErrorCallback) {
  read("bad");
  sched.run();
  EXPECT_FALSE(reply);
  ASSERT_TRUE(failure);
  EXPECT_EQ(code_of(*failure), butlers_errc::conflict);
  EXPECT_EQ(message_of(*failure), "refused");
}

TEST_F(HttpBridge, ReportsATimeoutWhenNoAnswerComesInTime) {
  read("slow");
  sched.run();
  EXPECT_FALSE(reply);
  EXPECT_FALSE(failure);
  sched.advance_time(100ms);
  sched.run();
  EXPECT_FALSE(reply);
  ASSERT_TRUE(failure);
  EXPECT_EQ(code_of(*failure), butlers_errc::timeout);
}

} // namespace
} // namespace butlers
