#pragma once

// A typed fake of the inbox writer for actor tests. It implements the
// writer's whole interface (the compiler checks it), records every write it
// is asked for in a shared script the test reads, and answers as the script
// says: at once or held until released, each kind of write by a function
// the test may replace, or every request with one error. Tests that need a
// table behind the writer (a route inbox, the thread tables) give it as
// those functions rather than writing a fake of their own.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/interfaces.hpp"
#include "runtime/error.hpp"
#include "runtime/messages.hpp"
#include "test/support/write_request.hpp"

namespace butlers::test {

/// What the fake writer was asked, and how it answers.
struct writer_script {
  // -- what it was asked, in arrival order; the writes inside a
  // -- write_request are recorded with those that came alone

  /// Every record appended, alone or in a batch.
  std::vector<inbox_record> appends;
  /// Every claim.
  std::vector<inbox_ref> claims;
  /// Every completion.
  std::vector<completion> completions;
  /// Every work op.
  std::vector<work_op> work;
  /// Every named statement.
  std::vector<named_statement> named;
  /// Every write_request, whole.
  std::vector<write_request> requests;

  // -- how it answers

  /// When set, every request is answered with it instead (when answered:
  /// a held request fails if this is set by the time it is released).
  caf::error fail;
  /// Claims are granted (else: held by someone else).
  bool grant_claims = true;
  /// Appends (alone and batched) wait for `flush_atom`, as they would for
  /// the real writer's commit.
  bool hold_appends = false;
  /// Write requests wait for `flush_atom`.
  bool hold_requests = false;
  /// Claims wait until `answer_held_claims` answers them.
  bool hold_claims = false;
  /// Answers one append; none: stored under its request id, not a
  /// duplicate.
  std::function<caf::expected<append_result>(inbox_record&)> on_append;
  /// Answers one work op; none: `work_result{}` (not ok).
  std::function<caf::expected<work_result>(work_op&)> on_work;
  /// Answers one named statement; none: `named_result{}`.
  std::function<caf::expected<named_result>(named_statement&)> on_named;

  // -- held requests and their promises (answered inside the fake actor:
  // -- a promise delivered from outside it would use a scheduler context
  // -- the test coordinator has discarded)

  std::vector<
    std::pair<inbox_record, caf::typed_response_promise<append_result>>>
    held_appends;
  std::vector<
    std::pair<std::vector<inbox_record>,
              caf::typed_response_promise<std::vector<append_result>>>>
    held_batches;
  std::vector<
    std::pair<write_request, caf::typed_response_promise<write_reply>>>
    held_requests;
  std::vector<std::pair<inbox_ref, caf::typed_response_promise<claim_result>>>
    held_claims;

  /// The answer to one append.
  caf::expected<append_result> append(inbox_record& rec) {
    if (on_append)
      return on_append(rec);
    return stored_as(rec.context.request_id, false);
  }

  /// The answer to a batch: each record's own answer, in order.
  caf::expected<std::vector<append_result>> append_all(
    std::vector<inbox_record>& recs) {
    std::vector<append_result> out;
    for (auto& rec : recs) {
      auto r = append(rec);
      if (!r)
        return std::move(r.error());
      out.push_back(std::move(*r));
    }
    return out;
  }

  /// As the real claim: granted with a fencing token, the stored row (the
  /// last append of that request) coming back with it.
  claim_result claim(const inbox_ref& ref) const {
    claim_result c{grant_claims, 7, {}};
    for (auto& rec : appends)
      if (rec.context.request_id == ref.request_id)
        c.record = rec;
    return c;
  }

  caf::expected<work_result> work_on(work_op& op) {
    if (on_work)
      return on_work(op);
    return work_result{};
  }

  caf::expected<named_result> exec(named_statement& st) {
    if (on_named)
      return on_named(st);
    return named_result{};
  }

  /// The answer to a write_request: each write's own, as the real writer
  /// places them (completions always succeed).
  write_reply answer(write_request& req) {
    return answer_each(
      req,
      [this](named_statement& st) {
        return exec(st);
      },
      [this](work_op& op) {
        return work_on(op);
      },
      [](completion&) -> caf::expected<bool> {
        return true;
      });
  }

  /// Answers the held claims of `request_id` with `r`. Only from inside
  /// the fake (an `on_named` function, say).
  void answer_held_claims(const std::string& request_id,
                          const claim_result& r) {
    auto held = std::move(held_claims);
    held_claims.clear();
    for (auto& [ref, rp] : held) {
      if (ref.request_id == request_id)
        rp.deliver(r);
      else
        held_claims.emplace_back(std::move(ref), std::move(rp));
    }
  }

  /// Answers every held append, batch and write_request, each as it would
  /// be answered now.
  void release() {
    auto appends_now = std::move(held_appends);
    auto batches_now = std::move(held_batches);
    auto requests_now = std::move(held_requests);
    held_appends.clear();
    held_batches.clear();
    held_requests.clear();
    for (auto& [rec, rp] : appends_now)
      deliver(rp, fail ? caf::expected<append_result>{fail} : append(rec));
    for (auto& [recs, rp] : batches_now)
      deliver(rp, fail ? caf::expected<std::vector<append_result>>{fail}
                       : append_all(recs));
    for (auto& [req, rp] : requests_now)
      deliver(rp, fail ? caf::expected<write_reply>{fail}
                       : caf::expected<write_reply>{answer(req)});
  }

 private:
  template<class T>
  static void deliver(caf::typed_response_promise<T>& rp, caf::expected<T> x) {
    if (x)
      rp.deliver(std::move(*x));
    else
      rp.deliver(std::move(x.error()));
  }
};

/// The fake inbox writer: records each request in `s`, then answers it as
/// `s` says. `flush_atom` (the real writer's commit token) releases what
/// is held.
inline inbox_writer_actor::behavior_type fake_writer(
  inbox_writer_actor::pointer self, std::shared_ptr<writer_script> s) {
  return {
    [](status_atom) {
      return db_status{true, true, {}, 0, 0};
    },
    [self, s](append_atom, inbox_record& rec) -> caf::result<append_result> {
      s->appends.push_back(rec);
      if (s->hold_appends) {
        auto rp = self->make_response_promise<append_result>();
        s->held_appends.emplace_back(rec, rp);
        return rp;
      }
      if (s->fail)
        return s->fail;
      return s->append(rec);
    },
    [self, s](append_atom, std::vector<inbox_record>& recs)
      -> caf::result<std::vector<append_result>> {
      s->appends.insert(s->appends.end(), recs.begin(), recs.end());
      if (s->hold_appends) {
        auto rp = self->make_response_promise<std::vector<append_result>>();
        s->held_batches.emplace_back(recs, rp);
        return rp;
      }
      if (s->fail)
        return s->fail;
      return s->append_all(recs);
    },
    [self, s](claim_atom, inbox_ref& ref) -> caf::result<claim_result> {
      s->claims.push_back(ref);
      if (s->hold_claims) {
        auto rp = self->make_response_promise<claim_result>();
        s->held_claims.emplace_back(ref, rp);
        return rp;
      }
      if (s->fail)
        return s->fail;
      return s->claim(ref);
    },
    [s](complete_atom, completion& c) -> caf::result<bool> {
      s->completions.push_back(c);
      if (s->fail)
        return s->fail;
      return true;
    },
    [s](work_atom, work_op& op) -> caf::result<work_result> {
      s->work.push_back(op);
      if (s->fail)
        return s->fail;
      return s->work_on(op);
    },
    [s](exec_atom, named_statement& st) -> caf::result<named_result> {
      s->named.push_back(st);
      if (s->fail)
        return s->fail;
      return s->exec(st);
    },
    [self, s](exec_atom, write_request& req) -> caf::result<write_reply> {
      s->requests.push_back(req);
      s->named.insert(s->named.end(), req.named.begin(), req.named.end());
      s->work.insert(s->work.end(), req.work.begin(), req.work.end());
      s->completions.insert(s->completions.end(), req.completions.begin(),
                            req.completions.end());
      if (s->hold_requests) {
        auto rp = self->make_response_promise<write_reply>();
        s->held_requests.emplace_back(req, rp);
        return rp;
      }
      if (s->fail)
        return s->fail;
      return s->answer(req);
    },
    [s](flush_atom) {
      s->release();
    },
    [](link_atom, uint32_t, bool, const std::string&) {},
  };
}

} // namespace butlers::test
