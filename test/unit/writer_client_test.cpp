// The writer client: few requests however many writes, in order, each
// write answered with its own result (actors/writer_client.hpp).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <gtest/gtest.h>

#include "actors/writer_client.hpp"
#include "test/support/deterministic.hpp"
#include "test/support/fake_writer.hpp"

namespace butlers {
namespace {

struct owner_state {
  writer_client writes{1};
};

/// An actor that owns a writer client: each string message is a statement
/// to write (its query); "finish:<id>" a work op.
caf::behavior owner(caf::stateful_actor<owner_state>* self,
                    inbox_writer_actor writer,
                    std::shared_ptr<std::vector<std::string>> seen) {
  self->state.writes.set_writer(writer);
  return {
    [self, seen](const std::string& what) {
      auto& st = self->state;
      if (what.rfind("finish:", 0) == 0) {
        work_op op;
        op.kind = work_op_kind::finish;
        op.item.work_id = what.substr(7);
        st.writes.work(
          self, op,
          [seen, what](work_result& r) {
            seen->push_back(what + (r.ok ? " ok" : " fenced"));
          },
          [seen, what](const caf::error& err) {
            seen->push_back(what + " " + to_string(err));
          });
        return;
      }
      st.writes.exec(
        self, named_statement{what, {"id-1"}},
        [seen, what](named_result& r) {
          seen->push_back(what + " rows " + std::to_string(r.rows.size()));
        },
        [seen, what](const caf::error& err) {
          seen->push_back(what + " failed: " + std::string{message_of(err)});
        });
    },
  };
}

/// The shared fake writer, holding every write_request until `answer`.
std::shared_ptr<test::writer_script> holding_writer() {
  auto s = std::make_shared<test::writer_script>();
  s->hold_requests = true;
  s->on_work = [](work_op&) -> caf::expected<work_result> {
    return work_result{true, false, 0, {}, {}, {}};
  };
  return s;
}

struct WriterClient : test::deterministic_fixture {
  std::shared_ptr<test::writer_script> script = holding_writer();
  std::shared_ptr<std::vector<std::string>>
    seen = std::make_shared<std::vector<std::string>>();
  inbox_writer_actor writer = sys.spawn(test::fake_writer, script);
  caf::actor who = sys.spawn(owner, writer, seen);

  /// Answers every held request: every write succeeds (a statement with
  /// one row, its query) except the statements in `failing`.
  void answer(std::vector<std::string> failing = {}) {
    script->on_named =
      [failing](named_statement& x) -> caf::expected<named_result> {
      if (std::find(failing.begin(), failing.end(), x.query) != failing.end())
        return caf::error{butlers_errc::database_unavailable, "down"};
      return named_result{true, {{x.query}}};
    };
    self->send(writer, flush_atom_v);
    sched.run();
  }

  ~WriterClient() override {
    self->send_exit(who, caf::exit_reason::user_shutdown);
    self->send_exit(writer, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

TEST_F(WriterClient, AWriteAloneLeavesAtOnce) {
  self->send(who, std::string{"a"});
  sched.run();
  ASSERT_EQ(script->requests.size(), 1u);
  EXPECT_EQ(script->requests[0].named.size(), 1u);
  answer();
  EXPECT_EQ(*seen, (std::vector<std::string>{"a rows 1"}));
}

TEST_F(WriterClient, WritesThatComeWhileARequestIsOutLeaveTogetherInOrder) {
  self->send(who, std::string{"a"});
  sched.run();
  for (auto w : {"b", "finish:w-1", "c"})
    self->send(who, std::string{w});
  sched.run();
  ASSERT_EQ(script->requests.size(), 1u) << "one request out at a time here";
  answer();
  ASSERT_EQ(script->requests.size(), 2u) << "the three waiting leave together";
  auto& second = script->requests[1];
  ASSERT_EQ(second.named.size(), 2u);
  EXPECT_EQ(second.named[0].query, "b");
  EXPECT_EQ(second.named[1].query, "c");
  ASSERT_EQ(second.work.size(), 1u);
  EXPECT_EQ(second.work[0].item.work_id, "w-1");
  // Each write gets its own answer; "c" (position 1) failed on its own.
  answer({"c"});
  EXPECT_EQ(*seen,
            (std::vector<std::string>{"a rows 1", "b rows 1", "c failed: down",
                                      "finish:w-1 ok"}));
}

TEST_F(WriterClient, AFailedRequestFailsEveryWriteInIt) {
  script->fail = caf::error{butlers_errc::database_unavailable,
                            std::string{"gone"}};
  self->send(who, std::string{"a"});
  sched.run();
  self->send(who, std::string{"b"});
  self->send(who, std::string{"c"});
  sched.run();
  answer();
  ASSERT_EQ(script->requests.size(), 2u);
  answer();
  EXPECT_EQ(*seen, (std::vector<std::string>{"a failed: gone", "b failed: gone",
                                             "c failed: gone"}));
}

} // namespace
} // namespace butlers
