#pragma once

// An actor's side of the inbox writer for lifecycle and routing writes:
// few requests, however many writes.

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <caf/error.hpp>

#include "actors/interfaces.hpp"
#include "runtime/error.hpp"

namespace butlers {

/// Hands one actor's lifecycle and routing writes (named statements, work
/// ops, completions) to the inbox writer in few requests.
///
/// Why: CAF 0.17 keeps an actor's outstanding response handlers in a vector
/// that every new request and every response searches, and erases from,
/// linearly. With a request per write, a burst that left thousands of
/// writes waiting for the database made every request and every response
/// of the switchboard and the butlers cost thousands of steps: a quarter of
/// the node's CPU in the pipeline benchmark. Here at most `max_in_flight`
/// requests are out; writes that come meanwhile wait here and leave
/// together as the next request when one comes back. A write alone leaves
/// at once, so nothing waits at low load.
///
/// Writes leave in submission order (one sender to one receiver is FIFO in
/// CAF), and the writer places each one as if it had come alone, so its
/// per-key ordering holds. What waits here is bounded by what its owner
/// holds (every write belongs to a request, work item or thread the owner
/// tracks under its own limits).
///
/// The owner must be alive while requests are out: the response handlers
/// refer to this object (a member of the owner's state).
class writer_client {
 public:
  template<class T>
  using on_ok = std::function<void(T&)>;
  using on_error = std::function<void(const caf::error&)>;

  explicit writer_client(size_t max_in_flight = 16)
    : max_in_flight_(max_in_flight) {
    // nop
  }

  void set_writer(inbox_writer_actor writer) {
    writer_ = std::move(writer);
  }

  /// Requests out now (for tests and gauges).
  size_t in_flight() const {
    return in_flight_;
  }

  /// Writes waiting for a request to leave in.
  size_t waiting() const {
    return waiting_.req.named.size() + waiting_.req.work.size()
           + waiting_.req.completions.size();
  }

  template<class Self>
  void exec(Self* self, named_statement x, on_ok<named_result> ok,
            on_error err) {
    waiting_.req.named.push_back(std::move(x));
    waiting_.named.push_back({std::move(ok), std::move(err)});
    flush(self);
  }

  template<class Self>
  void work(Self* self, work_op x, on_ok<work_result> ok, on_error err) {
    waiting_.req.work.push_back(std::move(x));
    waiting_.work.push_back({std::move(ok), std::move(err)});
    flush(self);
  }

  template<class Self>
  void complete(Self* self, completion x, on_ok<bool> ok, on_error err) {
    waiting_.req.completions.push_back(std::move(x));
    waiting_.completions.push_back({std::move(ok), std::move(err)});
    flush(self);
  }

 private:
  template<class T>
  struct callbacks {
    on_ok<T> ok;
    on_error err;
  };

  /// One request and the callbacks of its writes, in the same order.
  struct batch {
    write_request req;
    std::vector<callbacks<named_result>> named;
    std::vector<callbacks<work_result>> work;
    std::vector<callbacks<bool>> completions;
  };

  template<class Self>
  void flush(Self* self) {
    if (in_flight_ >= max_in_flight_ || waiting() == 0)
      return;
    ++in_flight_;
    auto out = std::make_shared<batch>(std::move(waiting_));
    waiting_ = batch{};
    auto req = std::move(out->req);
    self->request(writer_, caf::infinite, exec_atom_v, std::move(req))
      .then(
        [this, self, out](write_reply& r) {
          --in_flight_;
          answer(*out, r);
          flush(self);
        },
        [this, self, out](const caf::error& err) {
          --in_flight_;
          fail(*out, err);
          flush(self);
        });
  }

  static void answer(batch& b, write_reply& r) {
    size_t e = 0;
    auto error_at = [&r](size_t i) {
      auto code = i < r.errors.size() && r.errors[i] != 0
                    ? static_cast<butlers_errc>(r.errors[i])
                    : butlers_errc::internal_error;
      return caf::error{code, i < r.error_messages.size()
                                ? r.error_messages[i]
                                : std::string{"no answer for this write"}};
    };
    auto failed = [&r](size_t i) {
      return i < r.errors.size() && r.errors[i] != 0;
    };
    for (size_t i = 0; i < b.named.size(); ++i, ++e) {
      if (failed(e) || i >= r.named.size())
        b.named[i].err(error_at(e));
      else
        b.named[i].ok(r.named[i]);
    }
    for (size_t i = 0; i < b.work.size(); ++i, ++e) {
      if (failed(e) || i >= r.work.size())
        b.work[i].err(error_at(e));
      else
        b.work[i].ok(r.work[i]);
    }
    for (size_t i = 0; i < b.completions.size(); ++i, ++e) {
      if (failed(e) || i >= r.completions.size()) {
        b.completions[i].err(error_at(e));
      } else {
        bool done = r.completions[i];
        b.completions[i].ok(done);
      }
    }
  }

  static void fail(batch& b, const caf::error& err) {
    for (auto& c : b.named)
      c.err(err);
    for (auto& c : b.work)
      c.err(err);
    for (auto& c : b.completions)
      c.err(err);
  }

  size_t max_in_flight_;
  size_t in_flight_ = 0;
  inbox_writer_actor writer_;
  batch waiting_;
};

} // namespace butlers
