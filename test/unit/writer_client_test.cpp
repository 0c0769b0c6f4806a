// The writer client: few requests however many writes, in order, each
// write answered with its own result (actors/writer_client.hpp).

#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <gtest/gtest.h>

#include "actors/writer_client.hpp"
#include "test/support/deterministic.hpp"

namespace butlers {
namespace {

/// What the stand-in writer saw, its requests held until answered, and how
/// it answers them.
struct writer_log {
  std::vector<write_request> requests;
  std::vector<caf::typed_response_promise<write_reply>> held;
  /// Positions (among all writes of a request) that fail on their own.
  std::vector<size_t> failing;
  /// When set, whole requests fail with it.
  caf::error refuse;
};

write_reply answer_for(const write_request& req,
                       const std::vector<size_t>& failing) {
  write_reply r;
  auto total = req.named.size() + req.work.size();
  r.errors.assign(total, 0);
  r.error_messages.resize(total);
  for (auto& x : req.named)
    r.named.push_back(named_result{true, {{x.query}}});
  for (size_t k = 0; k < req.work.size(); ++k)
    r.work.push_back(work_result{true, false, 0, {}, {}, {}});
  for (auto k : failing) {
    r.errors[k] = static_cast<uint8_t>(butlers_errc::database_unavailable);
    r.error_messages[k] = "down";
  }
  return r;
}

/// Holds every write_request; answers all held ones on flush_atom (inside
/// the actor, where promises are delivered).
inbox_writer_actor::behavior_type holding_writer(
  inbox_writer_actor::pointer self, std::shared_ptr<writer_log> log) {
  auto unused = [] {
    return caf::error{butlers_errc::internal_error, "not used"};
  };
  return {
    [](status_atom) {
      return db_status{};
    },
    [unused](append_atom, inbox_record&) -> caf::result<append_result> {
      return unused();
    },
    [unused](append_atom, std::vector<inbox_record>&)
      -> caf::result<std::vector<append_result>> {
      return unused();
    },
    [unused](claim_atom, inbox_ref&) -> caf::result<claim_result> {
      return unused();
    },
    [unused](complete_atom, completion&) -> caf::result<bool> {
      return unused();
    },
    [unused](work_atom, work_op&) -> caf::result<work_result> {
      return unused();
    },
    [unused](exec_atom, named_statement&) -> caf::result<named_result> {
      return unused();
    },
    [self, log](exec_atom, write_request& req) -> caf::result<write_reply> {
      log->requests.push_back(req);
      auto rp = self->make_response_promise<write_reply>();
      log->held.push_back(rp);
      return rp;
    },
    [log](flush_atom) {
      auto held = std::move(log->held);
      log->held.clear();
      auto first = log->requests.size() - held.size();
      for (size_t i = 0; i < held.size(); ++i) {
        if (log->refuse)
          held[i].deliver(log->refuse);
        else
          held[i].deliver(answer_for(log->requests[first + i], log->failing));
      }
    },
    [](link_atom, uint32_t, bool, const std::string&) {},
  };
}

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

struct WriterClient : test::deterministic_fixture {
  std::shared_ptr<writer_log> log = std::make_shared<writer_log>();
  std::shared_ptr<std::vector<std::string>>
    seen = std::make_shared<std::vector<std::string>>();
  inbox_writer_actor writer = sys.spawn(holding_writer, log);
  caf::actor who = sys.spawn(owner, writer, seen);

  /// Answers every held request: every write succeeds except those at the
  /// positions in `failing`.
  void answer(std::vector<size_t> failing = {}) {
    log->failing = std::move(failing);
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
  ASSERT_EQ(log->requests.size(), 1u);
  EXPECT_EQ(log->requests[0].named.size(), 1u);
  answer();
  EXPECT_EQ(*seen, (std::vector<std::string>{"a rows 1"}));
}

TEST_F(WriterClient, WritesThatComeWhileARequestIsOutLeaveTogetherInOrder) {
  self->send(who, std::string{"a"});
  sched.run();
  for (auto w : {"b", "finish:w-1", "c"})
    self->send(who, std::string{w});
  sched.run();
  ASSERT_EQ(log->requests.size(), 1u) << "one request out at a time here";
  answer();
  ASSERT_EQ(log->requests.size(), 2u) << "the three waiting leave together";
  auto& second = log->requests[1];
  ASSERT_EQ(second.named.size(), 2u);
  EXPECT_EQ(second.named[0].query, "b");
  EXPECT_EQ(second.named[1].query, "c");
  ASSERT_EQ(second.work.size(), 1u);
  EXPECT_EQ(second.work[0].item.work_id, "w-1");
  // Each write gets its own answer; "c" (position 1) failed on its own.
  answer({1});
  EXPECT_EQ(*seen,
            (std::vector<std::string>{"a rows 1", "b rows 1", "c failed: down",
                                      "finish:w-1 ok"}));
}

TEST_F(WriterClient, AFailedRequestFailsEveryWriteInIt) {
  log->refuse = caf::error{butlers_errc::database_unavailable,
                           std::string{"gone"}};
  self->send(who, std::string{"a"});
  sched.run();
  self->send(who, std::string{"b"});
  self->send(who, std::string{"c"});
  sched.run();
  answer();
  ASSERT_EQ(log->requests.size(), 2u);
  answer();
  EXPECT_EQ(*seen, (std::vector<std::string>{"a failed: gone", "b failed: gone",
                                             "c failed: gone"}));
}

} // namespace
} // namespace butlers
